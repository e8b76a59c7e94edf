"""Docker execution backend: the official SWE-bench instance images (`sweb.eval.<arch>.<id>`).

Each image holds the repository at /testbed at the base commit and a conda env `testbed` with the
repository installed, exactly as the official harness evaluates. Reranking runs *selected* tests
there (never the hidden test patch): a container per request, the patches copied in and applied with
`git apply`, then the repository's own test command from the `swebench` package's specs (pytest with
`-rA` when the package is missing) on the test files. Results are read with the `swebench` log parser
for the repository when available, else as pytest's `-rA` summary.

Everything Docker-related is imported or called lazily; constructing the backend without an engine
raises `HarnessUnavailable` with the reason.
"""

from __future__ import annotations

import platform
import shlex
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agentless.evaluate import HarnessUnavailable, docker_problem
from agentless.execution.base import TestRun, parse_pytest_report, test_files
from agentless.instances import Instance, instance_to_row

DEFAULT_TEST_CMD = "pytest -rA -p no:cacheprovider"


def instance_image(instance_id: str, namespace: str = "swebench", tag: str = "latest") -> str:
    """The published image of an instance (`__` is spelled `_1776_` in Docker Hub names)."""
    arch = "arm64" if platform.machine() in {"aarch64", "arm64"} else "x86_64"
    name = f"sweb.eval.{arch}.{instance_id.lower()}:{tag}"
    return f"{namespace}/{name}".replace("__", "_1776_") if namespace else name


def _repo_test_cmd(instance: Instance) -> str:
    try:
        from swebench.harness.constants import MAP_REPO_VERSION_TO_SPECS
    except ImportError:
        return DEFAULT_TEST_CMD
    specs = MAP_REPO_VERSION_TO_SPECS.get(instance.repo, {}).get(instance.version, {})
    cmd = specs.get("test_cmd", DEFAULT_TEST_CMD)
    return cmd[-1] if isinstance(cmd, list) else str(cmd)


def _parse(instance: Instance, log: str) -> dict[str, str]:
    try:
        from swebench.harness.log_parsers import MAP_REPO_TO_PARSER
        from swebench.harness.test_spec.test_spec import make_test_spec

        parser = MAP_REPO_TO_PARSER[instance.repo]
        parsed = parser(log, make_test_spec(instance_to_row(instance)))
        return {k: str(getattr(v, "value", v)) for k, v in parsed.items()}
    except Exception:  # the package is optional and its API moves; pytest's summary is the fallback
        return parse_pytest_report(log)


@dataclass
class DockerBackend:
    """`ExecutionBackend` over the official images. `namespace=""` uses locally built images."""

    namespace: str = "swebench"
    timeout_s: float = 1800.0
    docker: str = "docker"

    def __post_init__(self) -> None:
        problem = docker_problem()
        if problem is not None:
            raise HarnessUnavailable(f"the Docker backend needs a Docker engine: {problem}")

    def run_tests(self, instance: Instance, tests: Sequence[str], patches: Sequence[str] = ()) -> TestRun:
        image = instance_image(instance.instance_id, self.namespace)
        with tempfile.TemporaryDirectory(prefix="swerl-docker-") as tmp:
            script = ["set -u", "cd /testbed", "source /opt/miniconda3/bin/activate testbed"]
            for i, patch in enumerate(patches):
                Path(tmp, f"{i}.patch").write_text(patch, encoding="utf-8")
                apply = f"git apply --whitespace=nowarn /patches/{i}.patch"
                script.append(f"{apply} || {{ echo SWERL_APPLY_FAILED; exit 97; }}")
            if tests:
                files = " ".join(shlex.quote(f) for f in test_files(tests))
                script.append(f"{_repo_test_cmd(instance)} {files}")
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
