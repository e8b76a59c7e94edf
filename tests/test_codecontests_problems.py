"""Loading problems from files in the Hugging Face deepmind/code_contests schema, written by the tests."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from swerl.codecontests.problems import NO_PRIVATE_TESTS, NO_PUBLIC_TESTS, load_problems
from swerl.sandbox import TestCase


def _row(name: str, public: int, private: int, generated: int = 0) -> dict:
    def tests(count: int, tag: str) -> dict:
        return {"input": [f"{tag}{i}\n" for i in range(count)], "output": [f"{i}\n" for i in range(count)]}

    return {
        "name": name,
        "description": f"Problem {name}",
        "public_tests": tests(public, "pub"),
        "private_tests": tests(private, "priv"),
        "generated_tests": tests(generated, "gen"),
        "time_limit": {"seconds": 2, "nanos": 500_000_000},
        "memory_limit_bytes": 256_000_000,
        "solutions": {"language": [2, 3, 3], "solution": ["int main(){}", "print(1)", "print(2)"]},
    }


ROWS = [
    _row("ok", 1, 2, 3),
    _row("no-public", 0, 2),
    _row("no-private", 1, 0),
    _row("only-generated", 2, 0, 1),
]


def _check(report) -> None:
    assert [p.name for p in report.problems] == ["ok", "only-generated"]
    assert report.dropped == {NO_PUBLIC_TESTS: 1, NO_PRIVATE_TESTS: 1}
    assert "2 problems kept, 2 dropped" in report.summary()
    ok = report.problems[0]
    assert ok.public_tests == (TestCase("pub0\n", "0\n"),)
    assert len(ok.held_out_tests) == 5
    assert ok.time_limit_s == 2.5 and ok.memory_limit_bytes == 256_000_000
    assert ok.python_solutions == ("print(1)", "print(2)")
    limits = ok.limits()
    assert limits.cpu_s == 2.5 and limits.memory_bytes == 256_000_000


def test_parquet_in_hub_schema(tmp_path: Path) -> None:
    path = tmp_path / "train-00000-of-00001.parquet"
    pq.write_table(pa.Table.from_pylist(ROWS), path)
    _check(load_problems(path))


def test_jsonl_in_same_shape(tmp_path: Path) -> None:
    path = tmp_path / "problems.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in ROWS) + "\n", encoding="utf-8")
    _check(load_problems(path))


def test_plain_number_and_missing_time_limits(tmp_path: Path) -> None:
    rows = [dict(_row("a", 1, 1), time_limit=3), dict(_row("b", 1, 1), time_limit=None, memory_limit_bytes=0)]
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    a, b = load_problems(path).problems
    assert a.time_limit_s == 3.0 and b.time_limit_s is None and b.memory_limit_bytes is None


def test_malformed_tests_and_unknown_format_raise(tmp_path: Path) -> None:
    bad = dict(_row("x", 1, 1), public_tests={"input": ["1"], "output": []})
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(bad), encoding="utf-8")
    with pytest.raises(ValueError, match="inputs"):
        load_problems(path)
    with pytest.raises(ValueError, match="parquet"):
        load_problems(tmp_path / "x.csv")
