"""Instances loader, stage files (resume), repository cache (mirrors, blobs, exports without hooks)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from agentless.demo import build_demo
from agentless.stages import StageFile
from swerl.execution.instances import instance_to_row, load_instances
from swerl.git import GitError
from swerl.git.clones import RepoCache


def _row(iid: str) -> dict[str, str]:
    return {
        "instance_id": iid,
        "repo": "o/r",
        "base_commit": "a" * 40,
        "problem_statement": "it breaks",
        "patch": "",
        "test_patch": "",
        "FAIL_TO_PASS": json.dumps(["t.py::test_a"]),
        "PASS_TO_PASS": "[]",
        "version": "1.0",
        "created_at": "2024-01-01",
    }


def test_loads_parquet_and_jsonl_with_json_string_test_lists(tmp_path: Path) -> None:
    rows = [_row("o__r-1"), _row("o__r-2")]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "x.parquet")
    (tmp_path / "x.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for name in ("x.parquet", "x.jsonl"):
        instances = load_instances(tmp_path / name)
        assert [i.instance_id for i in instances] == ["o__r-1", "o__r-2"]
        assert instances[0].fail_to_pass == ("t.py::test_a",)
        assert instances[0].pass_to_pass == ()
        assert instances[0].extra["created_at"] == "2024-01-01"
    only = load_instances(tmp_path / "x.jsonl", instance_ids=["o__r-2"])
    assert [i.instance_id for i in only] == ["o__r-2"]
    assert instance_to_row(only[0])["FAIL_TO_PASS"] == rows[1]["FAIL_TO_PASS"]


def test_loader_errors_are_explicit(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps(_row("a")) + "\n" + json.dumps(_row("a")) + "\n")
    with pytest.raises(ValueError, match="duplicate"):
        load_instances(path)
    path.write_text(json.dumps(_row("a")) + "\n")
    with pytest.raises(ValueError, match="not in"):
        load_instances(path, instance_ids=["b"])
    with pytest.raises(FileNotFoundError):
        load_instances(tmp_path / "missing.jsonl")
    bad = {**_row("a"), "FAIL_TO_PASS": "not json"}
    path.write_text(json.dumps(bad) + "\n")
    with pytest.raises(ValueError, match="FAIL_TO_PASS"):
        load_instances(path)


def test_stage_file_resume_drops_a_torn_last_line(tmp_path: Path) -> None:
    stage = StageFile(tmp_path / "s.jsonl")
    stage.append({"instance_id": "a", "x": 1})
    stage.append({"instance_id": "b", "x": 2})
    with stage.path.open("a") as f:
        f.write('{"instance_id": "c", "x"')  # a crash mid-write
    reopened = StageFile(stage.path)
    assert reopened.finished_ids() == {"a", "b"}
    reopened.append({"instance_id": "a", "x": 3})
    assert reopened.by_id()["a"]["x"] == 3
    with pytest.raises(ValueError):
        reopened.append({"x": 1})


def test_repo_cache_mirrors_offline_reads_blobs_and_checks_out(tmp_path: Path) -> None:
    instance, clones = build_demo(tmp_path / "demo")
    hook = clones / "demo-org__calc" / ".git" / "hooks" / "post-checkout"
    hook.write_text("#!/bin/sh\nexit 1\n")  # would fail the checkout, were it run
    hook.chmod(0o755)
    repos = RepoCache(tmp_path / "cache", mirror_dir=clones, offline=True)
    entries = {e.path: e for e in repos.files_at(instance.repo, instance.base_commit)}
    assert "calc/stats.py" in entries and repos.bare_path(instance.repo).is_dir()
    blobs = dict(repos.read_blobs(instance.repo, [entries["calc/stats.py"].blob, entries["README.md"].blob]))
    assert blobs[entries["README.md"].blob] == b"# calc\n\nSmall numeric helpers.\n"
    assert repos.read_file(instance.repo, instance.base_commit, "nope.py") is None
    out = repos.checkout(instance.repo, instance.base_commit, tmp_path / "tree")
    original = subprocess.run(
        ["git", "show", f"{instance.base_commit}:calc/stats.py"],
        cwd=clones / "demo-org__calc",
        capture_output=True,
        check=True,
    ).stdout
    assert (out / "calc" / "stats.py").read_bytes() == original
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=out, capture_output=True, text=True, check=True)
    assert head.stdout.strip() == instance.base_commit
    assert not subprocess.run(
        ["git", "status", "--porcelain"], cwd=out, capture_output=True, text=True
    ).stdout
    with pytest.raises(GitError, match="not an empty directory"):
        repos.checkout(instance.repo, instance.base_commit, out)
    with pytest.raises(GitError, match="no clone"):
        RepoCache(tmp_path / "c2", mirror_dir=tmp_path, offline=True).ensure("x/y", "a" * 40)
    with pytest.raises(GitError, match="not found"):
        repos.ensure(instance.repo, "b" * 40)
