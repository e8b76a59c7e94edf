"""`swerl data validate`: run each row's tests before and after its fix, keep the rows that prove it.

Layout of OUT:

    run.json        what was validated and how (a resumed run must agree)
    results.jsonl   one verdict per row, appended as each row finishes: the record of progress
    test.parquet    the executable rows in SWE-bench's schema (written when the run ends)

Resuming: a row with a verdict in results.jsonl is not run again (a row that ended in `error`, the
machine's failure, is). A line is written whole with one write; a kill in the middle of one leaves a
line without its newline, which the next run drops (`read_results`). test.parquet is written under a
temporary name and renamed, so it is whole or absent, and every run that ends writes it from all the
verdicts, so a killed run's rerun ends with the same file an uninterrupted run writes.

Where rows run: `data_pipeline.engines` (this machine's processes or Ray), one task per row, each a
pure function of the row and the backend's options. A process builds its backend once
(`swerl.execution.local.cached_backend`); environments and mirrors are shared through the cache folder,
each built under its own lock.
"""

from __future__ import annotations

import collections
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from data_pipeline.engines.pools import open_engine
from data_pipeline.run.runner import progress_bar
from data_pipeline.validate.outcomes import Verdict, judge
from data_pipeline.validate.rows import output_row, output_table, version_at
from swerl.errors import UserError
from swerl.execution.base import TestRun
from swerl.execution.envs import EnvSetupError
from swerl.execution.harness import patch_test_files
from swerl.execution.instances import Instance
from swerl.execution.local import LocalBackend, RunLimits, cached_backend
from swerl.git import GitError
from swerl.git.clones import ensure_bare_clone

RUN_FILE = "run.json"
RESULTS = "results.jsonl"
OUTPUT = "test.parquet"
"""Named `test` so that Hugging Face `datasets` (swebench's loader) reads it as the test split."""
_DETAIL = 2000


@dataclass(frozen=True)
class BackendOptions:
    """How to build the local backend (`cached_backend`), picklable for another process or a Ray task."""

    cache_dir: Path
    clones: Path | None = None
    offline: bool = False
    env_specs: Path | None = None
    python: str | None = None
    wheelhouse: Path | None = None
    isolation: str = "bwrap"
    timeout_s: float = 1800.0
    limits: RunLimits = field(default_factory=RunLimits)

    def backend(self) -> LocalBackend:
        """This process's backend for these options (built once: it caches interpreters it found)."""
        if self not in _BACKENDS:
            _BACKENDS[self] = cached_backend(
                self.cache_dir,
                clones=self.clones,
                offline=self.offline,
                env_specs=self.env_specs,
                python=self.python,
                wheelhouse=self.wheelhouse,
                isolation=self.isolation,
                timeout_s=self.timeout_s,
                limits=self.limits,
            )
        return _BACKENDS[self]


_BACKENDS: dict[BackendOptions, LocalBackend] = {}


@dataclass(frozen=True)
class RowTask:
    """One row to validate: a top-level, picklable task for any engine."""

    instance: Instance
    options: BackendOptions
    repeats: int
    derive_version: bool
    """A mined row has no version: it is derived from the repository's tags (`version_at`)."""


def validate_row(task: RowTask) -> dict[str, Any]:
    """The verdict record of one row: before-runs (base + test patch) and after-runs (base + gold patch
    + test patch), `repeats` of each, through the backend's `run_tests`; see `outcomes.judge`."""
    started = time.monotonic()
    instance = task.instance
    backend = task.options.backend()
    record: dict[str, Any] = {"instance_id": instance.instance_id, "version": instance.version}
    try:
        if task.derive_version:
            bare = backend.repos.ensure(instance.repo, instance.base_commit)
            instance = replace(instance, version=version_at(bare, instance.base_commit))
            record["version"] = instance.version
        verdict, recipe = _verdict(backend, instance, task.repeats)
    except EnvSetupError as err:
        verdict, recipe = Verdict("env_failed", detail=str(err)[-_DETAIL:]), ""
    except (GitError, OSError, RuntimeError, UserError) as err:
        verdict, recipe = Verdict("error", detail=f"{type(err).__name__}: {err}"[-_DETAIL:]), ""
    record.update(
        reason=verdict.reason,
        detail=verdict.detail,
        FAIL_TO_PASS=verdict.fail_to_pass,
        PASS_TO_PASS=verdict.pass_to_pass,
        flaky=verdict.flaky,
        env_recipe=recipe,
        seconds=round(time.monotonic() - started, 2),
    )
    return record


def _verdict(backend: LocalBackend, instance: Instance, repeats: int) -> tuple[Verdict, str]:
    """Runs before, then after; the first patch that does not apply or run that times out decides."""
    tests = patch_test_files(instance.test_patch)
    sides: dict[str, list[TestRun]] = {"before": [], "after": []}
    recipe = ""
    for side, patches in (("before", ()), ("after", (instance.patch,))):
        for _ in range(repeats):
            run = backend.run_tests(instance, tests, patches, test_patch=instance.test_patch)
            recipe = run.recipe or recipe
            if run.status == "apply_failed":
                return Verdict("patch_not_applied", detail=f"{side}: {run.log[-_DETAIL:]}"), recipe
            if run.status == "build_failed":  # the row's own patch: this environment cannot build it
                return Verdict("env_failed", detail=f"{side}: {run.log[-_DETAIL:]}"), recipe
            if run.status == "timeout":
                seconds = f"{backend.timeout_s:g} s"
                return Verdict("timeout", detail=f"{side}: past {seconds}\n{run.log[-_DETAIL:]}"), recipe
            sides[side].append(run)
    return judge(sides["before"], sides["after"]), recipe


@dataclass
class Summary:
    """What a run did: rows judged now, and the verdicts of every row so far."""

    judged: int
    counts: collections.Counter[str]

    def report(self) -> str:
        tested = sum(n for reason, n in self.counts.items() if reason != "no_test_change")
        executable = self.counts.get("executable", 0)
        share = f" ({executable / tested:.0%} of {tested} rows that change tests)" if tested else ""
        return f"validated {self.judged} rows now; {executable} executable{share}"


def read_results(out: Path) -> dict[str, dict[str, Any]]:
    """The verdicts in OUT/results.jsonl by instance id (a later line wins). A last line without its
    newline is what a kill mid-write leaves: it is dropped (and cut from the file, so appends start on
    a fresh line)."""
    path = out / RESULTS
    if not path.exists():
        return {}
    data = path.read_bytes()
    whole = data[: data.rfind(b"\n") + 1]
    if len(whole) != len(data):
        with path.open("r+b") as handle:
            handle.truncate(len(whole))
    results = {}
    for line in whole.decode("utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            results[record["instance_id"]] = record
    return results


def claim(out: Path, described: dict[str, Any]) -> None:
    """Record what OUT validates, or check that a resumed run validates the same (input and repeats):
    verdicts of other runs must not mix in silently."""
    path = out / RUN_FILE
    if path.exists():
        recorded = json.loads(path.read_text(encoding="utf-8"))
        for key, value in described.items():
            if recorded.get(key) != value:
                raise UserError(
                    f"{out} holds a validation with {key} {recorded.get(key)!r}, not {value!r}; "
                    "use another --out, or the same options to resume it"
                )
        return
    out.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"kind": "validate", **described}, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def select(instances: Sequence[Instance], max_rows: int | None) -> list[Instance]:
    """The rows to look at: all, or up to and including the `max_rows`-th that changes tests."""
    if max_rows is None:
        return list(instances)
    chosen, tested = [], 0
    for instance in instances:
        if tested == max_rows:
            break
        chosen.append(instance)
        tested += bool(patch_test_files(instance.test_patch))
    return chosen


def validate(
    instances: Sequence[Instance],
    out: Path,
    options: BackendOptions,
    *,
    input_name: str,
    repeats: int = 2,
    max_rows: int | None = None,
    workers: int = 1,
    engine: str = "local",
    derive_version: bool = False,
    local_source: Path | None = None,
    progress: bool = True,
) -> Summary:
    """Validate `instances` into OUT (see the module docstring); resumes what OUT already holds.

    `local_source`: the clone a mining run read (its mirror is made from it when the cache lacks one).
    """
    claim(out, {"input": input_name, "repeats": repeats})
    chosen = select(instances, max_rows)
    results = read_results(out)
    for instance in chosen:
        if not patch_test_files(instance.test_patch) and instance.instance_id not in results:
            results[instance.instance_id] = _record(instance.instance_id, "no_test_change")
            _append(out, results[instance.instance_id])
    pending = [inst for inst in chosen if results.get(inst.instance_id, {}).get("reason", "error") == "error"]
    if pending:
        _prepare_mirrors(pending, options, local_source)
    judged = 0
    window = max(2, 2 * workers)
    with (
        open_engine(engine, workers) as submit,
        progress_bar(progress, desc="validate", unit=" rows", total=len(pending)) as bar,
    ):
        queue: collections.deque[Any] = collections.deque()
        for i, instance in enumerate(pending):
            queue.append(submit(validate_row, RowTask(instance, options, repeats, derive_version), i))
            # Each verdict is recorded as soon as it is known (a kill loses only rows still running);
            # the oldest is waited for only once every worker has its share of rows.
            while queue and (queue[0].done() or len(queue) >= window or i == len(pending) - 1):
                record = queue.popleft().result()
                results[record["instance_id"]] = record
                _append(out, record)
                judged += 1
                bar.update(1)
    write_output(out, chosen, results)
    counts = collections.Counter(results[inst.instance_id]["reason"] for inst in chosen)
    return Summary(judged, counts)


def _record(instance_id: str, reason: str) -> dict[str, Any]:
    """The verdict record of a row decided without running anything."""
    return {
        "instance_id": instance_id,
        "reason": reason,
        "detail": "",
        "FAIL_TO_PASS": [],
        "PASS_TO_PASS": [],
        "flaky": [],
        "env_recipe": "",
        "version": "",
        "seconds": 0.0,
    }


def _append(out: Path, record: dict[str, Any]) -> None:
    """One verdict, as one whole line in one write (see `read_results` for a kill mid-write)."""
    line = (json.dumps(record, sort_keys=True) + "\n").encode("utf-8")
    fd = os.open(out / RESULTS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def _prepare_mirrors(pending: Sequence[Instance], options: BackendOptions, local: Path | None) -> None:
    """Every repository's mirror holds its rows' base commits before any worker starts: a repository
    that cannot be found is one error now, not a failed row each. A mining run's own clone seeds the
    mirror of its repository."""
    backend = options.backend()  # also refuses now when bubblewrap is unusable
    first = {inst.repo: inst.base_commit for inst in reversed(pending)}
    for repo, commit in first.items():
        if local is not None and not backend.repos.bare_path(repo).exists():
            ensure_bare_clone(backend.repos.root, repo, str(local))
        try:
            backend.repos.ensure(repo, commit)
        except GitError as err:
            raise UserError(f"{repo}: {err} (pass --clones DIR with a clone of it)") from None


def write_output(out: Path, chosen: Sequence[Instance], results: dict[str, dict[str, Any]]) -> Path:
    """OUT/test.parquet: the executable rows, in input order (written whole, then renamed)."""
    import pyarrow.parquet as pq

    rows = [
        output_row(inst, results[inst.instance_id])
        for inst in chosen
        if results.get(inst.instance_id, {}).get("reason") == "executable"
    ]
    tmp = out / f".{OUTPUT}.tmp"
    pq.write_table(output_table(rows), tmp)
    os.replace(tmp, out / OUTPUT)
    return out / OUTPUT
