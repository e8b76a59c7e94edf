"""Pick one patch per instance: optional test filters first, then the majority vote.

Order of filters (each only narrows the field, never empties it):
1. regression: tests that pass on the base commit must keep passing; groups with the fewest newly
   failing tests survive. Which tests: as Agentless does, the repository's own tests, run at the base
   and kept where they pass (`related_test_files` picks the test files of the edited modules, to bound
   the cost); the dataset's PASS_TO_PASS only on request, since those labels come from the gold patch
   and scores that use them are not comparable with published ones.
2. reproduction: several model-written reproduction tests (sampled, as Agentless Mini does) are run at
   the base; only those that fail there are kept, since a test that already passes cannot tell a fix
   from no fix. Each group counts the kept tests its patch makes pass, and the groups with the highest
   count survive (consensus: a patch that many independent tests agree on is more likely right than
   one a single, possibly wrong, test favours), when any passes at least one.
Then the largest surviving group wins. Tests run once per *group* (its representative), not per
sample, and only for the `max_groups` largest groups, which bounds the cost per instance.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agentless.rerank.normalize import normalized_key
from agentless.rerank.vote import Group, group_candidates
from swerl.edit_format import build_git_patch
from swerl.execution.base import ExecutionBackend, TestRun
from swerl.execution.instances import Instance
from swerl.path_kinds import is_test_module


@dataclass
class GroupReport:
    group: Group
    key_digest: str
    regression_failures: int | None = None
    reproduction_passed: int | None = None
    """How many of the kept reproduction tests pass with this group's patch (None: not run)."""

    def to_row(self) -> dict[str, object]:
        return {
            "members": list(self.group.members),
            "key": self.key_digest,
            "regression_failures": self.regression_failures,
            "reproduction_passed": self.reproduction_passed,
        }


@dataclass
class Selection:
    chosen: int | None
    patch: str
    groups: list[GroupReport] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    reproduction_kept: list[int] = field(default_factory=list)
    """Indexes of the reproduction tests that fail at the base commit (the ones that vote)."""

    def to_row(self) -> dict[str, object]:
        return {
            "chosen": self.chosen,
            "patch": self.patch,
            "groups": [g.to_row() for g in self.groups],
            "notes": self.notes,
            "reproduction_kept": self.reproduction_kept,
        }


def _digest(key: object) -> str:
    return hashlib.sha256(repr(key).encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class PatchCandidate:
    """A well-formed candidate: its sample index, patch, and the files it changes before and after."""

    index: int
    patch: str
    old: Mapping[str, str | None]
    new: Mapping[str, str | None]


def select_patch(
    instance: Instance,
    candidates: Sequence[PatchCandidate],
    *,
    backend: ExecutionBackend | None = None,
    regression_tests: Sequence[str] | None = None,
    reproduction_tests: Sequence[str] = (),
    exclude_regression: Callable[[list[str]], list[str]] | None = None,
    max_groups: int = 8,
) -> Selection:
    """Choose among `candidates`. Without a backend (or with neither filter on) this is the plain
    normalized majority vote. `regression_tests` (test files or ids) turns the regression filter on;
    `reproduction_tests` (test file sources) the reproduction consensus. `exclude_regression` (the model
    filter) names, among the tests passing at the base, those a fix may rightly break."""
    keyed: list[tuple[int, object]] = []
    notes: list[str] = []
    patches: dict[int, str] = {}
    for cand in candidates:
        key = normalized_key(cand.old, cand.new)
        if key is None:
            notes.append(f"candidate {cand.index}: cosmetic only (comments/docstrings), not voted")
            continue
        keyed.append((cand.index, key))
        patches[cand.index] = cand.patch
    groups = group_candidates(keyed)
    if not groups:
        return Selection(None, "", [], [*notes, "no usable candidate"])
    reports = [GroupReport(g, _digest(g.key)) for g in groups]
    field_ = reports[: max_groups if backend is not None else len(reports)]
    if backend is not None and regression_tests is not None:
        field_ = _regression_filter(
            instance, field_, patches, backend, regression_tests, notes, exclude_regression
        )
    kept: list[int] = []
    if backend is not None and reproduction_tests:
        field_, kept = _reproduction_filter(instance, field_, patches, backend, reproduction_tests, notes)
    winner = field_[0].group.representative
    return Selection(winner, patches[winner], reports, notes, kept)


def related_test_files(paths: Sequence[str], edited: Sequence[str], limit: int = 4) -> list[str]:
    """Test files of the repository that exercise the edited modules, judged by name.

    A test file named after an edited module (`test_models.py` for `models.py`, `models_test.py`) ranks
    first, then test files under a directory named after the module's package; at most `limit`.
    """
    stems = {Path(e).stem for e in edited if e.endswith(".py") and Path(e).stem != "__init__"}
    packages = {Path(e).parent.name for e in edited if Path(e).parent.name}
    scored = []
    for path in paths:
        if not is_test_module(path):
            continue
        name = Path(path).name
        core = name.removeprefix("test_").removesuffix(".py").removesuffix("_test")
        parents = set(Path(path).parent.parts)
        score = 2 if core in stems else 1 if parents & packages or core in packages else 0
        if score:
            scored.append((-score, path))
    return [path for _, path in sorted(scored)[:limit]]


def _regression_filter(
    instance: Instance,
    field_: list[GroupReport],
    patches: Mapping[int, str],
    backend: ExecutionBackend,
    tests: Sequence[str],
    notes: list[str],
    exclude: Callable[[list[str]], list[str]] | None = None,
) -> list[GroupReport]:
    if not tests:
        notes.append("regression filter skipped: no tests to run")
        return field_
    baseline, passing = passing_at_base(instance, backend, tests)
    if exclude is not None and passing:
        dropped = set(exclude(passing))
        if dropped:
            notes.append(f"regression tests left out by the model filter: {', '.join(sorted(dropped))}")
            passing = [t for t in passing if t not in dropped]
    if baseline.status != "ok" or not passing:
        notes.append(f"regression filter skipped: baseline run {baseline.status}, {len(passing)} passing")
        return field_
    for report in field_:
        run = backend.run_tests(instance, passing, [patches[report.group.representative]])
        report.regression_failures = _failures(run, passing)
    best = min(r.regression_failures for r in field_ if r.regression_failures is not None)
    return [r for r in field_ if r.regression_failures == best]


def passing_at_base(
    instance: Instance, backend: ExecutionBackend, tests: Sequence[str]
) -> tuple[TestRun, list[str]]:
    """The run of `tests` (files or ids) on the unpatched base commit, and the tests of it that pass:
    only those can tell a patch that breaks something from one that does not."""
    baseline = backend.run_tests(instance, tests)
    asked = set(tests)
    passing = sorted(
        t
        for t, status in baseline.results.items()
        if status in ("PASSED", "XFAIL") and (t in asked or t.split("::", 1)[0] in asked)
    )
    return baseline, passing


def _failures(run: TestRun, tests: Sequence[str]) -> int:
    if run.status in ("apply_failed", "build_failed"):
        return len(tests) + 1  # worse than breaking every test: the patch does not apply or compile
    return sum(1 for t in tests if not run.passed(t))


def reproduction_path(i: int) -> str:
    """Where the `i`-th reproduction test is written (the repository root, as its prompt says)."""
    return f"test_swerl_reproduction_{i}.py"


def passed_files(run: TestRun, paths: Sequence[str]) -> set[str]:
    """The test files of `paths` whose every test passed in `run` (a file with no result did not)."""
    if run.status != "ok":
        return set()
    by_file: dict[str, list[str]] = {}
    for test, status in run.results.items():
        by_file.setdefault(test.split("::", 1)[0], []).append(status)
    return {p for p in paths if by_file.get(p) and all(s == "PASSED" for s in by_file[p])}


def reproduction_files(sources: Sequence[str], indexes: Sequence[int]) -> tuple[list[str], str]:
    """The paths of the reproduction tests `indexes` and the patch that adds them to the tree."""
    paths = [reproduction_path(i) for i in indexes]
    return paths, build_git_patch({}, {reproduction_path(i): sources[i] for i in indexes})


def failing_at_base(
    instance: Instance, backend: ExecutionBackend, sources: Sequence[str], notes: list[str]
) -> list[int]:
    """Indexes of the reproduction tests (file sources) that fail on the base commit: a test that
    already passes cannot tell a fix from no fix. Why none is kept goes to `notes`."""
    paths, test_patch = reproduction_files(sources, range(len(sources)))
    before = backend.run_tests(instance, paths, [test_patch])
    if before.status != "ok":
        notes.append(f"reproduction tests not used: the run at the base commit ended {before.status}")
        return []
    ran = {t.split("::", 1)[0] for t in before.results}
    kept = [i for i, p in enumerate(paths) if p in ran and p not in passed_files(before, [p])]
    if not kept:
        notes.append(f"reproduction tests not used: none of {len(paths)} fails on the base commit")
    return kept


def _reproduction_filter(
    instance: Instance,
    field_: list[GroupReport],
    patches: Mapping[int, str],
    backend: ExecutionBackend,
    sources: Sequence[str],
    notes: list[str],
) -> tuple[list[GroupReport], list[int]]:
    """Keep the tests that fail at the base; the groups whose patch passes the most of them survive.

    All tests go into one run per group (each in its own file), so the cost is one run at the base plus
    one per group, whatever the number of tests."""
    kept = failing_at_base(instance, backend, sources, notes)
    if not kept:
        return field_, []
    kept_paths, kept_patch = reproduction_files(sources, kept)
    for report in field_:
        run = backend.run_tests(instance, kept_paths, [patches[report.group.representative], kept_patch])
        report.reproduction_passed = len(passed_files(run, kept_paths))
    best = max(r.reproduction_passed or 0 for r in field_)
    if best == 0:
        notes.append(f"no candidate passes any of the {len(kept)} kept reproduction tests; they were ignored")
        return field_, kept
    return [r for r in field_ if r.reproduction_passed == best], kept
