"""ZeRO-3 from the first byte: on 2 CPU processes (torchrun, gloo) the policy and the reference are built
partitioned, in the run's dtype, hold the checkpoint's weights, and the reference is a DeepSpeed engine.

Marked `slow`: one `torchrun` launch of 2 ranks (~20 s once DeepSpeed's shared-memory op is compiled).
The same file is the worker: `python tests/test_learner_zero3_init.py --model DIR --out FILE`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


def shard_report(model: torch.nn.Module) -> dict[str, Any]:
    """What this rank holds of each parameter: its status, its shard's size and dtype, the full size."""
    from deepspeed.runtime.zero.partition_parameters import ZeroParamStatus

    params = list(model.parameters())
    local = torch.tensor([float(p.ds_tensor.numel()) for p in params], dtype=torch.float64)
    torch.distributed.all_reduce(local)
    return {
        "all_not_available": all(p.ds_status == ZeroParamStatus.NOT_AVAILABLE for p in params),
        "local_below_full": all(p.ds_tensor.numel() < p.ds_numel for p in params),
        "shards_cover_full": all(
            p.ds_numel <= total < p.ds_numel + 2 for p, total in zip(params, local.tolist(), strict=True)
        ),
        "dtypes": sorted({str(p.ds_tensor.dtype) for p in params}),
        "local_elements": sum(p.ds_tensor.numel() for p in params),
        "full_elements": sum(p.ds_numel for p in params),
    }


def worker(model_dir: Path, out: Path) -> None:
    """Load policy and reference as `swerl train grpo` does, report how they are held, run one update."""
    import deepspeed
    from safetensors.torch import load_file

    from swerl.learner.dist import shutdown_distributed
    from swerl.trainers.common import load_reference, pack_sequences
    from swerl.trainers.config import GRPOConfig
    from swerl.trainers.data import Example
    from swerl.trainers.grpo import GRPOTrainer
    from swerl.trainers.loop import load_run

    ds = json.loads((ROOT / "configs" / "deepspeed" / "zero3.json").read_text())
    ds["zero_optimization"]["stage3_param_persistence_threshold"] = 0  # partition even tiny tensors
    ds_path = out.parent / f"zero3_{os.environ['RANK']}.json"
    ds_path.write_text(json.dumps(ds))
    config = GRPOConfig(
        model_name_or_path=str(model_dir),
        output_dir=str(out.parent / "run"),
        deepspeed=str(ds_path),
        bf16=True,
        beta=0.1,
        num_generations=2,
        prompts_per_step=2,
        report_to_tensorboard=False,
    )
    _, model, tokenizer = load_run(config)
    report: dict[str, Any] = {"policy": shard_report(model)}  # right after construction
    saved = load_file(str(model_dir / "model.safetensors"))
    with deepspeed.zero.GatheredParameters(list(model.parameters())):
        report["weights_match_checkpoint"] = all(
            torch.equal(p.detach(), saved[name].to(p.dtype))
            for name, p in model.named_parameters()
            if name in saved
        )
    reference = load_reference(str(model_dir), config)
    trainer = GRPOTrainer(
        config, model, tokenizer, [Example(prompt_ids=[1])], None, engine=object(), reference=reference
    )
    report["reference_engine"] = type(trainer.ref_model.model).__name__
    report["reference"] = shard_report(trainer.ref_model.module)
    rank = trainer.dist.rank
    # One group per rank, of different lengths; identical weights, so the first KL must be exactly 0.
    prompts = [[5, 6, 7], [5, 6, 7]] if rank == 0 else [[9, 10], [9, 10]]
    answers = [[11, 12, 13], [14]] if rank == 0 else [[15, 16], [17, 18, 19, 20]]
    batch = pack_sequences(prompts, answers, 0, "cpu", advantages=torch.tensor([1.0, -1.0]))
    report["kl"] = trainer.update(batch)["kl"]
    shutdown_distributed()
    if rank == 0:
        out.write_text(json.dumps(report))


@pytest.mark.slow
def test_zero3_builds_policy_and_reference_partitioned(tmp_path: Path) -> None:
    from swerl.models.tiny import build_tiny_model

    model_dir = build_tiny_model(tmp_path / "model", seed=0)
    out = tmp_path / "report.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29641"]
    cmd += [__file__, "--model", str(model_dir), "--out", str(out)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(out.read_text())
    for name in ("policy", "reference"):
        held = report[name]
        assert held["all_not_available"], name  # nothing gathered: each rank holds only its shard
        assert held["local_below_full"], name
        assert held["shards_cover_full"], name  # the two shards together are the whole parameter
        assert held["dtypes"] == ["torch.bfloat16"], name  # built in the run's dtype
        assert held["local_elements"] <= held["full_elements"] // 2 + 64, name
    assert report["weights_match_checkpoint"]  # the checkpoint's values, not a random initialisation
    assert report["reference_engine"] == "DeepSpeedEngine"
    assert report["kl"] == 0.0


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    worker(args.model, args.out)
    # Skip interpreter teardown, as tests/test_learner_deepspeed.py does: gloo/shm threads can abort in a
    # C++ destructor after the results are written, which is not what this test is about.
    sys.stdout.flush()
    os._exit(0)
