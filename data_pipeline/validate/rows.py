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
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from data_pipeline.schema import ROW_SCHEMA
from swerl.errors import UserError
from swerl.execution.instances import Instance, load_instances
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


def load_input(
    path: Path, instance_ids: Sequence[str] | None = None
) -> tuple[list[Instance], bool, dict[str, Any] | None]:
    """The instances of INPUT, whether they are mined rows, and the mining run's source when INPUT is a
    mining output (its clone gives the repository without `--clones`).

    INPUT: a mining output folder, a folder of .parquet files or a .parquet/.jsonl file, of mined rows
    or of SWE-bench rows (told apart by their columns)."""
    source = read_manifest(path)["config"].get("source") if is_mining_output(path) else None
    files = row_files(path) if path.is_dir() else [path]
    if not files:
        raise UserError(f"{path}: no .parquet files of rows there")
    if not is_mined_row(dict.fromkeys(_columns(files[0]))):
        return load_instances(path, instance_ids=instance_ids), False, None
    rows = [row for file in files for row in _read(file)]
    instances = [mined_instance(row) for row in rows]
    if instance_ids:
        known = {inst.instance_id for inst in instances}
        unknown = [iid for iid in instance_ids if iid not in known]
        if unknown:
            raise UserError(f"instance ids not in {path}: {', '.join(unknown[:5])}")
        wanted = set(instance_ids)
        instances = [inst for inst in instances if inst.instance_id in wanted]
    if not instances:
        raise UserError(f"{path}: no rows")
    return instances, True, source


def _read(file: Path) -> list[dict[str, Any]]:
    if file.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        try:
            return pq.read_table(file).to_pylist()
        except pa.ArrowInvalid as err:
            raise UserError(f"{file}: not a Parquet file ({err})") from None
    from swerl.jsonl import read_records

    if file.suffix.lower() not in (".jsonl", ".ndjson"):
        raise UserError(f"{file}: unsupported file type {file.suffix!r} (use .parquet or .jsonl)")
    return read_records(file)


def _columns(file: Path) -> set[str]:
    """The column names of a rows file: the Parquet schema's, or the first JSON record's keys."""
    if file.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        try:
            return set(pq.read_schema(file).names)
        except pa.ArrowInvalid as err:
            raise UserError(f"{file}: not a Parquet file ({err})") from None
    if file.suffix.lower() not in (".jsonl", ".ndjson"):
        return set()  # not a file of mined rows: `load_instances` reads it or names what it is
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
