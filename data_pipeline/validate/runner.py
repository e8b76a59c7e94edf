"""`swerl data validate`: run each row's tests before and after its fix, keep the rows that prove it.

Layout of OUT:

    run.json        what was validated and how (a resumed run must agree)
    results.jsonl   one verdict per row, appended as each row finishes: the record of progress
    test.parquet    the executable rows in SWE-bench's schema (written when the run ends)

Memory: INPUT is never held whole (a real repository's mined rows run to gigabytes). A run reads it
three times, a batch at a time (`rows.InputRows`): its small columns, to decide what to run; the rows to
run, submitted as workers free up (at most `2 * workers` in flight); the executable rows, to write
test.parquet a row group at a time. What stays in memory is an id per row, and of results.jsonl each
row's reason and where its line starts (`Verdicts`).

Resuming: a row with a verdict in results.jsonl is not run again (a row that ended in `error`, the
machine's failure, is). A line is written whole with one write; a kill in the middle of one leaves a
line without its newline, which the next run drops (`Verdicts`). test.parquet is written under a
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
import sys
import time
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pyarrow as pa

from data_pipeline.engines.pools import open_engine
from data_pipeline.run.runner import progress_bar
from data_pipeline.validate.outcomes import Verdict, judge
from data_pipeline.validate.rows import Rows, output_row, output_table, version_at
from data_pipeline.validate.strength import measure_strength
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
    mutants: int = 0
    """At most this many mutants of the gold patch run against an executable row's tests (0: none)."""


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
        if verdict.reason == "executable" and task.mutants:
            tests = verdict.fail_to_pass + verdict.pass_to_pass
            record.update(measure_strength(backend, instance, tests, task.mutants))
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
        network=verdict.network,
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
    written: int | None = None
    """Rows written to test.parquet where a --min-test-strength left some executable rows out."""

    def report(self) -> str:
        tested = sum(n for reason, n in self.counts.items() if reason != "no_test_change")
        executable = self.counts.get("executable", 0)
        share = f" ({executable / tested:.0%} of {tested} rows that change tests)" if tested else ""
        strong = "" if self.written is None else f", {self.written} of them strong enough to be written"
        return f"validated {self.judged} rows now; {executable} executable{share}{strong}"


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """The records of results file `path` with the offset of each line. A last line without its
    newline is what a kill mid-write leaves: it is dropped, and cut from the file once the records
    before it are read, so that appends start on a fresh line."""
    if not path.exists():
        return
    offset = 0
    with path.open("rb") as handle:
        for line in handle:
            if not line.endswith(b"\n"):
                break
            if line.strip():
                yield offset, json.loads(line)
            offset += len(line)
        else:
            return
    with path.open("r+b") as handle:
        handle.truncate(offset)


def read_results(out: Path) -> dict[str, dict[str, Any]]:
    """The verdicts in OUT/results.jsonl by instance id (a later line wins; see `_lines`)."""
    return {record["instance_id"]: record for _, record in _lines(out / RESULTS)}


class Verdicts:
    """OUT/results.jsonl as a run keeps it: each row's reason and where its line starts, not the
    records (their test lists and logs' tails add up over a large input); a record is read back from
    its line when test.parquet is written. A later line wins."""

    def __init__(self, out: Path) -> None:
        self.path = out / RESULTS
        self._at: dict[str, tuple[str, int]] = {}
        for offset, record in _lines(self.path):
            self._at[record["instance_id"]] = (sys.intern(record["reason"]), offset)

    def reason(self, instance_id: str) -> str | None:
        """The row's verdict (`outcomes.REASONS`), or None for a row not judged yet."""
        known = self._at.get(instance_id)
        return known[0] if known else None

    def record(self, instance_id: str) -> dict[str, Any]:
        """The row's whole verdict record, read from its line."""
        with self.path.open("rb") as handle:
            handle.seek(self._at[instance_id][1])
            return json.loads(handle.readline())

    def add(self, record: dict[str, Any]) -> None:
        """Appends one verdict as one whole line in one write (see `_lines` for a kill mid-write)."""
        line = (json.dumps(record, sort_keys=True) + "\n").encode("utf-8")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
            offset = os.fstat(fd).st_size - len(line)
        finally:
            os.close(fd)
        self._at[record["instance_id"]] = (sys.intern(record["reason"]), offset)


_UNRECORDED = {"mutants": 0}
"""What a run recorded before a key was recorded at all did (a validation before mutants ran none)."""


def claim(out: Path, described: dict[str, Any]) -> None:
    """Record what OUT validates, or check that a resumed run validates the same (input and repeats):
    verdicts of other runs must not mix in silently."""
    path = out / RUN_FILE
    if path.exists():
        recorded = json.loads(path.read_text(encoding="utf-8"))
        for key, value in described.items():
            if recorded.get(key, _UNRECORDED.get(key)) != value:
                raise UserError(
                    f"{out} holds a validation with {key} {recorded.get(key)!r}, not {value!r}; "
                    "use another --out, or the same options to resume it"
                )
        return
    out.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"kind": "validate", **described}, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def validate(
    rows: Rows,
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
    mutants: int = 0,
    min_test_strength: float | None = None,
) -> Summary:
    """Validate `rows` into OUT (see the module docstring); resumes what OUT already holds.

    `local_source`: the clone a mining run read (its mirror is made from it when the cache lacks one).
    `mutants`: at most this many mutants of each executable row's gold patch run against its tests
    (`strength`); `min_test_strength`: test.parquet keeps only the rows whose tests killed at least
    that share of them.
    """
    claim(out, {"input": input_name, "repeats": repeats, "mutants": mutants})
    verdicts = Verdicts(out)
    chosen, to_run, first = _scan(rows, verdicts, max_rows)
    if to_run:
        _prepare_mirrors(first, options, local_source)
    judged = 0
    window = max(2, 2 * workers)
    with (
        open_engine(engine, workers) as submit,
        progress_bar(progress, desc="validate", unit=" rows", total=len(to_run)) as bar,
    ):
        queue: collections.deque[Any] = collections.deque()
        for i, instance in enumerate(rows.instances(to_run)):
            queue.append(
                submit(validate_row, RowTask(instance, options, repeats, derive_version, mutants), i)
            )
            # Each verdict is recorded as soon as it is known (a kill loses only rows still running);
            # the oldest is waited for only once every worker has its share of rows, and the next row
            # is read only then.
            while queue and (queue[0].done() or len(queue) >= window):
                verdicts.add(queue.popleft().result())
                judged += 1
                bar.update(1)
        while queue:
            verdicts.add(queue.popleft().result())
            judged += 1
            bar.update(1)
    written = write_output(out, rows, verdicts, chosen, min_test_strength)
    counts = collections.Counter(verdicts.reason(iid) for iid in chosen)
    return Summary(judged, counts, None if min_test_strength is None else written)


def _scan(rows: Rows, verdicts: Verdicts, max_rows: int | None) -> tuple[list[str], set[str], dict[str, str]]:
    """The first pass, over the rows' small columns: the ids of the rows to look at (all, or up to and
    including the `max_rows`-th that changes tests), the rows to run (not judged yet, or judged
    `error`) and each of their repositories' first base commit. A row that changes no tests is judged
    now: nothing to run."""
    chosen: list[str] = []
    to_run: set[str] = set()
    first: dict[str, str] = {}
    tested = 0
    for brief in rows.briefs():
        if tested == max_rows:
            break
        chosen.append(brief.instance_id)
        changes_tests = bool(patch_test_files(brief.test_patch))
        tested += changes_tests
        reason = verdicts.reason(brief.instance_id)
        if reason is None and not changes_tests:
            verdicts.add(_record(brief.instance_id, "no_test_change"))
        elif reason in (None, "error"):
            to_run.add(brief.instance_id)
            first.setdefault(brief.repo, brief.base_commit)
    return chosen, to_run, first


def _record(instance_id: str, reason: str) -> dict[str, Any]:
    """The verdict record of a row decided without running anything."""
    return {
        "instance_id": instance_id,
        "reason": reason,
        "detail": "",
        "FAIL_TO_PASS": [],
        "PASS_TO_PASS": [],
        "flaky": [],
        "network": [],
        "env_recipe": "",
        "version": "",
        "seconds": 0.0,
    }


def _prepare_mirrors(first: Mapping[str, str], options: BackendOptions, local: Path | None) -> None:
    """Every repository's mirror holds its rows' base commits before any worker starts (`first`: the
    base commit of each repository's first row to run): a repository that cannot be found is one error
    now, not a failed row each. A mining run's own clone seeds the mirror of its repository."""
    backend = options.backend()  # also refuses now when bubblewrap is unusable
    for repo, commit in first.items():
        if local is not None and not backend.repos.bare_path(repo).exists():
            ensure_bare_clone(backend.repos.root, repo, str(local))
        try:
            backend.repos.ensure(repo, commit)
        except GitError as err:
            raise UserError(f"{repo}: {err} (pass --clones DIR with a clone of it)") from None


ROW_GROUP_BYTES = 32 << 20
"""test.parquet's rows are written a row group of about this many bytes (in memory) at a time."""
_CHUNK = 16
"""Output rows made into a table at a time."""


class _Widened(Exception):
    """A row has a column, or a type of one, that the rows before it did not: the schema written so far
    does not hold it."""


def write_output(
    out: Path, rows: Rows, verdicts: Verdicts, chosen: Collection[str], min_test_strength: float | None = None
) -> int:
    """OUT/test.parquet: the executable rows among `chosen`, in input order, read from INPUT again and
    written a row group at a time (under a temporary name, then renamed: whole or absent).

    The file is the one `output_table` makes of all the rows at once (one row group, the same bytes,
    while it fits in one): the columns every row has in the order rows first have them, typed as over
    all rows. Rows of one schema (every mined row, every SWE-bench row) are written in one pass; a
    column or a type that only later rows have (a JSON Lines input's rows that differ) takes a first
    pass over the rows for the schema, then a second to write them.

    With `min_test_strength`, an executable row is written only when its tests killed at least that share
    of its mutants (a row without a measured strength is not written: nothing vouches for its tests).
    Returns the number of rows written."""
    executable = {iid for iid in chosen if verdicts.reason(iid) == "executable"}
    if min_test_strength is not None:
        executable = {iid for iid in executable if strong_enough(verdicts.record(iid), min_test_strength)}
    tmp = out / f".{OUTPUT}.tmp"
    try:
        _write(tmp, _tables(rows, verdicts, executable), None)
    except _Widened:
        schema = None
        for table in _tables(rows, verdicts, executable):
            schema = _unify(schema, table.schema)
        _write(tmp, _tables(rows, verdicts, executable), schema)
    os.replace(tmp, out / OUTPUT)
    return len(executable)


def strong_enough(record: Mapping[str, Any], minimum: float) -> bool:
    """Whether a verdict record's measured test strength is at least `minimum`."""
    strength = record.get("test_strength")
    return strength is not None and strength >= minimum


def _tables(rows: Rows, verdicts: Verdicts, executable: set[str]) -> Iterator[pa.Table]:
    """The output rows of the `executable` rows, `_CHUNK` rows a table."""
    chunk = []
    for instance in rows.instances(executable):
        chunk.append(output_row(instance, verdicts.record(instance.instance_id)))
        if len(chunk) == _CHUNK:
            yield output_table(chunk)
            chunk = []
    if chunk:
        yield output_table(chunk)


def _unify(schema: pa.Schema | None, other: pa.Schema) -> pa.Schema:
    """The schema that holds both: columns in the order they first come, a null column typed by the
    other side, numbers widened as pyarrow widens them when it reads all values at once."""
    return other if schema is None else pa.unify_schemas([schema, other], promote_options="permissive")


def _write(path: Path, tables: Iterator[pa.Table], schema: pa.Schema | None) -> None:
    """Writes `tables` to Parquet file `path` in row groups of about `ROW_GROUP_BYTES`, under `schema`
    (the first table's when None: `_Widened` when a later one does not fit in it)."""
    import pyarrow.parquet as pq

    writer = None
    group: list[pa.Table] = []
    size = 0
    try:
        for table in tables:
            if schema is None:
                schema = table.schema
            elif not table.schema.equals(schema):
                if not _unify(schema, table.schema).equals(schema):
                    raise _Widened
                table = _conform(table, schema)
            group.append(table)
            size += table.nbytes
            if size >= ROW_GROUP_BYTES:
                writer = writer or pq.ParquetWriter(path, schema)
                # One contiguous table: a chunked one is encoded into other bytes.
                writer.write_table(pa.concat_tables(group).combine_chunks())
                group, size = [], 0
        if group or writer is None:
            table = pa.concat_tables(group).combine_chunks() if group else output_table([])
            writer = writer or pq.ParquetWriter(path, table.schema)
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table` under the wider `schema`: its columns cast, the columns it lacks null."""
    columns = [
        table.column(f.name).cast(f.type) if f.name in table.column_names else pa.nulls(len(table), f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)
