"""What validation reads and writes: input rows as instances, verdicts as rows in SWE-bench's schema.

Two kinds of input, one kind of instance: rows mined by `swerl data mine` (the gold patch is the row's
`oracle_patch`, its tests `changed_test_files`) and rows already in SWE-bench's schema (`swerl.execution.
instances`). A mined row's SWE-RL columns (prompt, code context, oracle contents) ride along in
`Instance.extra` and come out beside the SWE-bench columns, so one validated row trains with the
similarity reward and the execution reward alike.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import pyarrow as pa

from data_pipeline.schema import ROW_SCHEMA
from swerl.errors import UserError
from swerl.execution.instances import Instance, instance_from_row
from swerl.git import GitError, run_git
from swerl.paths import is_mining_output, read_manifest, row_files

SWEBENCH_COLUMNS = (
    "instance_id",
    "repo",
    "base_commit",
    "patch",
    "test_patch",
    "problem_statement",
    "hints_text",
    "created_at",
    "version",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
    "environment_setup_commit",
    "env_recipe",
)
"""The published datasets' columns (test lists as JSON strings), then the recipe of the environment the
lists were found in."""

_VERSION = re.compile(r"(\d+)\.(\d+)")


def is_mined_row(row: Mapping[str, Any]) -> bool:
    """A `swerl data mine` row (gold patch in `oracle_patch`) rather than a SWE-bench one (`patch`)."""
    return "oracle_patch" in row and "patch" not in row


def mined_instance(row: Mapping[str, Any]) -> Instance:
    """The instance of a mined row: its oracle patch as the gold patch; the rest kept in `extra`. The
    version is left to `version_at` (it needs the repository). `oracle_patch` stays among the row's own
    columns too: the similarity reward reads it there."""
    known = {"instance_id", "repo", "base_commit", "problem_statement", "test_patch"}
    return Instance(
        instance_id=str(row["instance_id"]),
        repo=str(row["repo"]),
        base_commit=str(row["base_commit"]),
        problem_statement=str(row.get("problem_statement") or ""),
        patch=str(row.get("oracle_patch") or ""),
        test_patch=str(row.get("test_patch") or ""),
        environment_setup_commit=str(row["base_commit"]),
        extra={k: v for k, v in row.items() if k not in known},
    )


class Brief(NamedTuple):
    """What deciding a row's fate needs of it (whether it changes tests, where its repository is), read
    without the columns that make a row large (file contents, prompt)."""

    instance_id: str
    repo: str
    base_commit: str
    test_patch: str


_SCAN_COLUMNS = (
    "instance_id",
    "repo",
    "base_commit",
    "problem_statement",
    "test_patch",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
)
"""What `load_input` checks of every row, and what its `Brief` is made of."""
_BRIEF_BATCH = 1024
_ROW_BATCH = 16
"""Full rows turned into Python objects at a time: a mined row carries whole files, so a few at once."""


class Rows(Protocol):
    """What validation reads of its input, pass by pass (`InputRows`; a test's rows)."""

    def briefs(self) -> Iterator[Brief]:
        """Every row's `Brief`, in input order."""
        ...

    def instances(self, wanted: Container[str] | None = None) -> Iterator[Instance]:
        """The instances of the rows in `wanted` (all without it), in input order."""
        ...


@dataclass(frozen=True)
class InputRows:
    """INPUT's rows, read from its files again for each pass, a batch at a time: a real repository's
    mined rows run to gigabytes, so they are never all in memory (a Parquet file is read a row group's
    batch at a time; a .json file, one JSON value, is read whole).

    `instance_ids`: only these rows (in INPUT's order). `mined`: rows of `swerl data mine`, rather than
    rows in SWE-bench's schema (told apart by their columns). `source`: the mining run's source when
    INPUT is a mining output (its clone gives the repository without `--clones`)."""

    files: tuple[Path, ...]
    mined: bool
    instance_ids: frozenset[str] | None = None
    source: dict[str, Any] | None = None

    def briefs(self) -> Iterator[Brief]:
        """Every row's `Brief`, in INPUT's order."""
        for row in self._rows(_SCAN_COLUMNS, None, _BRIEF_BATCH):
            yield Brief(
                str(row["instance_id"]),
                str(row["repo"]),
                str(row["base_commit"]),
                str(row.get("test_patch") or ""),
            )

    def instances(self, wanted: Container[str] | None = None) -> Iterator[Instance]:
        """The instances of the rows whose id is in `wanted` (all without it), in INPUT's order; a
        Parquet batch without any is not turned into Python objects."""
        convert = mined_instance if self.mined else instance_from_row
        for row in self._rows(None, wanted, _ROW_BATCH):
            yield convert(row)

    def _rows(
        self, columns: Sequence[str] | None, wanted: Container[str] | None, batch: int
    ) -> Iterator[dict[str, Any]]:
        """The rows (only `columns` of them, where given) whose id is wanted and among `instance_ids`."""
        only = self.instance_ids

        def keep(iid: object) -> bool:
            return (only is None or iid in only) and (wanted is None or iid in wanted)

        for file in self.files:
            if file.suffix.lower() == ".parquet":
                yield from _parquet_rows(file, columns, keep, batch)
                continue
            for record in _records(file):
                if keep(str(record.get("instance_id"))):
                    yield record if columns is None else {name: record.get(name) for name in columns}


def load_input(path: Path, instance_ids: Sequence[str] | None = None) -> InputRows:
    """INPUT's rows, checked now in one pass over their small columns, so that a bad row is one line
    before anything runs: required fields, duplicate ids, `instance_ids` it lacks, no rows at all.

    INPUT: a mining output folder, a folder of .parquet files or a .parquet/.jsonl/.json file, of mined
    rows or of SWE-bench rows (told apart by their columns)."""
    source = read_manifest(path)["config"].get("source") if is_mining_output(path) else None
    files = row_files(path) if path.is_dir() else [path]
    if not files:
        raise UserError(f"{path}: no .parquet files of rows there")
    mined = is_mined_row(dict.fromkeys(_columns(files[0])))
    rows = InputRows(tuple(files), mined, frozenset(instance_ids) if instance_ids else None, source)
    seen: set[str] = set()
    for row in rows._rows(_SCAN_COLUMNS, None, _BRIEF_BATCH):
        if not mined:
            instance_from_row(row)  # its checks of the required fields, on the columns they read
        iid = str(row.get("instance_id"))
        if iid in seen:
            raise UserError(f"duplicate instance id {iid!r} in {path}")
        seen.add(iid)
    unknown = [iid for iid in dict.fromkeys(instance_ids or ()) if iid not in seen]
    if unknown:
        raise UserError(f"instance ids not in {path}: {', '.join(unknown[:5])}")
    if not seen:
        raise UserError(f"{path}: no rows")
    return rows


def _parquet_rows(
    file: Path, columns: Sequence[str] | None, keep: Callable[[object], bool], batch: int
) -> Iterator[dict[str, Any]]:
    """The kept rows of a Parquet file, `batch` rows at a time: the ids of a row group are read first,
    and only the kept rows of each batch become Python objects."""
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(file)
    except pa.ArrowInvalid as err:
        raise UserError(f"{file}: not a Parquet file ({err})") from None
    names = parquet.schema_arrow.names
    if "instance_id" not in names:
        raise UserError(f"{file}: rows without an instance_id column")
    read = None if columns is None else [name for name in columns if name in names]
    for group in range(parquet.num_row_groups):
        ids = parquet.read_row_group(group, columns=["instance_id"], use_threads=False).column(0).to_pylist()
        mask = [keep(iid) for iid in ids]
        if not any(mask):
            continue
        start = 0
        for part in parquet.iter_batches(
            batch_size=batch, row_groups=[group], columns=read, use_threads=False
        ):
            chosen = mask[start : start + part.num_rows]
            start += part.num_rows
            if all(chosen):
                yield from part.to_pylist()
            elif any(chosen):
                yield from part.filter(pa.array(chosen)).to_pylist()


def _records(file: Path) -> list[dict[str, Any]] | Iterator[dict[str, Any]]:
    """The records of a JSON Lines file (streamed) or of a .json file (one value: a list of rows or a
    row)."""
    from swerl.jsonl import load_json, stream_records

    suffix = file.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return stream_records(file)
    if suffix == ".json":
        data = load_json(file)
        return data if isinstance(data, list) else [data]
    raise UserError(f"{file}: unsupported file type {suffix!r} (use .parquet, .jsonl or .json)")


def _columns(file: Path) -> set[str]:
    """The column names of a rows file: the Parquet schema's, or the first JSON record's keys."""
    if file.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        try:
            return set(pq.read_schema(file).names)
        except pa.ArrowInvalid as err:
            raise UserError(f"{file}: not a Parquet file ({err})") from None
    if file.suffix.lower() not in (".jsonl", ".ndjson"):
        return set()  # not a file of mined rows: read as SWE-bench rows (`_records` names what it is)
    from swerl.jsonl import stream_records

    return set(next(iter(stream_records(file)), {}))


def version_at(bare: Path, commit: str) -> str:
    """A stable `version` for a mined row: major.minor of the nearest tag at or before the base commit
    (`2.1.3` and `v2.1` give `2.1`); `0.0` for a history without tags. Rows of one release line share
    an environment key, as SWE-bench's versions do."""
    try:
        tag = run_git(bare, "describe", "--tags", "--abbrev=0", commit).decode().strip()
    except GitError:
        return "0.0"
    match = _VERSION.search(tag)
    return f"{match.group(1)}.{match.group(2)}" if match else "0.0"


def output_row(instance: Instance, result: Mapping[str, Any]) -> dict[str, Any]:
    """The validated row: SWE-bench's columns from the instance and the verdict, then its other columns."""
    extra = dict(instance.extra)
    row = {
        "instance_id": instance.instance_id,
        "repo": instance.repo,
        "base_commit": instance.base_commit,
        "patch": instance.patch,
        "test_patch": instance.test_patch,
        "problem_statement": instance.problem_statement,
        "hints_text": instance.hints_text,
        "created_at": str(extra.pop("created_at", "") or ""),
        "version": str(result.get("version") or instance.version),
        "FAIL_TO_PASS": json.dumps(result["FAIL_TO_PASS"]),
        "PASS_TO_PASS": json.dumps(result["PASS_TO_PASS"]),
        "environment_setup_commit": instance.environment_setup_commit or instance.base_commit,
        "env_recipe": str(result.get("env_recipe") or ""),
    }
    if "test_strength" in result:  # measured: `strength`; the survivors as one JSON string, like the lists
        row["test_strength"] = result["test_strength"]
        row["surviving_mutants"] = json.dumps(result["surviving_mutants"])
    row.update((k, v) for k, v in extra.items() if k not in row)
    return row


def output_table(rows: Iterable[dict[str, Any]]) -> pa.Table:
    """The rows as one table: SWE-bench's columns as strings, a mined row's columns with the mining
    schema's types (an empty list stays a list of strings), any other column as pyarrow reads it."""
    rows = list(rows)
    names = list(dict.fromkeys(name for row in rows for name in row))
    mined = {f.name: f.type for f in ROW_SCHEMA}
    arrays, fields = [], []
    for name in names:
        values = [row.get(name) for row in rows]
        kind = pa.string() if name in SWEBENCH_COLUMNS else mined.get(name)
        array = pa.array(values, type=kind) if kind is not None else pa.array(values)
        arrays.append(array)
        fields.append(pa.field(name, array.type))
    if not rows:
        fields = [pa.field(name, pa.string()) for name in SWEBENCH_COLUMNS]
        arrays = [pa.array([], pa.string()) for _ in fields]
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))
