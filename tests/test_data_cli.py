"""`swerl data` commands: help texts, `stats` funnel and PNG histograms."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest

from data_pipeline.report.stats import Funnel, funnel, plot_histogram
from data_pipeline.synthetic import HistoryBuilder, random_fix


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "swerl", "data", *args], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("command", [["mine", "--help"], ["stats", "--help"]])
def test_help(command):
    proc = run(*command)
    assert proc.returncode == 0 and "usage:" in proc.stdout


def test_mine_then_stats(tmp_path):
    builder = HistoryBuilder(seed=3)
    for _ in range(12):
        random_fix(builder)
    builder.write(tmp_path / "repo")
    out = tmp_path / "out"
    mined = run(
        "mine",
        "--local",
        str(tmp_path / "repo"),
        "--repo-name",
        "acme/tool",
        "--clones",
        str(tmp_path / "cache"),
        "--out",
        str(out),
        "--shard-size",
        "5",
        "--quiet",
    )
    assert mined.returncode == 0, mined.stderr
    stats = run("stats", str(out))
    assert stats.returncode == 0, stats.stderr
    assert "candidate PRs" in stats.stdout and "rows" in stats.stdout
    report = funnel(out)
    assert report.complete and report.candidates == 12 and report.rows > 0
    # Where the workers' time went, from the manifest: extract and render CPU seconds.
    assert set(report.cpu) == {"extract", "render"} and min(report.cpu.values()) > 0
    assert "worker CPU" in stats.stdout
    for name in ("prompt_tokens.png", "files_per_instance.png"):
        data = (out / "stats" / name).read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 100
    assert f"prompt tokens per instance: n={report.rows} " in stats.stdout
    # A run stopped mid-way can leave a shard written but not recorded: the histograms count what the
    # funnel counts.
    first = sorted((out / "data").glob("shard-*.parquet"))[0]
    (out / "data" / "shard-99999.parquet").write_bytes(first.read_bytes())
    again = run("stats", str(out))
    assert f"prompt tokens per instance: n={report.rows} " in again.stdout, again.stdout


def test_histogram_png(tmp_path):
    """matplotlib draws a real PNG of the requested size, also for a single distinct value."""
    import struct

    for name, values in (("spread.png", [1, 5, 3, 3, 2, 900]), ("one.png", [7, 7])):
        path = tmp_path / name
        plot_histogram(path, values, "title", "x")
        data = path.read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n")
        assert struct.unpack(">II", data[16:24]) == (800, 450)


def test_missing_dir_is_a_clean_error(tmp_path):
    proc = run("stats", str(tmp_path / "nope"))
    assert proc.returncode == 2 and "no such directory" in proc.stderr
    proc = run("stats", str(tmp_path))
    assert proc.returncode == 1 and "not a mining output" in proc.stderr


def test_a_clone_without_commits_or_an_unknown_ref_is_a_clean_error(tmp_path):
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    common = ["--clones", str(tmp_path / "cache"), "--quiet", "--local", str(repo)]
    proc = run("mine", *common, "--out", str(tmp_path / "out1"))
    assert proc.returncode == 1 and "has no commit checked out" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    HistoryBuilder(seed=3).write(tmp_path / "built")
    common[-1] = str(tmp_path / "built")
    proc = run("mine", *common, "--out", str(tmp_path / "out2"), "--ref", "no-such-branch")
    assert proc.returncode == 1 and "swerl: error: --ref no-such-branch: not a branch" in proc.stderr, (
        proc.stderr
    )
    assert "Traceback" not in proc.stderr
    # Refused before the run writes anything: no manifest that `data stats` would read as an unfinished run.
    assert not (tmp_path / "out1").exists() and not (tmp_path / "out2").exists()


def test_a_stopped_runs_funnel_accounts_for_every_candidate():
    stopped = Funnel(candidates=20, rows=5, drops={"extract": Counter(deletes_file=3)}, complete=False)
    lines = stopped.text().splitlines()
    assert "  - not yet through every stage    12" in lines
    assert lines[-1].startswith("rows") and lines[-1].endswith("(run not finished)")
    finished = Funnel(candidates=8, rows=5, drops={"extract": Counter(deletes_file=3)}, complete=True)
    assert "not yet" not in finished.text()


def test_max_candidate_files_caps_the_pool_a_context_is_chosen_from(tmp_path):
    """`--max-candidate-files N`: a PR's unmodified context files come from the first N files of each
    suffix in tree order, so with N=1 a row shows at most one file besides those it modifies."""
    import pyarrow.parquet as pq

    builder = HistoryBuilder(seed=3, files=20)
    for _ in range(10):
        random_fix(builder)
    builder.write(tmp_path / "repo")

    def extras(out_name: str, *options: str) -> list[int]:
        out = tmp_path / out_name
        mined = run(
            "mine", "--local", str(tmp_path / "repo"), "--repo-name", "acme/tool",
            "--clones", str(tmp_path / "cache"), "--out", str(out), "--quiet", *options,
        )  # fmt: skip
        assert mined.returncode == 0, mined.stderr
        rows = [
            row
            for shard in sorted((out / "data").glob("*.parquet"))
            for row in pq.read_table(shard).to_pylist()
        ]
        assert rows
        return [len(row["code_context"]) - len(row["modified_files"]) for row in rows]

    assert max(extras("default")) > 1
    assert max(extras("capped", "--max-candidate-files", "1")) <= 1
