"""The user manual as tests: every code block of README.md and docs/*.md runs as written, or says in the
docs why it cannot run here (tests/docs_blocks.py reads the blocks, tests/docs_cases.py says how each
runs).

Each page's runnable blocks run in order in one directory, as a reader runs them: once in a copy of the
repository root (links to its files, a fresh runs/) and once in an empty directory, where the docs'
repository paths (configs/, bench/, `PYTHONPATH=.`) name the repository's. `swerl` and `python` are
this checkout's, with the network's hub turned off.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from docs_blocks import ROOT, SHELL_LANGUAGES, Block, manual_blocks
from docs_cases import CASES, Case

BLOCKS = manual_blocks()
RUNNABLE = [b for b in BLOCKS if b.marker is None]
PAGES = sorted({b.path.relative_to(ROOT).as_posix() for b in RUNNABLE if b.id in CASES})
# Repository paths the docs write relative to its root, as a user elsewhere gives them.
_REPO_PATHS = re.compile(r"(?<![\w./~-])(configs|bench)/")


def test_every_block_has_a_case_or_a_marker() -> None:
    """A new block fails here until it has a case in tests/docs_cases.py or a marker in the docs; a
    case whose block is gone, or one for a marked block, fails too (the table must say what runs)."""
    ids = {b.id for b in BLOCKS}
    missing = [f"{b.id} ({b.where})" for b in RUNNABLE if b.id not in CASES]
    marked = [f"{b.id} ({b.where})" for b in BLOCKS if b.marker is not None and b.id in CASES]
    stale = sorted(set(CASES) - ids)
    assert not missing, "blocks with neither a case in tests/docs_cases.py nor a marker:\n" + "\n".join(
        missing
    )
    assert not marked, "blocks with both a marker and a case:\n" + "\n".join(marked)
    assert not stale, f"cases for blocks that no longer exist: {stale}"
    for block in BLOCKS:
        assert block.marker is None or block.reason, f"{block.where}: a marker needs its reason"
        if block.marker is None:
            assert block.language in (*SHELL_LANGUAGES, "python"), (
                f"{block.where}: a runnable block needs its language (bash or python), got "
                f"{block.language or 'none'}"
            )


def test_not_runnable_list(capsys: pytest.CaptureFixture[str]) -> None:
    """The blocks that do not run here, with the reason each gives (shown in the test summary)."""
    skipped = [b for b in BLOCKS if b.marker == "not-runnable-here"]
    with capsys.disabled():
        print(f"\n{len(skipped)} code blocks of the manual are not runnable here:")
        for block in skipped:
            print(f"  {block.where}  {block.id}: {block.reason}")
    assert all(b.reason for b in skipped)


@pytest.fixture(scope="session")
def fixtures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """What the cases' placeholders name, built once per session: a tiny model, a git project."""
    from swerl.cli.quickstart import build_repo
    from swerl.models.tiny import build_tiny_model

    base = tmp_path_factory.mktemp("docs-fixtures")
    build_tiny_model(base / "model")
    build_repo(base / "project", files=12, lines=5, commits=48, seed=0)
    return {"model": str(base / "model"), "project": str(base / "project"), "repo": str(ROOT)}


def _tools(directory: Path) -> dict[str, str]:
    """The environment a block runs in: this checkout's `swerl` and `python` first on PATH, then the
    install's environment (the docs' commands assume it is activated: `transformers serve`, ...)."""
    directory.mkdir()
    for name, command in (("swerl", f'"{sys.executable}" -m swerl'), ("python", f'"{sys.executable}"')):
        tool = directory / name
        tool.write_text(f'#!/bin/sh\nexec {command} "$@"\n', encoding="utf-8")
        tool.chmod(0o755)
    env = dict(os.environ)
    env.update(
        PATH=os.pathsep.join([str(directory), str(Path(sys.executable).parent), env.get("PATH", "")]),
        PYTHONPATH=str(ROOT),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        XDG_CACHE_HOME=str(directory.parent / "cache"),
    )
    return env


def _free_port() -> int:
    """A TCP port free now, for a block that starts a server (pages run side by side)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _repository_copy(target: Path) -> Path:
    """A repository root to run in: a link to each of its top-level entries, and no runs/ of its own."""
    target.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in ("runs", ".git") and not entry.name.startswith("."):
            (target / entry.name).symlink_to(entry)
    return target


def _script(block: Block, case: Case, values: dict[str, str], elsewhere: bool) -> str:
    """The block's text as it runs: the case's fills (each must still be in the block, so a stale case
    fails rather than silently running the docs' full-size command), repository paths made the
    repository's when run elsewhere, the case's setup first."""
    text = block.text
    for old, new in case.fill.items():
        assert old in text, f"{block.id}: the case fills {old!r}, which the block no longer has"
        text = text.replace(old, new.format(**values))
    if elsewhere:
        text = _REPO_PATHS.sub(lambda m: f"{ROOT}/{m.group(1)}/", text)
        text = text.replace("PYTHONPATH=.", f"PYTHONPATH={ROOT}")
    setup = case.setup.format(**values)
    return f"{setup}\n{text}" if setup else text


def _run(
    block: Block, case: Case, cwd: Path, env: dict[str, str], values: dict[str, str], elsewhere: bool
) -> float:
    """Run one block in `cwd`; check its exit status and outputs; return its wall time in seconds."""
    script = _script(block, case, values, elsewhere)
    if block.language == "python":
        command = [sys.executable, "-c", script]
    else:
        command = ["bash", "-e", "-o", "pipefail", "-c", script]
    start = time.monotonic()
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=case.timeout_s, check=False
    )
    said = f"{block.id} ({block.where}) in {cwd}:\n{script}\n--- stdout\n{done.stdout[-3000:]}\n--- stderr\n"
    assert done.returncode == case.status, (
        f"exit {done.returncode}, not {case.status}: {said}{done.stderr[-4000:]}"
    )
    for output in case.outputs:
        assert (cwd / output.format(**values)).exists(), f"no {output} after {said}"
    return time.monotonic() - start


@pytest.mark.slow
@pytest.mark.parametrize("where", ["root", "elsewhere"])
@pytest.mark.parametrize("page", PAGES)
def test_page_runs_as_written(
    page: str, where: str, fixtures: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The page's blocks, in order, in one directory, each exiting as its case says and writing what
    the docs say it writes."""
    env = _tools(tmp_path / "bin")
    cwd = _repository_copy(tmp_path / "root") if where == "root" else (tmp_path / "elsewhere")
    cwd.mkdir(exist_ok=True)
    values = {**fixtures, "tmp": str(tmp_path), "port": str(_free_port())}
    timings = []
    for block in RUNNABLE:
        if block.path.relative_to(ROOT).as_posix() == page:
            timings.append((block.id, _run(block, CASES[block.id], cwd, env, values, where == "elsewhere")))
    assert timings, f"{page}: no runnable block"
    with capsys.disabled():  # what each block costs, for whoever keeps the suite's time in check
        print("".join(f"\n  {seconds:6.1f} s  {block_id} ({where})" for block_id, seconds in timings))
