"""Decontamination by identity: the shipped SWE-bench table, the script that rebuilds it from the
datasets' Parquet files in a git history, and a clone recognised by its commits under any name."""

from __future__ import annotations

import gzip
import importlib.util
import io
import json
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from data_pipeline.config import MineConfig
from data_pipeline.filter import decontam
from data_pipeline.filter.decontam import Decontaminator, benchmark_repos, identify, swebench_instances
from data_pipeline.run.runner import mine
from data_pipeline.sources.local import LocalSource
from data_pipeline.synthetic import HistoryBuilder, random_fix
from swerl.cli.main import main as swerl_main

ROOT = Path(__file__).resolve().parent.parent


def _script():
    spec = importlib.util.spec_from_file_location(
        "build_swebench_table", ROOT / "scripts/build_swebench_table.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_shipped_table_holds_every_readable_split_whole():
    instances = swebench_instances()
    by_split: dict[str, int] = {}
    for item in instances:
        for split in item.datasets:
            by_split[split] = by_split.get(split, 0) + 1
    # The sizes the datasets publish; the full test split's file is not in the history we built from.
    assert by_split["SWE-bench_Lite/test"] == 300
    assert by_split["SWE-bench_Verified/test"] == 500
    assert by_split["SWE-bench_Multilingual/test"] == 300
    assert by_split["SWE-bench_Multimodal/dev"] == 102
    assert by_split["SWE-bench/dev"] == 225
    requests = {item.instance_id: item for item in instances if item.repo == "psf/requests"}
    assert requests["psf__requests-2317"].files == ("requests/sessions.py",)
    assert requests["psf__requests-2317"].pull_number == 2317
    assert all(len(item.base_commit) == 40 and item.files for item in instances)
    # The twelve repositories of the SWE-bench test set are all there (Lite and Verified cover them).
    assert {"django/django", "sympy/sympy", "psf/requests", "pallets/flask", "mwaskom/seaborn"} <= set(
        benchmark_repos()
    )


def _parquet(rows: list[dict]) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), sink)
    return sink.getvalue()


def _instance(repo: str, number: int, base: str, patch: str) -> dict:
    return {
        "instance_id": f"{repo.replace('/', '__')}-{number}",
        "repo": repo,
        "base_commit": base,
        "created_at": "2023-05-01T10:00:00Z",
        "patch": patch,
        "problem_statement": "unused",
    }


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def test_the_script_takes_the_newest_readable_version_of_each_split(tmp_path):
    repo = tmp_path / "swe-bench"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "T")
    patch = (
        "diff --git a/src/a.py b/src/a.py\n--- a/src/a.py\n+++ b/src/a.py\n@@ -1 +1 @@\n-x\n+y\n"
        "diff --git a/new.py b/new.py\nnew file mode 100644\n--- /dev/null\n+++ b/new.py\n@@ -0,0 +1 @@\n+z\n"
    )
    versions = [
        [_instance("acme/w", 1, "a" * 40, patch)],
        [_instance("acme/w", 1, "a" * 40, patch), _instance("acme/w", 2, "b" * 40, patch)],
    ]
    for rows in versions:
        (repo / "data" / "SWE-bench_Lite").mkdir(parents=True, exist_ok=True)
        (repo / "data" / "SWE-bench_Lite" / "test.parquet").write_bytes(_parquet(rows))
        (repo / "data" / "SWE-bench_Verified").mkdir(parents=True, exist_ok=True)
        (repo / "data" / "SWE-bench_Verified" / "test.parquet").write_bytes(_parquet(rows[:1]))
        _git(repo, "add", "-A")
        _git(repo, "commit", "-qm", "data")
    (repo / "data" / "SWE-bench_Lite" / "test.parquet").write_bytes(b"not parquet")  # a broken newest
    _git(repo, "commit", "-qam", "broken")
    out = tmp_path / "table.json.gz"
    assert _script().main([str(repo), "--out", str(out)]) == 0
    table = json.loads(gzip.decompress(out.read_bytes()))
    rows = [dict(zip(table["columns"], row, strict=True)) for row in table["rows"]]
    assert [(r["instance_id"], r["datasets"]) for r in rows] == [
        ("acme__w-1", ["SWE-bench_Lite/test", "SWE-bench_Verified/test"]),
        ("acme__w-2", ["SWE-bench_Lite/test"]),
    ]
    assert rows[0]["files"] == ["new.py", "src/a.py"] and rows[0]["pull_number"] == 1
    assert table["splits"]["SWE-bench_Lite/test"]["rows"] == 2
    first = out.read_bytes()
    _script().main([str(repo), "--out", str(out)])
    assert out.read_bytes() == first  # the same inputs give the same bytes


@pytest.fixture()
def upstream(tmp_path, monkeypatch):
    """A repository, a clone of it under another name with no remote, and a table that makes the
    upstream a benchmark repository (`acme/widgets`, one instance: its third PR)."""
    builder = HistoryBuilder(seed=11)
    prs = [random_fix(builder) for _ in range(8)]
    builder.write(tmp_path / "upstream")
    clone = tmp_path / "somewhere" / "my-project"
    subprocess.run(["git", "clone", "-q", str(tmp_path / "upstream"), str(clone)], check=True)
    _git(clone, "remote", "remove", "origin")
    base = _git(clone, "rev-parse", f"{prs[2].sha}^").strip()
    table = {
        "columns": list(_script().COLUMNS),
        "rows": [
            ["acme__widgets-" + str(prs[2].number), "acme/widgets", prs[2].number, base, "", ["x.py"], ["t"]],
            ["other__thing-1", "other/thing", 1, "c" * 40, "", ["y.py"], ["t"]],
        ],
    }
    path = tmp_path / "table.json.gz"
    path.write_bytes(gzip.compress(json.dumps(table).encode()))
    monkeypatch.setattr(decontam, "TABLE", path)
    return clone, prs


def test_a_clone_is_known_by_its_commits(upstream):
    clone, prs = upstream
    found = identify(clone / ".git")
    assert found is not None and found.repo == "acme/widgets" and found.evidence.endswith(f"-{prs[2].number}")


def test_a_renamed_clone_without_remote_yields_no_rows_and_says_why(upstream, tmp_path, capsys):
    clone, _ = upstream
    common = ["mine", "--local", str(clone), "--clones", str(tmp_path / "cache"), "--quiet"]
    assert swerl_main(["data", *common, "--out", str(tmp_path / "out")]) == 0
    report = capsys.readouterr().err
    assert "rows: 0" in report
    assert "local/my-project is the SWE-bench repository acme/widgets" in report
    # The same command again (the run is finished): the same report, the exclusion said again.
    assert swerl_main(["data", *common, "--out", str(tmp_path / "out")]) == 0
    again = capsys.readouterr().err
    assert "rows: 0" in again
    assert "local/my-project is the SWE-bench repository acme/widgets" in again
    assert swerl_main(["data", *common, "--out", str(tmp_path / "kept"), "--no-decontaminate"]) == 0
    assert "rows: 0" not in capsys.readouterr().err


def test_the_finer_mode_drops_only_the_instances_own_prs(upstream, tmp_path):
    clone, prs = upstream
    config = MineConfig(decontaminate_mode="instances")
    summary = mine(
        tmp_path / "out", LocalSource(clone, tmp_path / "cache"), config, workers=1, progress=False
    )
    drops = pq.read_table(tmp_path / "out" / "extract" / "drops-00000.parquet").to_pylist()
    contaminated = [d for d in drops if d["reason"] == "contaminated"]
    assert [d["instance_id"] for d in contaminated] == [f"local__my-project-{prs[2].number}"]
    assert contaminated[0]["detail"] == (
        f"benchmark instance acme__widgets-{prs[2].number} (local/my-project is acme/widgets)"
    )
    assert summary.rows > 0


@pytest.mark.parametrize(
    ("repo", "number", "why"),
    [
        (
            "kennethreitz/requests",
            5,
            "benchmark repository psf/requests (kennethreitz/requests is psf/requests)",
        ),
        (
            "Kennethreitz/Requests",
            2317,
            "benchmark instance psf__requests-2317 (Kennethreitz/Requests is psf/requests)",
        ),
        ("PSF/requests", 5, "benchmark repository PSF/requests"),
        ("pydata/xray", 7, "benchmark repository pydata/xarray (pydata/xray is pydata/xarray)"),
        ("acme/tool", 5, None),
    ],
)
def test_earlier_names_of_benchmark_repositories_are_theirs(repo, number, why):
    decon = Decontaminator.build(True, [], [])
    assert decon.reason(f"{repo.replace('/', '__')}-{number}", repo, number) == why
    assert Decontaminator.build(False, [], []).reason("x", repo, number) is None


def test_instances_mode_drops_only_the_listed_instances_of_an_added_list():
    """`--decontaminate-with ids --decontaminate-mode instances`: the listed instance's PR goes, the rest
    of its repository stays; in `repository` mode the whole repository goes."""
    ids, repos = ["acme__tool-48"], ["acme/tool"]
    by_instances = Decontaminator.build(True, ids, repos, mode="instances")
    assert by_instances.reason("acme__tool-48", "acme/tool", 48) == "benchmark instance acme__tool-48"
    assert by_instances.reason("acme__tool-49", "acme/tool", 49) is None
    by_repository = Decontaminator.build(True, ids, repos)
    assert by_repository.reason("acme__tool-49", "acme/tool", 49) == "benchmark repository acme/tool"


def test_clones_sharing_a_directory_name_do_not_share_a_cache(upstream, tmp_path):
    """`~/a/my-project` (the benchmark repository) and `~/b/my-project` (another) are both named
    `local/my-project`: the second must not be mined, or identified, from the first's history."""
    clone, _ = upstream
    other = tmp_path / "elsewhere" / "my-project"
    builder = HistoryBuilder(seed=12)
    for _ in range(4):
        random_fix(builder)
    builder.write(other)
    cache = tmp_path / "shared-cache"
    first = mine(tmp_path / "one", LocalSource(clone, cache), MineConfig(), workers=1, progress=False)
    second = mine(tmp_path / "two", LocalSource(other, cache), MineConfig(), workers=1, progress=False)
    assert first.rows == 0 and first.notes
    assert second.rows > 0 and not second.notes


def test_a_decontamination_list_that_can_match_nothing_is_refused(tmp_path):
    """A malformed id or an empty file would exclude nothing, silently: the run would train on what the
    user meant to keep out."""
    from data_pipeline.filter.decontam import load_benchmark
    from swerl.errors import UserError

    (tmp_path / "bad.txt").write_text("pallets__click-48\npallets/click#49\n")
    with pytest.raises(UserError, match=r"1 entries are not instance ids .* 'pallets/click#49'"):
        load_benchmark(str(tmp_path / "bad.txt"))
    (tmp_path / "empty.txt").write_text("# nothing yet\n")
    with pytest.raises(UserError, match="no instance ids or repositories in it"):
        load_benchmark(str(tmp_path / "empty.txt"))
    (tmp_path / "good.txt").write_text("pallets__click-48\n")
    assert load_benchmark(str(tmp_path / "good.txt")) == (["pallets__click-48"], ["pallets/click"])
