"""`swerl data split`: which rows are held out, on hand-made tables and on a real mining output."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from data_pipeline.report.split import held_out_rows
from data_pipeline.synthetic import HistoryBuilder, random_fix
from swerl.errors import UserError
from swerl.trainers.data import read_rows, rows_file_problem


def table(rows: list[tuple[str, str, str]]) -> pa.Table:
    """(instance_id, repo, created_at) rows."""
    ids, repos, created = zip(*rows, strict=True)
    return pa.table({"instance_id": list(ids), "repo": list(repos), "created_at": list(created)})


ROWS = table(
    [
        ("a-1", "o/a", "2024-01-01T00:00:00Z"),
        ("b-1", "o/b", "2024-03-01T00:00:00Z"),
        ("a-2", "o/a", "2024-02-01T00:00:00Z"),
        ("c-1", "o/c", "2024-05-01T00:00:00Z"),
        ("b-2", "o/b", "2024-04-01T00:00:00Z"),
        ("a-3", "o/a", "2024-04-01T00:00:00Z"),
    ]
)


def test_time_holds_out_the_newest_with_ties_broken_by_id() -> None:
    assert held_out_rows(ROWS, "time", 1) == [3]  # c-1, May
    assert held_out_rows(ROWS, "time", 2) == [3, 4]  # then b-2 before a-3 (same day, larger id)
    assert held_out_rows(ROWS, "time", 3) == [3, 4, 5]


def test_time_compares_instants_not_text() -> None:
    # Commits keep their author's offset: 09:36+02:00 (07:36 UTC) is older than 04:36-04:00 (08:36 UTC).
    rows = table(
        [
            ("x-1", "o/x", "2017-05-16T09:36:39+02:00"),
            ("x-2", "o/x", "2017-05-16T04:36:42-04:00"),
            ("x-3", "o/x", "2017-05-16T06:00:00Z"),
        ]
    )
    assert held_out_rows(rows, "time", 1) == [1]
    assert held_out_rows(rows, "time", 2) == [0, 1]


def test_repo_holds_out_whole_repositories_newest_first() -> None:
    assert held_out_rows(ROWS, "repo", 1) == [3]  # o/c's one row
    assert held_out_rows(ROWS, "repo", 2) == [1, 3, 4]  # o/c, then all of o/b (its newest PR is next)
    with pytest.raises(UserError, match="every repository"):
        held_out_rows(ROWS, "repo", 4)
    one_repo = table([("a-1", "o/a", "2024-01-01"), ("a-2", "o/a", "2025-01-01")])
    with pytest.raises(UserError, match="two repositories or more; these are all o/a"):
        held_out_rows(one_repo, "repo", 1)


def test_random_is_seeded_and_both_sides_keep_rows() -> None:
    first = held_out_rows(ROWS, "random", 2, seed=1)
    assert first == held_out_rows(ROWS, "random", 2, seed=1) and len(first) == 2
    assert {tuple(held_out_rows(ROWS, "random", 2, seed=s)) for s in range(20)} != {tuple(first)}
    for size in (0, 6):
        with pytest.raises(UserError, match="rows on both sides"):
            held_out_rows(ROWS, "time", size)


def test_split_of_a_mined_output(tmp_path: Path) -> None:
    builder = HistoryBuilder(seed=5)
    for _ in range(20):
        random_fix(builder)
    builder.write(tmp_path / "repo")
    out = tmp_path / "out"

    def swerl(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "swerl", "data", *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=300)

    mined = swerl("mine", "--local", str(tmp_path / "repo"), "--repo-name", "acme/tool", "--clones",
                  str(tmp_path / "cache"), "--out", str(out), "--quiet")  # fmt: skip
    assert mined.returncode == 0, mined.stderr
    rows = pq.read_table(out / "data").num_rows
    # A trainer's train_file may name the output folder itself: its rows are in data/.
    assert rows_file_problem(out) is None and len(read_rows(out)) == rows
    done = swerl("split", str(out), "--eval-size", "3")
    assert done.returncode == 0, done.stderr
    train, held = (pq.read_table(out / "split" / f"{name}.parquet") for name in ("train", "eval"))
    assert held.num_rows == 3 and train.num_rows == rows - 3
    assert min(held.column("created_at").to_pylist()) >= max(train.column("created_at").to_pylist())
    assert not set(held.column("instance_id").to_pylist()) & set(train.column("instance_id").to_pylist())
    assert train.schema == held.schema == pq.read_schema(sorted((out / "data").glob("*.parquet"))[0])

    # The split folder as train_file would read eval.parquet too: warned of before any model loads.
    from swerl.trainers.config import SFTConfig

    config = SFTConfig(
        model_name_or_path="m", train_file=str(out / "split"), eval_file=str(out / "split/eval.parquet")
    )
    assert "eval.parquet is read by train_file" in (config.held_out_in_training() or "")
    config.train_file = str(out)  # the mining output itself: its data/ holds the held-out rows too
    assert "lies inside train_file's mining output" in (config.held_out_in_training() or "")
    config.train_file = str(out / "split" / "train.parquet")
    assert config.held_out_in_training() is None

    # An unfinished run is refused as rows: its data/ may hold shards that no count includes.
    unfinished = tmp_path / "unfinished"
    shutil.copytree(out, unfinished)
    manifest = json.loads((unfinished / "manifest.json").read_text())
    manifest["stages"]["render"]["done"] = False
    (unfinished / "manifest.json").write_text(json.dumps(manifest))
    assert "the mining run is not finished" in (rows_file_problem(unfinished) or "")
    with pytest.raises(UserError, match="the mining run is not finished"):
        read_rows(unfinished)

    again = swerl("split", str(out))
    assert again.returncode == 1 and "pass --overwrite" in again.stderr
    by_repo = swerl("split", str(out), "--by", "repo", "--overwrite")
    assert by_repo.returncode == 1 and "these are all acme/tool" in by_repo.stderr
