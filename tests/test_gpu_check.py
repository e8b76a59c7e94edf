"""scripts/gpu_check.sh where there is no GPU: it parses, skips its rows with the reason, and fails a row
whose process fails (the GPU rows themselves run when a GPU machine is lent)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu_check.sh"


def run(tmp_path: Path, python: str, rows: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHON": python, "ROWS": rows, "MASTER_PORT": "29599"}
    return subprocess.run(
        ["bash", str(SCRIPT), str(tmp_path / "out")], env=env, capture_output=True, text=True, timeout=300
    )


def test_the_script_parses() -> None:
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present: the rows would run")
def test_without_a_gpu_every_row_is_skipped_with_its_reason(tmp_path: Path) -> None:
    result = run(tmp_path, sys.executable, "colocate")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = (tmp_path / "out" / "results.tsv").read_text().splitlines()
    assert rows == ["colocate\tSKIP\tno CUDA device: skipped"]
    table = result.stdout[result.stdout.index("== results") :]
    assert "colocate" in table and "SKIP" in table and "no CUDA device" in table


def test_a_row_whose_process_fails_is_a_failure(tmp_path: Path) -> None:
    result = run(tmp_path, "false", "hf")
    assert result.returncode == 1
    assert (tmp_path / "out" / "results.tsv").read_text().splitlines() == ["hf\tFAIL (exit 1)\t"]
