"""Two commands into one output folder: the second stops at once, whatever stage the first is at."""

from __future__ import annotations

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
