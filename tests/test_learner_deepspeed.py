"""DeepSpeed ZeRO-2/3 on 2 CPU processes (torchrun, gloo) give the single-process GRPO losses.

Marked `slow`: each case launches `torchrun` and initializes DeepSpeed, and a fresh machine first
JIT-compiles DeepSpeed's shared-memory op (~50-110 s, cached in TORCH_EXTENSIONS_DIR afterwards).
The same file is the worker: `python tests/test_learner_deepspeed.py --stage N --out FILE`.

The rollout batch is fixed (no sampling), so every configuration sees the same global batch: 4 groups
of 4 answers of uneven lengths, whole groups per rank, and rank 1 holding one group fewer than rank 0
(as after dropping a zero-std group), which also exercises the padding micro-batch of the short rank.
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
GROUPS, G, STEPS = 5, 4, 3
# Groups per rank with 2 processes: rank 0 gets 3, rank 1 gets 2.
SPLIT = {1: [list(range(GROUPS))], 2: [[0, 1, 2], [3, 4]]}


def fixed_batch(groups: list[int]) -> tuple[list[list[int]], list[list[int]], torch.Tensor]:
    """Prompts, completions and advantages of the given groups, the same on every rank and run."""
    gen = torch.Generator().manual_seed(7)
    prompts, completions, advantages = [], [], []
    all_groups = []
    for _ in range(GROUPS):
        prompt = torch.randint(
            1, 97, (int(torch.randint(3, 9, (1,), generator=gen)),), generator=gen
        ).tolist()
        answers = [
            torch.randint(1, 97, (int(torch.randint(1, 7, (1,), generator=gen)),), generator=gen).tolist()
            for _ in range(G)
        ]
        adv = torch.randn(G, generator=gen)
        all_groups.append((prompt, answers, adv))
    for g in groups:
        prompt, answers, adv = all_groups[g]
        prompts += [prompt] * G
        completions += answers
        advantages.append(adv)
    return prompts, completions, torch.cat(advantages)


def partitioning_config(stage: int, tmp: Path) -> Path:
    """The shipped config, but partitioning every parameter: by default ZeRO-3 keeps small ones whole,
    which for this tiny model would be all of them and leave the gather-in-forward path untested."""
    ds = json.loads((ROOT / "configs" / "deepspeed" / f"zero{stage}.json").read_text())
    if stage == 3:
        ds["zero_optimization"]["stage3_param_persistence_threshold"] = 0
    path = tmp / f"zero{stage}_{os.environ.get('RANK', '0')}.json"
    path.write_text(json.dumps(ds))
    return path


def worker(stage: int, out: Path) -> None:
    """STEPS GRPO updates (mu = 2, KL to a reference) on the fixed batch; rank 0 writes what it saw."""
    from tiny import tiny_llama_config
    from transformers import LlamaForCausalLM

    from swerl.trainers.common import pack_sequences
    from swerl.trainers.config import GRPOConfig
    from swerl.trainers.data import Example
    from swerl.trainers.grpo import GRPOTrainer

    torch.manual_seed(0)
    model = LlamaForCausalLM(tiny_llama_config(pad_token_id=0))
    config = GRPOConfig(
        output_dir=str(out.parent / "run"),
        num_generations=G,
        prompts_per_step=2,
        micro_batch_size=3,
        learning_rate=1e-2,
        beta=0.5,
        num_iterations=2,
        max_grad_norm=1.0,
        bf16=False,
        report_to_tensorboard=False,
        deepspeed=None if stage < 0 else str(partitioning_config(stage, out.parent)),
    )
    trainer = GRPOTrainer(config, model, None, [Example(prompt_ids=[1])], reward_fn=None, engine=object())
    world, rank = trainer.dist.world_size, trainer.dist.rank
    if stage == 3 and world > 1:  # parameters really are sharded, so forward must gather them
        assert all(p.ds_tensor.numel() < p.ds_numel for p in trainer.learner.module.parameters())
    prompts, completions, adv = fixed_batch(SPLIT[world][rank])
    losses, norms, kls = [], [], []
    for _ in range(STEPS):
        batch = pack_sequences(prompts, completions, 0, "cpu", advantages=adv)
        stats = trainer.update(batch)
        losses.append(stats["loss"])
        norms.append(stats["grad_norm"])
        kls.append(stats["kl"])
    with trainer.learner.full_parameters() as module:
        checksum = float(sum(p.detach().double().abs().sum() for p in module.parameters()))
    from swerl.learner.dist import shutdown_distributed

    shutdown_distributed()
    if rank == 0:
        out.write_text(json.dumps({"loss": losses, "grad_norm": norms, "kl": kls, "checksum": checksum}))


def run_case(tmp_path: Path, stage: int, nproc: int) -> dict[str, Any]:
    out = tmp_path / f"stage{stage}_n{nproc}.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, __file__, "--stage", str(stage), "--out", str(out)]
    if nproc > 1:
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            str(nproc),
            "--master_port",
            str(29600 + stage + 10 * nproc),
            *cmd[1:],
        ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(out.read_text())


@pytest.mark.slow
@pytest.mark.parametrize("stage", [2, 3])
def test_zero_two_processes_match_one_process(tmp_path: Path, stage: int) -> None:
    reference = run_case(tmp_path, -1, 1)  # plain torch, one process, the whole batch
    sharded = run_case(tmp_path, stage, 2)
    assert sharded["loss"] == pytest.approx(reference["loss"], rel=1e-4, abs=1e-6)
    assert sharded["grad_norm"] == pytest.approx(reference["grad_norm"], rel=1e-4)
    assert sharded["kl"] == pytest.approx(reference["kl"], rel=1e-3, abs=1e-7)
    assert sharded["checksum"] == pytest.approx(reference["checksum"], rel=1e-5)
    assert len(set(reference["loss"])) == STEPS  # the weights moved between steps


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--stage", type=int, required=True, help="ZeRO stage, or -1 for plain torch")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    worker(args.stage, args.out)
    # Skip interpreter teardown: once under CI load a rank aborted in a C++ destructor ("terminate called
    # without an active exception") after its results were complete. That teardown race is not what this
    # test measures; it is noted in docs/training.md.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
