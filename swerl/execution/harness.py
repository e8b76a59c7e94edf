"""SWE-bench's evaluation rules, taken from the `swebench` package (5.x) rather than rewritten.

What the harness does to judge a patch, and where each piece comes from here:

- what to run: the dataset's `eval_script` column (5.x datasets carry it): the test files it resets to
  the base commit, and the test command between its `>>>>> Start Test Output` / `>>>>> End Test Output`
  markers. Rows without it (older exports, rows of `swerl data validate`) get the same shape built from
  the test patch: reset the files it touches, run `pytest -rA` on the Python files it leaves in the tree
  and on the files the test lists name, parse with `parse_log_pytest`.
- how a patch is applied: `GIT_APPLY_CMDS` of `swebench.harness.run_evaluation` (git apply, --3way,
  --reject, then `patch --fuzz=5`), from a pristine tree before each attempt.
- how the log is read and graded: `swebench.harness.grading.get_eval_report` on a log written with the
  harness's markers, with the instance's `log_parser` from `PARSER_REGISTRY`. That brings the harness's
  rules with it: a SKIPPED pass-to-pass test is kept, truncated parametrized ids are prefix-matched, a
  run whose exit status contradicts its log is not trusted.

The `swebench` package is an optional extra (`pip install 'swerl[swebench]'`); `harness_api` says plainly
when it is missing or its API is not the one this module was written against.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from swerl.errors import UserError
from swerl.execution.instances import Instance

START = ">>>>> Start Test Output"
END = ">>>>> End Test Output"
DEFAULT_TEST_CMD = "pytest -rA"
_DIFF_FILE = re.compile(r"^diff --git a/(\S+) b/(\S+)$", re.M)


@functools.cache
def harness_api() -> SimpleNamespace:
    """The pieces of `swebench` this module uses; UserError when the package is missing or differs."""
    try:
        import swebench
        from swebench.harness.constants import (
            APPLY_PATCH_FAIL,
            APPLY_PATCH_PASS,
            TEST_EXIT_CODE,
            TESTS_TIMEOUT,
            EvalType,
            ResolvedStatus,
        )
        from swebench.harness.grading import (
            get_eval_report,
            get_eval_tests_report,
            get_logs_eval,
            get_resolution_status,
        )
        from swebench.harness.log_parsers import PARSER_REGISTRY
        from swebench.harness.run_evaluation import GIT_APPLY_CMDS
        from swebench.types import TestSpec
    except ImportError as err:
        raise UserError(
            f"the local harness needs the `swebench` package 5.x (pip install 'swerl[swebench]'): {err}"
        ) from err
    version = getattr(swebench, "__version__", "?")
    if not str(version).startswith("5."):
        raise UserError(f"the local harness is written for swebench 5.x, found {version}")
    return SimpleNamespace(
        version=version,
        APPLY_PATCH_FAIL=APPLY_PATCH_FAIL,
        APPLY_PATCH_PASS=APPLY_PATCH_PASS,
        TEST_EXIT_CODE=TEST_EXIT_CODE,
        TESTS_TIMEOUT=TESTS_TIMEOUT,
        EvalType=EvalType,
        ResolvedStatus=ResolvedStatus,
        get_eval_report=get_eval_report,
        get_eval_tests_report=get_eval_tests_report,
        get_logs_eval=get_logs_eval,
        get_resolution_status=get_resolution_status,
        PARSER_REGISTRY=PARSER_REGISTRY,
        GIT_APPLY_CMDS=tuple(GIT_APPLY_CMDS),
        TestSpec=TestSpec,
    )


@dataclass(frozen=True)
class EvalPlan:
    """What the harness runs for an instance, outside the container-specific lines of its script."""

    reset_files: tuple[str, ...]
    """Test files put back to the base commit after the model patch, before the test patch."""
    test_cmd: str
    """Shell lines run from the repository root; their output is what the log parser reads."""
    log_parser: str
    eval_type: str
    source: str
    """`eval_script` (the dataset's) or `default` (built from the test patch)."""


def patch_files(patch: str) -> list[str]:
    """Files a unified git diff touches (old and new names), in order of appearance."""
    names = [name for pair in _DIFF_FILE.findall(patch) for name in pair]
    return list(dict.fromkeys(n for n in names if n != "/dev/null"))


def patch_test_files(test_patch: str) -> list[str]:
    """The Python files a test patch leaves in the tree (added or changed; deleted ones are gone): the
    files handed to pytest. A data file (a .toml fixture) or a deleted file named on pytest's command line
    ends the whole run in a usage error with no test results, whatever the answer."""
    files = []
    for chunk in re.split(r"(?m)^(?=diff --git )", test_patch):
        header = _DIFF_FILE.match(chunk)
        head = chunk.split("\n@@", 1)[0]
        # An empty file deleted (a package's `tests/__init__.py` moved away) has no `+++` line.
        if header is None or "\n+++ /dev/null" in head or "\ndeleted file mode" in head:
            continue
        name = header.group(2)
        if name.endswith(".py"):
            files.append(name)
    return list(dict.fromkeys(files))


def _script_lines(eval_script: str) -> list[str]:
    return eval_script.strip().split("\n")


def eval_plan(instance: Instance) -> EvalPlan:
    """The instance's plan: from its `eval_script` when the dataset has one, else the default shape."""
    script = str(instance.extra.get("eval_script") or "")
    parser = str(instance.extra.get("log_parser") or "")
    eval_type = str(instance.extra.get("eval_type") or "pass_and_fail")
    if not script:
        tests = patch_test_files(instance.test_patch)
        listed = [t.split("::", 1)[0] for t in (*instance.fail_to_pass, *instance.pass_to_pass) if "::" in t]
        return EvalPlan(
            tuple(patch_files(instance.test_patch)),
            " ".join([DEFAULT_TEST_CMD, *dict.fromkeys([*tests, *listed])]),
            parser or "parse_log_pytest",
            eval_type,
            "default",
        )
    lines = _script_lines(script)
    starts = [i for i, line in enumerate(lines) if START in line]
    ends = [i for i, line in enumerate(lines) if END in line]
    if len(starts) != 1 or len(ends) < 1 or ends[0] < starts[0]:
        raise UserError(f"{instance.instance_id}: eval_script has no single test-output section")
    reset = f"git checkout {instance.base_commit} "
    resets = [line[len(reset) :].split() for line in lines[: starts[0]] if line.startswith(reset)]
    if not parser:
        raise UserError(f"{instance.instance_id}: eval_script given without a log_parser column")
    # The variables the script sets for the tests (django's locale) are part of the test command: the
    # tests see those and nothing else of ours.
    exports = [line for line in lines[: starts[0]] if line.startswith("export ")]
    return EvalPlan(
        tuple(resets[-1]) if resets else (),
        "\n".join([*exports, *lines[starts[0] + 1 : ends[0]]]),
        parser,
        eval_type,
        "eval_script",
    )


def test_spec(instance: Instance, plan: EvalPlan) -> Any:
    """A swebench `TestSpec` for grading (only its test lists, parser and eval type are read there)."""
    api = harness_api()
    if plan.log_parser not in api.PARSER_REGISTRY:
        raise UserError(f"{instance.instance_id}: log parser {plan.log_parser!r} is not in swebench")
    return api.TestSpec(
        instance_id=instance.instance_id,
        image=str(instance.extra.get("image") or ""),
        eval_script_list=[],
        repo=instance.repo,
        version=instance.version,
        FAIL_TO_PASS=list(instance.fail_to_pass),
        PASS_TO_PASS=list(instance.pass_to_pass),
        log_parser=plan.log_parser,
        eval_type=plan.eval_type,
    )


def grade_log(
    instance: Instance, plan: EvalPlan, patch: str | None, log_path: str, ignore: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """The harness's report for one instance (`resolved`, `tests_status`, ...) from a log on disk.

    `ignore` names tests left out of the verdict (environment failures); the strict verdict is the one
    with `ignore` empty.
    """
    api = harness_api()
    spec = test_spec(instance, plan)
    if ignore:
        spec.FAIL_TO_PASS = [t for t in spec.FAIL_TO_PASS if t not in ignore]
        spec.PASS_TO_PASS = [t for t in spec.PASS_TO_PASS if t not in ignore]
    pred = {"instance_id": instance.instance_id, "model_patch": patch, "model_name_or_path": "swerl"}
    return api.get_eval_report(spec, pred, log_path, include_tests_status=True)[instance.instance_id]


def status_map(instance: Instance, plan: EvalPlan, log_path: str) -> dict[str, str]:
    """Per-test statuses as the harness's parser reads them from the log (empty when it found none)."""
    statuses, _ = harness_api().get_logs_eval(test_spec(instance, plan), log_path)
    return statuses
