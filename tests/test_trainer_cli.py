"""`swerl train grpo|sft` and `swerl plot` through their argparse entry points (tiny model, 1-2 steps)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml

from swerl.cli import plot, train
from swerl.models.tiny import build_tiny_model


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="swerl")
    groups = parser.add_subparsers(dest="group", required=True)
    train.register(groups)
    plot.register(groups)
    return parser.parse_args(argv)


def test_train_sft_then_grpo_then_plot(tmp_path: Path) -> None:
    model_dir = build_tiny_model(tmp_path / "model", seed=0)
    rows = []
    for i in range(4):
        old = f"def f{i}(x):\n    return x - {i}\n"
        rows.append(
            {
                "instance_id": f"r{i}",
                "problem_statement": f"f{i} should add {i}",
                "code_context": {"m.py": old},
                "oracle_new_content": {"m.py": old.replace(" - ", " + ")},
            }
        )
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    common = {"train_file": str(data), "eval_file": str(data), "report_to_tensorboard": False}
    sft_cfg = tmp_path / "sft.yaml"
    sft_cfg.write_text(
        yaml.safe_dump(
            {
                **common,
                "model_name_or_path": str(model_dir),
                "output_dir": str(tmp_path / "sft"),
                "max_steps": 2,
                "per_device_train_batch_size": 2,
                "max_completion_length": 8,
            }
        )
    )
    args = parse(["train", "sft", "--config", str(sft_cfg), "--quiet"])
    assert args.run(args) == 0
    assert (tmp_path / "sft" / "final" / "config.json").exists()
    # The held-out answers of the start model and of the trained one, one row per held-out row: what
    # per-row statistics (bootstrap intervals) are computed from.
    for name in ("eval_before.jsonl", "eval_after.jsonl"):
        samples = [json.loads(line) for line in (tmp_path / "sft" / name).read_text().splitlines()]
        assert [s["instance_id"] for s in samples] == ["r0", "r1", "r2", "r3"]
        assert {"reward", "error", "text"} <= set(samples[0])

    grpo_cfg = tmp_path / "grpo.yaml"
    grpo_cfg.write_text(
        yaml.safe_dump(
            {
                **common,
                "model_name_or_path": str(tmp_path / "sft" / "final"),
                "output_dir": str(tmp_path / "grpo"),
                "num_generations": 2,
                "prompts_per_step": 2,
                "max_completion_length": 8,
                "max_steps": 1,
            }
        )
    )
    args = parse(
        [
            "train",
            "grpo",
            "--config",
            str(grpo_cfg),
            "--set",
            "max_steps=2",
            "--set",
            "save_steps=1",
            "--quiet",
        ]
    )
    assert args.run(args) == 0
    rows_logged = [
        json.loads(line) for line in (tmp_path / "grpo" / "metrics.jsonl").read_text().splitlines()
    ]
    assert [r["step"] for r in rows_logged] == [1, 2]
    assert (tmp_path / "grpo" / "eval_before.jsonl").read_text() == (
        tmp_path / "sft" / "eval_after.jsonl"
    ).read_text()  # the same weights, greedy: GRPO's start is SFT's end
    assert rows_logged[0]["malformed_rate"] == 1.0  # an untrained tiny model writes no valid answer
    assert (tmp_path / "grpo" / "checkpoint-1" / "trainer_state.json").exists()
    assert yaml.safe_load((tmp_path / "grpo" / "config.yaml").read_text())["max_steps"] == 2

    args = parse(["plot", str(tmp_path / "grpo")])
    assert args.run(args) == 0
    assert (tmp_path / "grpo" / "plots" / "overview.png").exists()
    # Smoothed: the raw per-step curve stays under the moving average (two lines per panel).
    args = parse(["plot", str(tmp_path / "grpo"), "--smooth", "2", "--out", str(tmp_path / "smooth")])
    assert args.run(args) == 0
    assert (tmp_path / "smooth" / "reward.png").stat().st_size > 0
