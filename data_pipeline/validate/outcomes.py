"""The verdict on one row from its test runs: FAIL_TO_PASS, PASS_TO_PASS, flaky tests, or why none.

Pure functions of the runs (`TestRun`s of the core's backend), so the rules are tested on hand-made runs
and every engine reaches the same verdict. "before" runs are the base commit with the test patch, "after"
runs add the gold patch; each side is run several times (`--repeats`). A test that does not pass in a
run (failed, errored, or absent because its file did not collect) counts as not passing there, as the
harness's grading counts a test missing from the log.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from swerl.execution.base import TestRun
from swerl.execution.evaluate import failure_reason, needs_network

REASONS = (
    "executable",
    "no_test_change",
    "env_failed",
    "patch_not_applied",
    "timeout",
    "collection_error",
    "only_flaky",
    "no_fail_to_pass",
    "error",
)
"""Every verdict a row can get, in the funnel's order: `executable`, or why not. `error` is the machine's
failure (a clone without the commit, a sandbox that did not start), not the row's: it is tried again
when the run resumes, unlike every other verdict."""

_PASSING = ("PASSED", "XFAIL")


@dataclass
class Verdict:
    """What validation concluded about one row."""

    reason: str
    fail_to_pass: list[str] = field(default_factory=list)
    pass_to_pass: list[str] = field(default_factory=list)
    flaky: list[str] = field(default_factory=list)
    detail: str = ""
    network: list[str] = field(default_factory=list)
    """Tests that fail after the fix in every run with a network error (a refused connection, a name that
    does not resolve): the sandbox has no network, so they are in neither list, whatever the fix."""
    """For a row that is not executable: which patch, which step, the log's tail."""


def _passes(run: TestRun, test: str) -> bool:
    return run.results.get(test) in _PASSING


def _collection_errors(run: TestRun) -> list[str]:
    """Files pytest could not collect (reported under the file's path, not a test id), or the whole run
    when pytest ended in an error of its own (a usage error, an internal one) without any result."""
    if run.status == "error" and not run.results:
        return ["<pytest>"]
    return [test for test, status in run.results.items() if status == "ERROR" and "::" not in test]


def _readable(test: str) -> bool:
    """Whether the harness's log parser reads the id back whole: it splits a summary line at spaces, so
    an id with a space (`test_x[a b]`) comes back cut and could never be matched."""
    return not any(ch.isspace() for ch in test)


def judge(before: Sequence[TestRun], after: Sequence[TestRun]) -> Verdict:
    """The verdict on runs that all finished (`ok` or `error`; apply failures and timeouts are decided
    before this is asked).

    FAIL_TO_PASS: not passing in every before-run and passing in every after-run. PASS_TO_PASS: passing
    in every run. A test whose outcome differs between the runs of one side is flaky: in neither list.
    A file-level collection error counts only where it hides the verdict: after the fix, when no test
    became FAIL_TO_PASS (before the fix it is expected: the new test imports what the fix adds).
    """
    tests = sorted({t for run in [*before, *after] for t in run.results if "::" in t and _readable(t)})
    f2p, p2p, flaky = [], [], []
    for test in tests:
        was = {_passes(run, test) for run in before}
        now = {_passes(run, test) for run in after}
        if len(was) > 1 or len(now) > 1:
            flaky.append(test)
        elif was == {False} and now == {True}:
            f2p.append(test)
        elif was == now == {True}:
            p2p.append(test)
    network = [t for t in tests if t not in flaky and _needs_network(after, t)]
    if f2p:
        return Verdict("executable", f2p, p2p, flaky, network=network)
    errors = sorted({name for run in after for name in _collection_errors(run)})
    if errors:
        log = next(run.log for run in after if _collection_errors(run))
        # pytest's first `E ` line names the error; a pytest that could not start left a traceback,
        # whose last line does.
        lines = [line.strip() for line in log.splitlines() if line.strip()]
        said = next((line[1:].strip() for line in lines if line.startswith("E ")), lines[-1] if lines else "")
        detail = f"after the fix: {', '.join(errors)}: {said}\n{log[-1500:]}"
        return Verdict("collection_error", [], p2p, flaky, detail, network)
    if flaky:
        return Verdict("only_flaky", [], p2p, flaky, f"{len(flaky)} flaky: {', '.join(flaky[:5])}", network)
    said = f"{len(tests)} tests ran, none failed before and passed after"
    if network:
        said += f"; {len(network)} need the network after the fix (e.g. {network[0]})"
    return Verdict("no_fail_to_pass", [], p2p, flaky, said, network)


def _needs_network(after: Sequence[TestRun], test: str) -> bool:
    """Whether `test` fails in every after-run with a network error in its failure reason."""
    return all(
        not _passes(run, test) and needs_network(failure_reason(run.log, test, run.results.get(test, "")))
        for run in after
    )
