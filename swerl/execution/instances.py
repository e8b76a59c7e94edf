"""SWE-bench instances from the Hugging Face hub or from a local Parquet / JSONL file in the same schema.

The instance id is the key of every stage file, so loading is the one place that decides what an
instance is. `FAIL_TO_PASS` / `PASS_TO_PASS` are JSON-encoded lists in the published datasets (and in
files exported from them); they are decoded here once, so no later stage has to guess their type.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from swerl.errors import UserError
from swerl.jsonl import load_json, read_records

DATASET_ALIASES = {
    "lite": "princeton-nlp/SWE-bench_Lite",
    "verified": "princeton-nlp/SWE-bench_Verified",
    "full": "princeton-nlp/SWE-bench",
}
"""Short names accepted wherever a dataset is named (CLI `--dataset lite`)."""

REQUIRED_FIELDS = ("instance_id", "repo", "base_commit", "problem_statement")


@dataclass(frozen=True)
class Instance:
    """One SWE-bench task. `patch` (gold) and the test lists may be empty when unknown (a new issue)."""

    instance_id: str
    repo: str
    base_commit: str
    problem_statement: str
    patch: str = ""
    test_patch: str = ""
    fail_to_pass: tuple[str, ...] = ()
    pass_to_pass: tuple[str, ...] = ()
    version: str = ""
    environment_setup_commit: str = ""
    hints_text: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)


def _test_list(value: Any, name: str, instance_id: str) -> tuple[str, ...]:
    """A test list from a JSON string (the published schema), a real list, or nothing."""
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as err:
            raise UserError(f"{instance_id}: {name} is not a JSON list: {err}") from err
    if not isinstance(value, Sequence) or isinstance(value, str | bytes):
        raise UserError(f"{instance_id}: {name} must be a list of test ids, got {type(value).__name__}")
    return tuple(str(v) for v in value)


def instance_from_row(row: Mapping[str, Any]) -> Instance:
    """Validate one row in the SWE-bench schema. Unknown columns are kept in `extra`."""
    missing = [name for name in REQUIRED_FIELDS if not row.get(name)]
    if missing:
        raise UserError(f"instance row {row.get('instance_id', '?')!r} lacks {', '.join(missing)}")
    iid = str(row["instance_id"])
    known = set(REQUIRED_FIELDS) | {
        "patch",
        "test_patch",
        "FAIL_TO_PASS",
        "PASS_TO_PASS",
        "version",
        "environment_setup_commit",
        "hints_text",
    }
    return Instance(
        instance_id=iid,
        repo=str(row["repo"]),
        base_commit=str(row["base_commit"]),
        problem_statement=str(row["problem_statement"]),
        patch=str(row.get("patch") or ""),
        test_patch=str(row.get("test_patch") or ""),
        fail_to_pass=_test_list(row.get("FAIL_TO_PASS"), "FAIL_TO_PASS", iid),
        pass_to_pass=_test_list(row.get("PASS_TO_PASS"), "PASS_TO_PASS", iid),
        version=str(row.get("version") or ""),
        environment_setup_commit=str(row.get("environment_setup_commit") or ""),
        hints_text=str(row.get("hints_text") or ""),
        extra={k: v for k, v in row.items() if k not in known},
    )


def instance_to_row(instance: Instance) -> dict[str, Any]:
    """The SWE-bench row of an instance (test lists JSON-encoded, as published); inverse of the loader."""
    return {
        "instance_id": instance.instance_id,
        "repo": instance.repo,
        "base_commit": instance.base_commit,
        "problem_statement": instance.problem_statement,
        "patch": instance.patch,
        "test_patch": instance.test_patch,
        "FAIL_TO_PASS": json.dumps(list(instance.fail_to_pass)),
        "PASS_TO_PASS": json.dumps(list(instance.pass_to_pass)),
        "version": instance.version,
        "environment_setup_commit": instance.environment_setup_commit,
        "hints_text": instance.hints_text,
    }


def _read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of an instance file, or of a folder's .parquet files (`swerl data validate`'s output)."""
    if path.is_dir():
        from swerl.paths import row_files

        files = row_files(path)
        if not files:
            raise UserError(f"{path}: a folder without .parquet files of instances")
        return [row for file in files for row in _read_rows(file)]
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    if suffix in {".jsonl", ".ndjson"}:
        return read_records(path)
    if suffix == ".json":
        data = load_json(path)
        return data if isinstance(data, list) else [data]
    raise UserError(f"{path}: unsupported instance file type {suffix!r} (use .parquet, .jsonl or .json)")


def _load_hub(name: str, split: str) -> list[dict[str, Any]]:
    """Rows of a hub dataset. Imported lazily: `datasets` is slow to import and needs the network here."""
    from datasets import load_dataset

    return [dict(row) for row in load_dataset(name, split=split)]


def load_instances(
    source: str | Path, *, split: str = "test", instance_ids: Iterable[str] | None = None
) -> list[Instance]:
    """Instances from a local file (when `source` is an existing path) or a hub dataset id / alias.

    `instance_ids` keeps only those ids, in the dataset's order; naming an id the dataset lacks is an
    error, because a typo would otherwise silently run nothing. Duplicate ids are an error too: the id
    is the key of every stage file.
    """
    path = Path(source)
    if path.exists():
        rows = _read_rows(path)
    else:
        name = DATASET_ALIASES.get(str(source).lower(), str(source))
        if "/" not in name:
            raise UserError(f"{source}: no such file, and not a hub dataset id (owner/name)")
        rows = _load_hub(name, split)
    instances = [instance_from_row(row) for row in rows]
    if not instances:
        raise UserError(f"{source}: no instances (an empty dataset would report 0 of 0 as a result)")
    seen: set[str] = set()
    for inst in instances:
        if inst.instance_id in seen:
            raise UserError(f"duplicate instance id {inst.instance_id!r} in {source}")
        seen.add(inst.instance_id)
    if instance_ids is None:
        return instances
    wanted = list(dict.fromkeys(instance_ids))
    unknown = [iid for iid in wanted if iid not in seen]
    if unknown:
        raise UserError(f"instance ids not in {source}: {', '.join(unknown[:5])}")
    keep = set(wanted)
    return [inst for inst in instances if inst.instance_id in keep]
