"""Docker execution backend: the official SWE-bench instance images, on the swebench 5.x API.

Each image holds the repository at /testbed at the base commit and a conda env `testbed` with the
repository installed, exactly as the official harness evaluates. swebench 5.x datasets name each
instance's image (`image` column), its evaluation script (`eval_script`) and log parser (`log_parser`);
this backend reads them from the instance and stops with a clear error when a row lacks them (a 4.x-era
export) or the installed `swebench` is not 5.x, rather than guess a test command.

Reranking runs *selected* tests there (never the hidden test patch): a container per request, the
patches applied with the harness's commands, then the test command of the instance's eval script with
its test files replaced by the requested ones. Results are read with the instance's log parser.

Everything Docker-related is called lazily; constructing the backend without an engine raises
`HarnessUnavailable` with the reason.
"""

from __future__ import annotations

import shlex
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from swerl.errors import UserError
from swerl.execution.base import TestRun, test_files
from swerl.execution.evaluate import HarnessUnavailable, docker_problem
from swerl.execution.harness import eval_plan, harness_api, patch_files, test_spec
from swerl.execution.instances import Instance


def instance_image(instance: Instance) -> str:
    """The instance's image as the 5.x dataset names it; UserError for rows without the column."""
    image = str(instance.extra.get("image") or "")
    if not image or "eval_script" not in instance.extra:
        raise UserError(
            f"{instance.instance_id}: the Docker backend needs the dataset's image, eval_script and "
            "log_parser columns (swebench 5.x datasets); this row has none"
        )
    return image


def selected_test_cmd(instance: Instance, tests: Sequence[str]) -> str:
    """The eval script's test command with its test files replaced by those of `tests`."""
    plan = eval_plan(instance)
    own = set(plan.reset_files) | set(patch_files(instance.test_patch))
    lines = plan.test_cmd.split("\n")
    words = shlex.split(lines[-1])
    kept = [w for w in words if w not in own]
    if len(kept) == len(words):
        raise UserError(
            f"{instance.instance_id}: cannot select tests in its test command {lines[-1]!r} "
            "(it names no test file of the test patch)"
        )
    return "\n".join([*lines[:-1], shlex.join([*kept, *test_files(tests)])])


def _parse(instance: Instance, log: str) -> dict[str, str]:
    plan = eval_plan(instance)
    return harness_api().PARSER_REGISTRY[plan.log_parser](log, test_spec(instance, plan))


@dataclass
class DockerBackend:
    """`ExecutionBackend` over the official images named by the dataset."""

    timeout_s: float = 1800.0
    docker: str = "docker"

    def __post_init__(self) -> None:
        harness_api()  # the swebench 5.x API, or a clear error
        problem = docker_problem()
        if problem is not None:
            raise HarnessUnavailable(f"the Docker backend needs a Docker engine: {problem}")

    def run_tests(self, instance: Instance, tests: Sequence[str], patches: Sequence[str] = ()) -> TestRun:
        image = instance_image(instance)
        with tempfile.TemporaryDirectory(prefix="swerl-docker-") as tmp:
            script = ["set -u", "cd /testbed", "source /opt/miniconda3/bin/activate testbed"]
            for i, patch in enumerate(patches):
                Path(tmp, f"{i}.patch").write_text(patch, encoding="utf-8")
                attempts = " || ".join(
                    f"{{ git checkout -q -- . ; git clean -fdq ; {cmd} /patches/{i}.patch ; }}"
                    for cmd in harness_api().GIT_APPLY_CMDS
                )
                script.append(f"{{ {attempts} ; }} || {{ echo SWERL_APPLY_FAILED; exit 97; }}")
                script.append("git add -A && git -c user.name=swerl -c user.email=s@l commit -qm p")
            if tests:
                script.append(selected_test_cmd(instance, tests))
            cmd = [
                self.docker,
                "run",
                "--rm",
                "--network",
                "none",
                "-v",
                f"{tmp}:/patches:ro",
                image,
                "bash",
                "-c",
                "\n".join(script),
            ]
            try:
                done = subprocess.run(cmd, capture_output=True, timeout=self.timeout_s, check=False)
            except subprocess.TimeoutExpired as err:
                out = err.stdout.decode(errors="replace") if isinstance(err.stdout, bytes) else ""
                return TestRun("timeout", _parse(instance, out), out)
        log = done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")
        if "SWERL_APPLY_FAILED" in log:
            return TestRun("apply_failed", log=log)
        results = _parse(instance, log) if tests else {}
        return TestRun("ok" if results or not tests else "error", results, log)
