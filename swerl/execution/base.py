"""What an execution backend is asked and what it answers, plus the pytest report parser both share."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from swerl.execution.instances import Instance

RunStatus = Literal["ok", "apply_failed", "build_failed", "timeout", "error"]
TestStatus = Literal["PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL", "XPASS"]
_LOG_TAIL = 4000
BUILD_FAILED = "[swerl] the compiled extensions do not build"
"""The log line of a run whose patches changed compiled sources that then failed to compile (no test
ran): a patch's fault in an evaluation or a reward, the environment's in a validation."""


@dataclass
class TestRun:
    """The outcome of one test run. `results` maps test ids (pytest node ids) to their status.

    `status` is about the run, not the tests: `apply_failed` means a patch did not apply and no test
    ran; `build_failed` that the patches changed compiled sources and the extensions did not build
    again (no test ran; the log ends with the build's); `timeout` / `error` mean the results are
    partial or missing.
    """

    __test__ = False  # not a pytest test class, despite the name

    status: RunStatus
    results: dict[str, str] = field(default_factory=dict)
    log: str = ""
    recipe: str = ""
    """The environment's recipe (`TestEnv.recipe`): which environment these results hold for."""

    def passed(self, test_id: str) -> bool:
        return self.results.get(test_id) in ("PASSED", "XFAIL")

    def to_row(self) -> dict[str, object]:
        return {"status": self.status, "results": self.results, "log_tail": self.log[-_LOG_TAIL:]}


class ExecutionBackend(Protocol):
    """Runs tests of an instance's repository at its base commit."""

    def run_tests(self, instance: Instance, tests: Sequence[str], patches: Sequence[str] = ()) -> TestRun:
        """Apply `patches` in order to a fresh copy of the base commit, then run `tests` (node ids).

        A test id given as a bare file path runs the whole file; its tests come back by their own ids.
        """
        ...


_SUMMARY = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S.*?)(?: - .*)?$")


def parse_pytest_report(log: str) -> dict[str, str]:
    """Statuses from pytest's `-rA` short summary (`PASSED path::test`, `FAILED path::test - msg`).

    SKIPPED lines carry `[count] path:line: reason` instead of a node id; they are ignored. An ERROR on
    a whole file (collection error) is reported under the file path.
    """
    results: dict[str, str] = {}
    for line in log.splitlines():
        match = _SUMMARY.match(line.strip())
        if match is None:
            continue
        status, test_id = match.groups()
        if status == "SKIPPED" and test_id.startswith("["):
            continue
        results[test_id.strip()] = status
    return results


def test_files(tests: Sequence[str]) -> list[str]:
    """The files to hand pytest: running whole files avoids node ids that the shell or pytest mangle."""
    return list(dict.fromkeys(t.split("::", 1)[0] for t in tests))
