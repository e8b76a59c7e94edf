"""Shard files: tables built from rows without pandas are exactly pyarrow's own conversion."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pytest

from data_pipeline.run.shards import read_rows, rows_to_table, write_table
from data_pipeline.schema import CANDIDATE_SCHEMA, DROP_SCHEMA, EXTRACTED_SCHEMA, ROW_SCHEMA

CANDIDATE = {
    "instance_id": "acme__w-1",
    "source": "local",
    "repo": "acme/w",
    "pull_number": 1,
    "issue_numbers": [],
    "created_at": "",
    "merged": True,
    "merge_commit": "ab" * 20,
    "author": "",
    "title": "",
    "commits": 0,
    "drop_reason": "",
    "problem_statement": "non-ASCII: é ✓ \u2028 and a NUL \x00",
    "problem_source": "commit_message",
}


def _row(i: int) -> dict:
    files = [{"path": f"p{j}.py", "content": "x = 1\n" * (i + j)} for j in range(i % 3)]
    return {
        **{name: CANDIDATE[name] for name in ROW_SCHEMA.names if name in CANDIDATE},
        "pull_number": -(2**62) if i == 1 else i,
        "issue_numbers": list(range(i % 4)),
        "base_commit": "",
        "merge_commit": "é" * i,
        "code_context": files,
        "oracle_new_content": files[::-1],
        "oracle_patch": "",
        "test_patch": "+" * i,
        "changed_test_files": [f"t{j}" for j in range(i % 2)],
        "modified_files": [],
        "excluded_files": ["", "a"],
        "num_context_files": len(files),
        "lines_changed": i,
        "problem_tokens": 0,
        "context_tokens": 2**40,
        "prompt_tokens": 3,
        "prompt": [{"role": "system", "content": ""}, {"role": "user", "content": "é" * i}],
        "dedup_key": str(i),
    }


@pytest.mark.parametrize(
    ("schema", "rows"),
    [
        (ROW_SCHEMA, [_row(i) for i in range(11)]),
        (ROW_SCHEMA, []),
        (CANDIDATE_SCHEMA, [CANDIDATE, {**CANDIDATE, "merged": False, "issue_numbers": [3, 4]}] * 5),
        (DROP_SCHEMA, [{"instance_id": "a", "repo": "b", "stage": "c", "reason": "d", "detail": "é"}]),
        (EXTRACTED_SCHEMA, [{"instance_id": "a", "repo": "b", "oracle_patch": "-x\n+y\n"}]),
        # A None anywhere in a column goes through pyarrow's own converter.
        (CANDIDATE_SCHEMA, [{**CANDIDATE, "author": None, "issue_numbers": None}]),
    ],
)
def test_rows_to_table_is_from_pylist(schema, rows):
    assert rows_to_table(rows, schema).equals(pa.Table.from_pylist(rows, schema=schema))


def test_booleans_past_one_byte():
    rows = [{**CANDIDATE, "merged": i % 3 == 0} for i in range(21)]
    assert rows_to_table(rows, CANDIDATE_SCHEMA).column("merged").to_pylist() == [
        i % 3 == 0 for i in range(21)
    ]


def test_write_then_read_round_trip_without_pandas(tmp_path):
    """A shard written and read back holds the rows; and the process never imported pandas (0.2 s that
    the driver would pay before the first worker starts)."""
    code = (
        "import sys; from pathlib import Path\n"
        "from data_pipeline.run.shards import read_rows, write_table\n"
        "from data_pipeline.schema import DROP_SCHEMA\n"
        "rows = [{'instance_id': 'a', 'repo': 'b', 'stage': 'c', 'reason': 'd', 'detail': 'é'}]\n"
        f"path = Path({str(tmp_path / 'x.parquet')!r})\n"
        "write_table(path, rows, DROP_SCHEMA)\n"
        "assert read_rows(path) == rows\n"
        "print('pandas' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    write_table(tmp_path / "y.parquet", [_row(2), _row(5)], ROW_SCHEMA)
    assert read_rows(tmp_path / "y.parquet") == [_row(2), _row(5)]
