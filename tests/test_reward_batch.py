"""Batch scoring through files and the real `swerl` command: no row lost, bad rows reported."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from swerl.errors import UserError
from swerl.reward import similarity_reward
from swerl.reward.batch import score_rows
from swerl.reward.files import score_file

SAMPLE = resources.files("swerl.data") / "reward_sample.jsonl"
ROWS = [json.loads(line) for line in SAMPLE.read_text().splitlines()]


def expected(row):
    result = similarity_reward(row["output"], row["code_context"], row["oracle_new_content"])
    return result.reward, result.info()


def swerl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "swerl.cli.main", *args], capture_output=True, text=True, timeout=300
    )


def test_sample_covers_every_outcome():
    scored = [expected(row) for row in ROWS]
    assert scored[0][0] == 1.0
    assert {info.get("error") for _, info in scored} >= {
        None,
        "tag_count",
        "empty_thought",
        "no_blocks",
        "search_not_found",
        "search_equals_replace",
    }
    assert any(0.0 < reward < 1.0 for reward, _ in scored)


def test_parallel_scoring_keeps_order_and_values():
    rows = ROWS * 20
    serial = list(score_rows(rows, workers=1))
    parallel = list(score_rows(rows, workers=2, chunk_size=7))
    assert parallel == serial == [expected(row) for row in rows]


def test_parallel_scoring_from_a_folder_holding_a_swerl_folder(tmp_path):
    # The parent of a clone holds `swerl/`: multiprocessing starts its forkserver with `-c`, so there the
    # current folder comes first on sys.path, and that folder shadowed an editable install as a namespace
    # package: every worker failed on `from swerl import __version__` (only with 256+ rows: workers).
    (tmp_path / "swerl").mkdir()
    rows = tmp_path / "rows.jsonl"
    write_jsonl(rows, [json.dumps(row) for row in ROWS] * 30)
    command = Path(sys.executable).parent / "swerl"
    assert command.exists(), "the swerl console script of this environment"
    done = subprocess.run(
        [str(command), "reward", "score", "--input", "rows.jsonl", "--output", "out.jsonl", "--workers", "2"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 30 * len(ROWS)


def write_jsonl(path: Path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def test_jsonl_bad_rows_are_reported_and_never_dropped(tmp_path):
    good = ROWS[1]
    missing = {k: v for k, v in good.items() if k != "oracle_new_content"}
    wrong_type = dict(good, code_context=["not", "pairs", "!"])
    output_not_str = dict(good, output=42)
    lines = [
        json.dumps(good),
        json.dumps(missing),
        "{not json",
        json.dumps([1, 2]),
        json.dumps(wrong_type),
        json.dumps(output_not_str),
        json.dumps(dict(good, code_context=json.dumps(good["code_context"]))),
    ]
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_jsonl(src, lines)
    summary = score_file(src, dst, workers=2, progress=False)
    out = [json.loads(line) for line in dst.read_text().splitlines()]
    assert len(out) == len(lines) == summary.rows
    assert (out[0]["reward"], out[0]["reward_info"]) == expected(good)
    assert out[0]["name"] == good["name"]
    for bad in out[1:6]:
        assert bad["reward"] is None
        assert bad["reward_info"]["error"] == "bad_row"
    assert "oracle_new_content" in out[1]["reward_info"]["message"]
    assert out[2]["_raw"] == "{not json"
    assert out[3]["_raw"] == [1, 2]
    assert out[6]["reward"] == out[0]["reward"]  # a JSON-string context is accepted
    assert summary.errors["bad_row"] == 5


def test_parquet_with_map_and_record_columns(tmp_path):
    def records(d):
        return [{"path": p, "content": c} for p, c in d.items()]

    table = pa.table(
        {
            "name": [r["name"] for r in ROWS],
            "output": [r["output"] for r in ROWS],
            "code_context": pa.array(
                [list(r["code_context"].items()) for r in ROWS], type=pa.map_(pa.string(), pa.string())
            ),
            "oracle_new_content": [records(r["oracle_new_content"]) for r in ROWS],
            "reward": [123.0] * len(ROWS),  # a stale column is replaced, not duplicated
        }
    )
    src, dst = tmp_path / "in.parquet", tmp_path / "out.parquet"
    pq.write_table(table, src, row_group_size=3)
    score_file(src, dst, workers=2, progress=False)
    out = pq.read_table(dst)
    assert out.column_names == [
        "name",
        "output",
        "code_context",
        "oracle_new_content",
        "reward",
        "reward_info",
    ]
    assert out["name"].to_pylist() == [r["name"] for r in ROWS]
    got = list(zip(out["reward"].to_pylist(), map(json.loads, out["reward_info"].to_pylist()), strict=True))
    assert got == [expected(r) for r in ROWS]


def test_an_input_without_rows_is_an_error_and_writes_nothing(tmp_path):
    """An empty result with exit status 0 would pass for a scored file."""
    src, dst = tmp_path / "in.parquet", tmp_path / "out.parquet"
    columns = ("output", "code_context", "oracle_new_content")
    pq.write_table(pa.table({name: pa.array([], pa.string()) for name in columns}), src)
    with pytest.raises(UserError, match="no rows"):
        score_file(src, dst, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"]


def test_cli_scores_a_file(tmp_path):
    dst = tmp_path / "scored.jsonl"
    proc = swerl("reward", "score", "--input", str(SAMPLE), "--output", str(dst), "--quiet", "--workers", "1")
    assert proc.returncode == 0, proc.stderr
    assert f"rows: {len(ROWS)}" in proc.stderr
    out = [json.loads(line) for line in dst.read_text().splitlines()]
    assert [(r["reward"], r["reward_info"]) for r in out] == [expected(r) for r in ROWS]


def test_progress_bar_ends_at_the_rows_scored_when_the_file_has_blank_lines(tmp_path, capsys):
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_jsonl(src, [json.dumps(ROWS[0]), "", json.dumps(ROWS[1]), "   ", ""])
    summary = score_file(src, dst, workers=1, progress=True)
    assert summary.rows == 2
    final = capsys.readouterr().err.rsplit("\r", 1)[-1]
    assert "2/2" in final, final


def test_cli_rejects_unknown_format_without_writing(tmp_path):
    dst = tmp_path / "scored.csv"
    proc = swerl("reward", "score", "--input", str(SAMPLE), "--output", str(dst))
    assert proc.returncode == 1
    assert "unknown format" in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_cli_demo_explains_each_answer(tmp_path):
    proc = swerl("reward", "demo", "--output", str(tmp_path / "demo.jsonl"), "--workers", "1")
    assert proc.returncode == 0, proc.stderr
    assert "exact fix" in proc.stdout and "malformed: search_not_found" in proc.stdout


@pytest.mark.parametrize("args", [[], ["reward"], ["reward", "score"], ["reward", "demo"]])
def test_every_command_has_help(args):
    proc = swerl(*args, "--help")
    assert proc.returncode == 0
    assert "usage: swerl" in proc.stdout
