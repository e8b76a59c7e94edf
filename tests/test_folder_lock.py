"""Two commands into one output folder: the second stops at once, whatever stage the first is at."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from swerl.errors import UserError
from swerl.paths import hold_folder

HOLDER = """
import sys, time
from pathlib import Path
from swerl.paths import hold_folder
hold_folder(Path(sys.argv[1]), "training run")
print("held", flush=True)
time.sleep(60)
"""


def test_a_folder_held_by_a_running_process_is_refused_and_free_after_it_ends(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(UserError, match=r"run is in use by another swerl training run still running"):
            hold_folder(folder, "training run")
    finally:
        holder.kill()
        holder.wait()
    hold_folder(folder, "training run")  # the lock ended with its process
    hold_folder(folder, "training run")  # and this process may claim its own folder again
    assert list(folder.iterdir()) == []  # nothing left in the folder


def test_agentless_localize_into_a_folder_another_run_holds_stops(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two `agentless localize` runs into one --out both did every instance and wrote each row twice."""
    from swerl.cli.main import main

    folder = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        dataset = tmp_path / "instances.jsonl"
        row = {"instance_id": "acme__tool-1", "repo": "acme/tool", "base_commit": "0" * 40}
        dataset.write_text(
            json.dumps({**row, "problem_statement": "Crash on empty input", "patch": ""}) + "\n"
        )
        argv = ["agentless", "localize", "--dataset", str(dataset), "--out", str(folder), "--offline"]
        assert main(argv) == 1
        assert "in use by another swerl agentless run still running" in capsys.readouterr().err
    finally:
        holder.kill()
        holder.wait()
