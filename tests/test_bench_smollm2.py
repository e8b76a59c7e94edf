"""`bench/smollm2_learning.py report`: the learning run's before/after table is computed from the held-out
answers the trainers wrote, per row, with seeded bootstrap intervals (no model needed)."""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _bench():
    spec = importlib.util.spec_from_file_location("smollm2_learning", ROOT / "bench/smollm2_learning.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write(path: Path, samples: list[tuple[float, str | None]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [{"instance_id": f"r{i}", "reward": r, "error": e, "text": ""} for i, (r, e) in enumerate(samples)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def test_report_reads_the_three_evaluations(tmp_path: Path, capsys) -> None:
    bench = _bench()
    _write(tmp_path / "sft" / "eval_before.jsonl", [(-1.0, "tag_count")] * 4)
    _write(
        tmp_path / "sft" / "eval_after.jsonl", [(0.5, None), (-1.0, "no_blocks"), (0.9, None), (0.1, None)]
    )
    _write(tmp_path / "grpo" / "eval_after.jsonl", [(0.6, None), (0.2, None), (0.9, None), (0.1, None)])
    bench.report(argparse.Namespace(run=tmp_path, images=tmp_path / "img"))

    stats = json.loads((tmp_path / "report.json").read_text())
    assert list(stats) == ["base", "after SFT", "after GRPO"]
    assert stats["base"]["malformed_rate"] == 1.0 and stats["base"]["malformed_ci"] == [1.0, 1.0]
    after = stats["after SFT"]
    assert after["malformed_rate"] == 0.25 and after["mean_reward"] == 0.125
    low, high = after["reward_ci"]
    assert -1.0 <= low < 0.125 < high <= 0.9  # an interval around the mean, within the rewards
    assert "| after GRPO | 4 | 0% (0%-0%) | +0.450" in capsys.readouterr().out
    assert (tmp_path / "img" / "smollm2-heldout.png").stat().st_size > 0
