"""Test strength: the share of the gold patch's mutants that a row's tests reject.

A row is executable when its tests fail before the fix and pass after; that says nothing of whether they
would also pass after a wrong fix. Each mutant (`swerl.execution.mutants`) replaces the gold patch in a
run of the row's own tests, in the environment and with the test patch its validation used: it is killed
when one of the row's FAIL_TO_PASS or PASS_TO_PASS tests does not pass (or the run times out), and
survives when all of them pass. `test_strength` = killed / run. A mutant that does not apply, or whose
compiled sources do not build, is not run: it judges nothing about the tests.

The record fields written here (beside the verdict's): `test_strength` (None when the fix has no mutant,
as a one-line change to a data file), `mutants_run`, `mutants_killed`, `surviving_mutants` (each
survivor's operator, file, line and its difference from the gold patch's result, for a reader to
judge), `mutation_seconds`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from swerl.edit_format.patch import PatchApplyError, parse_patch
from swerl.execution.base import TestRun
from swerl.execution.instances import Instance
from swerl.execution.local import LocalBackend
from swerl.execution.mutants import Mutant, make_mutants

_SEED = 0
"""One seed for every row: a row's sample of mutants is the same in every run."""


def base_files(backend: LocalBackend, instance: Instance) -> dict[str, str]:
    """The base commit's text of every file the gold patch modifies or removes."""
    files: dict[str, str] = {}
    for patched in parse_patch(instance.patch):
        if patched.is_added_file:
            continue
        path = patched.source_file.removeprefix("a/")
        text = backend.repos.read_file(instance.repo, instance.base_commit, path)
        if text is not None:
            files[path] = text
    return files


def killed(run: TestRun, tests: Sequence[str]) -> bool | None:
    """Whether the run rejects the mutant: True (a test not passing, or out of time), False (every test
    passed: it survives), None (not run: it did not apply, or its compiled sources did not build)."""
    if run.status in ("apply_failed", "build_failed"):
        return None
    return run.status == "timeout" or not all(run.passed(test) for test in tests)


def survivor(mutant: Mutant) -> dict[str, Any]:
    """What a surviving mutant's record keeps: enough for a reader to judge it."""
    return {"operator": mutant.operator, "path": mutant.path, "line": mutant.line, "diff": mutant.change}


def measure_strength(
    backend: LocalBackend, instance: Instance, tests: Sequence[str], limit: int
) -> dict[str, Any]:
    """Run up to `limit` mutants of the row's gold patch against `tests` (its FAIL_TO_PASS +
    PASS_TO_PASS): the record fields of the module docstring."""
    started = time.monotonic()
    try:
        mutants = make_mutants(instance.patch, base_files(backend, instance), limit=limit, seed=_SEED)
    except PatchApplyError:
        mutants = []  # a gold patch git applies with offsets: no mutants made in memory
    verdicts: list[bool] = []
    survivors: list[dict[str, Any]] = []
    for mutant in mutants:
        run = backend.run_tests(instance, tests, (mutant.patch,), test_patch=instance.test_patch)
        verdict = killed(run, tests)
        if verdict is None:
            continue
        verdicts.append(verdict)
        if not verdict:
            survivors.append(survivor(mutant))
    return {
        "test_strength": round(sum(verdicts) / len(verdicts), 4) if verdicts else None,
        "mutants_run": len(verdicts),
        "mutants_killed": sum(verdicts),
        "surviving_mutants": survivors,
        "mutation_seconds": round(time.monotonic() - started, 2),
    }
