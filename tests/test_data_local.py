"""`--local` mining end to end on a real git history built by the test (no network).

Every row is checked against the invariants a training row must hold: the oracle patch rebuilds the
oracle contents from the base contents, and the canonical answer built from the oracle scores exactly 1.0.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from data_pipeline.config import ContextConfig, FilterConfig, MineConfig
from data_pipeline.filter.rules import looks_generated
from data_pipeline.report.stats import funnel
from data_pipeline.run.runner import mine
from data_pipeline.sources.local import LocalSource
from data_pipeline.synthetic import edge_case_history
from swerl.edit_format import apply_patch_to_contents, build_messages, canonical_answer
from swerl.errors import UserError
from swerl.reward import similarity_reward
from swerl.reward.batch import score_row

CONFIG = MineConfig(shard_size=3, filters=FilterConfig(max_file_bytes=100_000))


def read_dir(folder: Path, prefix: str = "shard-") -> list[dict]:
    rows: list[dict] = []
    for shard in sorted(folder.glob(f"{prefix}*.parquet")):
        rows += pq.read_table(shard).to_pylist()
    return rows


def all_drops(out: Path) -> dict[str, str]:
    drops = {}
    for folder in ("collect", "extract", "dedup", "render"):
        for record in read_dir(out / folder, "drops-"):
            drops.setdefault(
                record["instance_id"]
                + ("@" + record["detail"] if record["reason"] == "duplicate_instance" else ""),
                record["reason"],
            )
    return drops


@pytest.fixture(scope="module")
def mined(tmp_path_factory):
    root = tmp_path_factory.mktemp("local")
    repo = root / "repo"
    prs = edge_case_history(repo)
    # Traps: a hook and a filter driver in the user's clone must never run.
    marker = root / "EXECUTED"
    hook = repo / ".git" / "hooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    subprocess.run(["git", "-C", str(repo), "config", "filter.evil.smudge", f"touch {marker}"], check=True)
    subprocess.run(["git", "-C", str(repo), "config", "diff.evil.textconv", f"touch {marker}"], check=True)
    source = LocalSource(repo, root / "cache", repo="acme/widgets")
    summary = mine(root / "out", source, CONFIG, workers=1, progress=False)
    return {"root": root, "repo": repo, "prs": prs, "out": root / "out", "summary": summary, "marker": marker}


def test_every_planned_pr_ends_as_expected(mined):
    rows = {row["instance_id"]: row for row in read_dir(mined["out"] / "data")}
    drops = all_drops(mined["out"])
    for pr in mined["prs"]:
        iid = f"acme__widgets-{pr.number}"
        if pr.expect == "duplicate_instance":
            assert drops[f"{iid}@{pr.sha}"] == "duplicate_instance"
        elif pr.expect is None:
            assert iid in rows, (pr.title, drops.get(iid))
            assert rows[iid]["merge_commit"] == pr.sha
        else:
            assert drops.get(iid) == pr.expect, pr.title
    assert mined["summary"].rows == len(rows) >= 7


def test_rows_meet_the_training_row_invariants(mined):
    rows = read_dir(mined["out"] / "data")
    merges = {f"acme__widgets-{pr.number}" for pr in mined["prs"] if pr.style == "merge"}
    for row in rows:
        context = {f["path"]: f["content"] for f in row["code_context"]}
        oracle = {f["path"]: f["content"] for f in row["oracle_new_content"]}
        base = {p: context[p] for p in oracle if p in context}
        assert apply_patch_to_contents(base, row["oracle_patch"]) == oracle
        answer = canonical_answer(context, oracle)
        assert similarity_reward(answer, context, oracle).reward == 1.0
        assert row["prompt"] == build_messages(row["problem_statement"], list(context.items()))
        source = "merge_commits" if row["instance_id"] in merges else "commit_message"
        assert row["problem_source"] == source
        assert row["base_commit"] and row["merge_commit"] and row["prompt_tokens"] > row["context_tokens"] > 0


def test_contents_are_byte_exact_and_match_the_plan(mined):
    rows = {row["instance_id"]: row for row in read_dir(mined["out"] / "data")}
    for pr in mined["prs"]:
        row = rows.get(f"acme__widgets-{pr.number}")
        if row is None or pr.expect:
            continue
        oracle = {f["path"]: f["content"].encode() for f in row["oracle_new_content"]}
        context = {f["path"]: f["content"].encode() for f in row["code_context"]}
        for path in oracle:
            assert oracle[path] == pr.changes[path]
            if pr.before.get(path) is not None:
                assert context[path] == pr.before[path]
    crlf = next(r for r in rows.values() if r["modified_files"] == ["pkg/win.py"])
    assert "\r\n" in crlf["oracle_new_content"][0]["content"]
    # A generated file changed beside a real fix is left out of the oracle and its patch, not the row.
    regenerated = next(r for r in rows.values() if "pkg/tables.py" in r["excluded_files"])
    assert len(regenerated["modified_files"]) == 1 and "pkg/tables.py" not in regenerated["oracle_patch"]


def test_test_files_are_split_out(mined):
    rows = read_dir(mined["out"] / "data")
    with_test = [r for r in rows if r["changed_test_files"]]
    assert with_test and all("tests/" in r["test_patch"] for r in with_test)
    for row in with_test:
        assert not any(f["path"].startswith("tests/") for f in row["oracle_new_content"])
    assert any(r["issue_numbers"] == [77] for r in with_test)


def test_context_mixes_unmodified_files_and_is_shuffled(mined):
    rows = read_dir(mined["out"] / "data")
    assert all(
        set(r["modified_files"]) - {f["path"] for f in r["code_context"]} <= set(r["modified_files"])
        for r in rows
    )
    assert all(len(r["code_context"]) > len([p for p in r["modified_files"]]) - 1 for r in rows)
    assert sum(r["num_context_files"] > len(r["modified_files"]) for r in rows) >= len(rows) - 1
    firsts = [r["code_context"][0]["path"] in r["modified_files"] for r in rows]
    assert not all(firsts), "modified files must not always come first"
    for row in rows:
        assert row["prompt_tokens"] <= CONFIG.context.max_prompt_tokens


def test_nothing_from_the_repository_runs_and_symlinks_are_not_followed(mined):
    assert not mined["marker"].exists()
    passwd = Path("/etc/passwd").read_text() if Path("/etc/passwd").exists() else "\0"
    for row in read_dir(mined["out"] / "data"):
        for f in row["code_context"]:
            assert f["path"] not in {"pkg/link.py", "pkg/cfg.py"}
            assert f["content"] != passwd


def test_output_loads_with_datasets_and_feeds_the_reward(mined):
    import datasets

    data = datasets.load_dataset("parquet", data_dir=str(mined["out"] / "data"), split="train")
    assert len(data) == mined["summary"].rows
    for row in data:
        oracle = {f["path"]: f["content"] for f in row["oracle_new_content"]}
        context = {f["path"]: f["content"] for f in row["code_context"]}
        scored = score_row({**row, "output": canonical_answer(context, oracle)})
        assert scored[0] == 1.0, scored


def test_parallel_run_gives_identical_rows(mined, tmp_path):
    source = LocalSource(mined["repo"], mined["root"] / "cache", repo="acme/widgets")
    mine(tmp_path / "out", source, CONFIG, workers=2, progress=False)
    assert read_dir(tmp_path / "out" / "data") == read_dir(mined["out"] / "data")


def test_compact_prompt_style_renders_the_same_rows_with_less_overhead(mined, tmp_path):
    source = LocalSource(mined["repo"], mined["root"] / "cache", repo="acme/widgets")
    config = replace(CONFIG, context=ContextConfig(prompt_style="compact"))
    mine(tmp_path / "out", source, config, workers=1, progress=False)
    full = {row["instance_id"]: row for row in read_dir(mined["out"] / "data")}
    compact = {row["instance_id"]: row for row in read_dir(tmp_path / "out" / "data")}
    assert compact.keys() == full.keys()
    for iid, row in compact.items():
        context = [(f["path"], f["content"]) for f in row["code_context"]]
        assert row["prompt"] == build_messages(row["problem_statement"], context, style="compact")
        assert row["prompt_tokens"] <= config.context.max_prompt_tokens
        # Where the same files are shown, the prompt is shorter; elsewhere the tokens the compact
        # instructions free went to other or more context files.
        if row["code_context"] == full[iid]["code_context"]:
            assert row["prompt_tokens"] < full[iid]["prompt_tokens"]
    assert sum(compact[i]["code_context"] == full[i]["code_context"] for i in compact) >= len(compact) / 2
    with pytest.raises(ValueError, match="unknown prompt style 'terse'; choose one of full, compact"):
        ContextConfig(prompt_style="terse")


def test_changed_options_are_refused_in_an_existing_output(mined):
    source = LocalSource(mined["repo"], mined["root"] / "cache", repo="acme/widgets")
    with pytest.raises(ValueError, match="different configuration"):
        mine(mined["out"], source, MineConfig(shard_size=5), workers=1, progress=False)


@pytest.mark.parametrize("stage", ["extract", "render"])
def test_kill_9_then_resume_gives_identical_rows(mined, tmp_path, stage):
    """Killed while shards are extracted (before dedup) or rendered (after it)."""
    out = tmp_path / "out"
    cmd = [
        sys.executable,
        "-m",
        "swerl",
        "data",
        "mine",
        "--local",
        str(mined["repo"]),
        "--repo-name",
        "acme/widgets",
        "--clones",
        str(tmp_path / "cache"),
        "--out",
        str(out),
        "--shard-size",
        "3",
        "--max-file-bytes",
        "100000",
        "--workers",
        "1",
        "--quiet",
    ]
    env = {**os.environ, "SWERL_DATA_PAUSE_AFTER_SHARD": "0.4"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    manifest = out / "manifest.json"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if manifest.exists():
            try:
                built = json.loads(manifest.read_text())["stages"].get(stage, {}).get("shards", {})
            except json.JSONDecodeError:
                built = {}
            if len(built) >= 2:
                break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    state = json.loads(manifest.read_text())
    assert not state["stages"].get("render", {}).get("done"), "the run finished before it was killed"
    resumed = subprocess.run([c for c in cmd], capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    rows = read_dir(out / "data")
    assert rows == read_dir(mined["out"] / "data")
    ids = [r["instance_id"] for r in rows]
    assert len(ids) == len(set(ids))
    assert all_drops(out) == all_drops(mined["out"])


def test_shards_lost_in_a_crash_are_rebuilt(mined, tmp_path):
    """A machine crash can lose files the manifest lists (shards are not fsynced one by one): the next run
    finds them by footer and row count and produces them again, with identical final rows."""

    out = tmp_path / "out"
    shutil.copytree(mined["out"], out)
    data = sorted((out / "data").glob("shard-*.parquet"))
    data[0].write_bytes(data[0].read_bytes()[:100])  # truncated
    (out / "extract" / "shard-00001.parquet").unlink()  # lost
    sorted((out / "extract").glob("drops-*.parquet"))[0].write_bytes(b"")  # emptied
    source = LocalSource(mined["repo"], mined["root"] / "cache", repo="acme/widgets")
    summary = mine(out, source, CONFIG, workers=1, progress=False)
    assert read_dir(out / "data") == read_dir(mined["out"] / "data")
    assert all_drops(out) == all_drops(mined["out"])
    assert summary.rows == mined["summary"].rows


def test_drops_files_exist_only_where_something_was_dropped(mined):
    """Like data/, which holds only shards that kept a row: a stage writes no empty drops file."""
    state = json.loads((mined["out"] / "manifest.json").read_text())
    for stage in ("collect", "extract", "dedup", "render"):
        for name, info in state["stages"][stage]["shards"].items():
            path = mined["out"] / stage / name.replace("shard-", "drops-")
            dropped = sum(info.get("drops", {}).values())
            assert path.exists() == (dropped > 0), path
            if dropped:
                assert pq.read_metadata(path).num_rows == dropped


def test_training_rows_are_zstd_and_the_bookkeeping_snappy(mined):
    """The rows users keep get the smallest files; the stages' small tables the cheapest writes."""

    def codecs(path):
        meta = pq.read_metadata(path)
        return {meta.row_group(0).column(i).compression for i in range(meta.num_columns)}

    assert all(codecs(path) == {"ZSTD"} for path in (mined["out"] / "data").glob("shard-*.parquet"))
    for stage in ("collect", "extract", "dedup", "render"):
        for path in (mined["out"] / stage).glob("*.parquet"):
            assert codecs(path) == {"SNAPPY"}, path


def test_an_output_of_another_pipeline_version_is_refused(mined, tmp_path):
    """Version 1 wrote context rows to build/; resuming one with this layout would mix the two."""
    out = tmp_path / "out"
    out.mkdir()
    state = json.loads((mined["out"] / "manifest.json").read_text())
    (out / "manifest.json").write_text(json.dumps({**state, "version": 1}))
    source = LocalSource(mined["repo"], mined["root"] / "cache", repo="acme/widgets")
    with pytest.raises(ValueError, match="another version"):
        mine(out, source, CONFIG, workers=1, progress=False)


def test_an_output_of_the_previous_layout_is_read_and_resumed(mined, tmp_path):
    """Version 3 named the extract stage `build` (manifest key and folder): `swerl data stats` reads such
    an output as it is, and a run that resumes it renames it and finds every shard finished."""
    out = tmp_path / "out"
    shutil.copytree(mined["out"], out)
    state = json.loads((out / "manifest.json").read_text())
    state["stages"]["build"] = state["stages"].pop("extract")
    (out / "manifest.json").write_text(json.dumps({**state, "version": 3}))
    (out / "extract").rename(out / "build")
    assert funnel(out) == funnel(mined["out"]) and funnel(out).drops.get("extract")
    written = {path.name: path.stat().st_mtime_ns for path in (out / "build").iterdir()}
    source = LocalSource(mined["repo"], mined["root"] / "cache", repo="acme/widgets")
    summary = mine(out, source, CONFIG, workers=1, progress=False)
    assert not (out / "build").exists()
    assert {path.name: path.stat().st_mtime_ns for path in (out / "extract").iterdir()} == written
    state = json.loads((out / "manifest.json").read_text())
    assert state["version"] == 4 and "build" not in state["stages"] and state["stages"]["extract"]["done"]
    assert read_dir(out / "data") == read_dir(mined["out"] / "data")
    assert summary.rows == mined["summary"].rows
    assert funnel(out) == funnel(mined["out"])


def test_extract_keeps_its_rows_for_the_render_only_when_asked(mined, tmp_path):
    """The local engine renders a shard where it was extracted, so extract leaves the extracted rows in
    the process; Ray does not, so they would only hold memory there."""
    from data_pipeline.run import stages

    source = LocalSource(mined["repo"], mined["root"] / "cache", repo="acme/widgets")
    git_dirs = {"acme/widgets": str(source.git_dir("acme/widgets"))}
    for keep in (False, True):
        task = stages.ExtractTask(
            candidates=mined["out"] / "collect" / "shard-00000.parquet",
            rows=tmp_path / f"keep-{keep}" / "shard-00000.parquet",
            drops=tmp_path / f"keep-{keep}" / "drops-00000.parquet",
            git_dirs=git_dirs,
            config=CONFIG,
            keep=keep,
        )
        extracted = stages.extract_shard(task)
        assert extracted.info["rows"] > 0
        assert (str(task.rows) in stages._EXTRACTED) == keep
        stages._EXTRACTED.pop(str(task.rows), None)


def test_extracted_rows_held_for_the_render_are_bounded_by_their_text(mined, tmp_path, monkeypatch):
    """Past the budget of file text, the oldest extracted shards are let go (their render extracts them
    again); the newest is always kept, however large."""
    from data_pipeline.run import stages

    source = LocalSource(mined["repo"], mined["root"] / "cache", repo="acme/widgets")
    git_dirs = {"acme/widgets": str(source.git_dir("acme/widgets"))}
    held = {}
    for budget in (1 << 30, 1):
        monkeypatch.setattr(stages, "_EXTRACTED_CHARS", budget)
        stages._EXTRACTED.clear()
        for index in range(3):
            task = stages.ExtractTask(
                candidates=mined["out"] / "collect" / f"shard-{index:05d}.parquet",
                rows=tmp_path / f"{budget}" / f"shard-{index:05d}.parquet",
                drops=tmp_path / f"{budget}" / f"drops-{index:05d}.parquet",
                git_dirs=git_dirs,
                config=CONFIG,
                keep=True,
            )
            stages.extract_shard(task)
        held[budget] = [(name.rsplit("/", 1)[1], size) for name, (size, _) in stages._EXTRACTED.items()]
    stages._EXTRACTED.clear()
    assert [name for name, _ in held[1 << 30]] == [f"shard-{i:05d}.parquet" for i in range(3)]
    assert held[1 << 30][0][1] > 0  # the first shard holds text: a budget of 1 must let it go
    assert held[1][-1][0] == "shard-00002.parquet"  # the newest stays, whatever its size
    assert sum(size for _, size in held[1][:-1]) <= 1


@pytest.mark.parametrize(
    ("head", "generated"),
    [
        (b"# Code generated by protoc-gen-go. DO NOT EDIT.\n", True),
        (b'"""Auto-generated by tablegen."""\n', True),
        (b"# autogenerated by swig\n", True),
        (b"// @generated\n", True),
        (b"# DO NOT EDIT\n", True),
        (b"# generated code lives elsewhere; this file is edited by hand\n", False),
        (b"# generated by hand\n", False),
        (b"x = 1\n" * 200 + b"# Code generated by late banner\n", False),  # past the first 1,024 bytes
    ],
)
def test_generator_banners_in_the_first_kilobyte_mark_generated_files(head, generated):
    assert looks_generated(head + b"x = 1\n") is generated


def _commit_file(repo: Path, path: str, text: str, message: str) -> str:
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(text)
    env = {**os.environ, "GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "dev@example.com"}
    env |= {"GIT_COMMITTER_NAME": "Dev", "GIT_COMMITTER_EMAIL": "dev@example.com"}
    subprocess.run(["git", "-C", str(repo), "add", path], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", message], check=True, env=env)
    return subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.mark.parametrize("ref", ["HEAD", "main"])
def test_a_new_run_mines_commits_made_since_the_cache_was_filled(tmp_path, ref, capsys):
    """The clone cache is reused across runs; a fresh run must still see what the user committed since."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    body = "def parse(x):\n    return x\n" + "".join(f"def f{i}():\n    return {i}\n" for i in range(20))
    _commit_file(repo, "pkg/mod.py", body, "Initial import")
    _commit_file(repo, "pkg/mod.py", body.replace("return x", "return x or 0"), "Parse None as zero (#1)")
    cache = tmp_path / "cache"
    config = replace(CONFIG, filters=replace(CONFIG.filters, min_problem_chars=1))
    first = mine(tmp_path / "out1", LocalSource(repo, cache, repo="acme/w", ref=ref), config, progress=False)
    assert first.rows == 1
    head = _commit_file(repo, "pkg/mod.py", body.replace("return 3", "return 33"), "Fix f3 (#2)")
    second = mine(tmp_path / "out2", LocalSource(repo, cache, repo="acme/w", ref=ref), config, progress=False)
    rows = read_dir(tmp_path / "out2" / "data")
    assert second.rows == 2
    assert {row["merge_commit"] for row in rows if row["pull_number"] == 2} == {head}

    # The first run's directory keeps what it mined, and a rerun into it says why #2 is missing.
    capsys.readouterr()
    again = mine(tmp_path / "out1", LocalSource(repo, cache, repo="acme/w", ref=ref), config, progress=False)
    assert again.rows == 1
    assert f"is now {head[:12]}: mine into a new --out" in capsys.readouterr().err
    mine(tmp_path / "out2", LocalSource(repo, cache, repo="acme/w", ref=ref), config, progress=False)
    assert "note" not in capsys.readouterr().err


@pytest.mark.parametrize("ref", ["v1.0", "HEAD~1", "main~1", "tags/v1.0"])
def test_ref_may_be_a_tag_or_a_revision_expression(tmp_path, ref):
    """`--ref` takes what git takes: a tag, or an expression such as `HEAD~1`, not only branch names."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    body = "def parse(x):\n    return x\n" + "".join(f"def f{i}():\n    return {i}\n" for i in range(20))
    _commit_file(repo, "pkg/mod.py", body, "Initial import")
    tagged = _commit_file(repo, "pkg/mod.py", body.replace("return x", "return x or 0"), "Parse None (#1)")
    subprocess.run(["git", "-C", str(repo), "tag", "v1.0"], check=True)
    _commit_file(repo, "pkg/mod.py", body.replace("return 3", "return 33"), "Fix f3 (#2)")
    config = replace(CONFIG, filters=replace(CONFIG.filters, min_problem_chars=1))
    summary = mine(tmp_path / "out", LocalSource(repo, tmp_path / "cache", repo="acme/w", ref=ref), config)
    rows = read_dir(tmp_path / "out" / "data")
    assert summary.rows == 1 and [row["merge_commit"] for row in rows] == [tagged]


def _descendants(pid: int) -> set[int]:
    """Every live process below `pid` (from /proc: parent ids)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has ended; only its parent's reaping is left


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc and PR_SET_PDEATHSIG")
def test_kill_9_leaves_no_worker_or_git_process_behind(mined, tmp_path):
    cmd = [sys.executable, "-m", "swerl", "data", "mine", "--local", str(mined["repo"]), "--repo-name"]
    cmd += ["acme/widgets", "--clones", str(tmp_path / "cache"), "--out", str(tmp_path / "out")]
    cmd += ["--shard-size", "2", "--workers", "2", "--quiet"]
    env = {**os.environ, "SWERL_DATA_PAUSE_AFTER_SHARD": "1"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    below: set[int] = set()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # until both workers run git readers of their own
        below = _descendants(proc.pid)
        gits = [p for p in below if b"git" in _cmdline(p)[:40]]
        if len(below) >= 4 and gits:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert below
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_running(p) for p in below):
        time.sleep(0.05)
    assert not [p for p in below if _running(p)]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc")
def test_ctrl_c_twice_stops_a_parallel_run_at_once_and_it_resumes(mined, tmp_path):
    """Ctrl-C reaches the whole process group: the run ends within seconds, as one line and exit status
    130, with no worker left and no worker traceback; a second Ctrl-C does not leave it stuck waiting for
    its workers; the same command then completes the run with the rows of an uninterrupted one."""
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "swerl", "data", "mine", "--local", str(mined["repo"]), "--repo-name"]
    cmd += ["acme/widgets", "--clones", str(tmp_path / "cache"), "--out", str(out)]
    cmd += ["--shard-size", "3", "--max-file-bytes", "100000", "--workers", "2", "--quiet"]
    env = {**os.environ, "SWERL_DATA_PAUSE_AFTER_SHARD": "1"}
    proc = subprocess.Popen(
        cmd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own group, as a terminal's job is; SIGINT goes to all of it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 60
    below: set[int] = set()
    while time.monotonic() < deadline and len(below) < 2:  # both workers started
        below = {p for p in _descendants(proc.pid) if b"python" in _cmdline(p)[:80]}
        time.sleep(0.05)
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGINT)
    interrupted = time.monotonic()
    time.sleep(0.2)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("the interrupted run did not end")
    assert time.monotonic() - interrupted < 10
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == ["swerl: interrupted"], err
    assert not [p for p in below if _running(p)]
    assert not json.loads((out / "manifest.json").read_text())["stages"].get("render", {}).get("done")
    resumed = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert read_dir(out / "data") == read_dir(mined["out"] / "data")


def test_a_folder_of_other_files_is_refused_and_keeping_nothing_is_said(mined, tmp_path):
    """--out must be new, empty or an earlier mining run: a training run's folder is not mixed into; a
    run that keeps no row says so, since data/ then holds no shard to load."""
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "metrics.jsonl").write_text("{}\n")
    source = LocalSource(mined["repo"], mined["root"] / "cache", repo="acme/widgets")
    with pytest.raises(UserError, match=re.escape("holds other files (metrics.jsonl) and no mining run")):
        mine(taken, source, CONFIG, workers=1, progress=False)
    assert sorted(p.name for p in taken.iterdir()) == ["metrics.jsonl"]
    cmd = [sys.executable, "-m", "swerl", "data", "mine", "--local", str(mined["repo"]), "--repo-name"]
    cmd += ["acme/widgets", "--clones", str(tmp_path / "cache"), "--out", str(tmp_path / "rs")]
    (tmp_path / "rs").mkdir()
    (tmp_path / "rs" / ".gitkeep").write_text("")  # hidden files are not someone else's outputs
    done = subprocess.run([*cmd, "--languages", "rs", "--quiet"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "rows: 0" in done.stderr and "warning: no row was kept" in done.stderr


@pytest.mark.parametrize(
    ("layout", "name"),
    [
        ("tool", "local/tool"),
        ("tool/.git", "local/tool"),
        ("tool.git", "local/tool"),
        ("acme+tool/repo", "local/acme+tool"),
    ],
)
def test_a_clone_without_a_github_origin_is_named_after_its_folder(tmp_path, layout, name):
    """Mirrors kept as `owner+name/repo` were all named `local/repo`, and their instance ids collided."""
    from data_pipeline.sources.local import guess_repo_name

    path = tmp_path / layout
    if layout.endswith("/.git"):
        subprocess.run(["git", "init", "-q", str(path.parent)], check=True)
    else:
        subprocess.run(["git", "init", "-q", "--bare", str(path)], check=True)
    assert guess_repo_name(path) == name
