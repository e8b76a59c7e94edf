"""Loading problems from files in the Hugging Face deepmind/code_contests schema, written by the tests."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from swerl.codecontests.problems import NO_PRIVATE_TESTS, NO_PUBLIC_TESTS, load_problems, parse_problem
from swerl.errors import UserError
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
    (tmp_path / "x.csv").write_text("name\n", encoding="utf-8")
    with pytest.raises(UserError, match="parquet"):
        load_problems(tmp_path / "x.csv")
    with pytest.raises(UserError, match="no file matches"):
        load_problems(tmp_path / "train-*.parquet")
    with pytest.raises(UserError, match="no such file"):
        load_problems(tmp_path / "missing.parquet")


def hub_schema() -> pa.Schema:
    """deepmind/code_contests as the Hub's Parquet shards type it (all 21 columns)."""
    tests = pa.struct([("input", pa.list_(pa.string())), ("output", pa.list_(pa.string()))])
    solutions = pa.struct([("language", pa.list_(pa.int64())), ("solution", pa.list_(pa.string()))])
    return pa.schema(
        [
            ("name", pa.string()),
            ("description", pa.string()),
            ("public_tests", tests),
            ("private_tests", tests),
            ("generated_tests", tests),
            ("source", pa.int64()),
            ("difficulty", pa.int64()),
            ("solutions", solutions),
            ("incorrect_solutions", solutions),
            ("cf_contest_id", pa.int64()),
            ("cf_index", pa.string()),
            ("cf_points", pa.float32()),
            ("cf_rating", pa.int32()),
            ("cf_tags", pa.list_(pa.string())),
            ("is_description_translated", pa.bool_()),
            ("untranslated_description", pa.string()),
            ("time_limit", pa.struct([("seconds", pa.int64()), ("nanos", pa.int64())])),
            ("memory_limit_bytes", pa.int64()),
            ("input_file", pa.string()),
            ("output_file", pa.string()),
        ]
    )


def test_sharded_hub_parquet_streams_by_glob(tmp_path: Path) -> None:
    """Three shards named like the Hub's, read by a glob and by a list, with and without generated tests;
    rows come back in shard order, and only the columns a Problem uses are read."""
    schema = hub_schema()
    names = []
    for shard in range(3):
        rows = []
        for i in range(7):
            name = f"p{shard}-{i}"
            names.append(name)
            row = {field.name: None for field in schema}
            row.update(_row(name, 1, 2, 5))
            row.update(source=2, difficulty=7, cf_tags=["math"], incorrect_solutions=row["solutions"])
            rows.append(row)
        table = pa.Table.from_pylist(rows, schema=schema)
        pq.write_table(table, tmp_path / f"train-{shard:05d}-of-00003-{shard}e9f.parquet", row_group_size=3)
    (tmp_path / "valid-00000-of-00001.parquet").write_bytes(b"not read")  # outside the glob

    report = load_problems(tmp_path / "train-*.parquet")
    assert [p.name for p in report.problems] == names and not report.dropped
    first = report.problems[0]
    assert len(first.generated_tests) == 5 and len(first.held_out_tests) == 7
    assert first.time_limit_s == 2.5 and first.python_solutions == ("print(1)", "print(2)")
    lean = load_problems(tmp_path / "train-*.parquet", generated_tests=False)
    assert [p.name for p in lean.problems] == names
    assert all(p.generated_tests == () and len(p.held_out_tests) == 2 for p in lean.problems)
    listed = ",".join(str(tmp_path / f"train-{s:05d}-of-00003-{s}e9f.parquet") for s in (2, 0))
    assert [p.name for p in load_problems(listed).problems] == names[14:] + names[:7]

    from swerl.codecontests.problems import iter_rows

    batches = list(iter_rows(tmp_path / "train-*.parquet", batch_rows=2, generated_tests=False))
    assert (
        len(batches) == 21 and "generated_tests" not in batches[0] and "incorrect_solutions" not in batches[0]
    )


@pytest.mark.parametrize(
    "row",
    [
        {"time_limit": {"seconds": -5}},
        {"time_limit": {"seconds": 100_000_000}},
        {"memory_limit_bytes": -1},
        {"public_tests": {"input": "ab", "output": "cd"}},
    ],
)
def test_limits_and_tests_that_cannot_be_meant_are_refused(row: dict) -> None:
    with pytest.raises(ValueError):
        parse_problem(row)


def test_zero_limits_mean_unknown_as_in_the_dataset() -> None:
    problem = parse_problem({"time_limit": {"seconds": 0}, "memory_limit_bytes": 0})
    assert problem.time_limit_s is None and problem.memory_limit_bytes is None
