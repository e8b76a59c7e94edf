"""Peak resident memory of each rank while a GRPO run sets up its policy and reference: ZeRO-3 vs ZeRO-0.

Under ZeRO-3 swerl builds both models partitioned (`swerl.learner.learner.model_construction`: transformers
creates them under `deepspeed.zero.Init`, only rank 0 reads the checkpoint, one module at a time) and
wraps the reference in its own DeepSpeed engine; under ZeRO-0 every rank holds both models whole. The
model is a ~100M-parameter Llama (random weights, saved to a temporary folder); each configuration runs
as `torchrun --nproc_per_node 2` on CPU (gloo), and each rank reports its peak RSS (`ru_maxrss`) after
`GRPOTrainer` is constructed with beta > 0 (policy, reference, optimizer, engines: the whole set-up), and
again after one update (where a plain optimizer first allocates its states), in bf16 and float32.

    python bench/zero3_memory.py [--repeats 3] [--dtypes bf16,float32]

Prints per rank and dtype the median peaks over the repeats for both stages and their ratios, and the
memory of a process that has only imported the same libraries (the floor that no sharding removes).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def build_model(out: Path) -> int:
    """A ~100M Llama (untied embeddings, 16k vocabulary) and a tokenizer, saved to `out`; returns params."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    from swerl.models.tiny import default_corpus, train_tokenizer

    tokenizer = train_tokenizer(default_corpus(200_000), vocab_size=2048)
    config = LlamaConfig(
        vocab_size=16_384,
        hidden_size=768,
        intermediate_size=2048,
        num_hidden_layers=12,
        num_attention_heads=12,
        num_key_value_heads=12,
        tie_word_embeddings=False,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id,
    )
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return sum(p.numel() for p in model.parameters())


def worker(model_dir: Path, stage: int, bf16: bool, out: Path) -> None:
    """Set up GRPO (policy, reference, learner) as `swerl train grpo` does, then run one update; rank 0
    writes each rank's peak after set-up and after the update."""
    import torch
    import torch.distributed as torch_dist

    from swerl.trainers.common import load_reference, pack_sequences
    from swerl.trainers.config import GRPOConfig
    from swerl.trainers.data import Example
    from swerl.trainers.grpo import GRPOTrainer
    from swerl.trainers.loop import load_run

    imported = peak_rss_mb()
    config = GRPOConfig(
        model_name_or_path=str(model_dir),
        output_dir=str(out.parent / "run"),
        deepspeed=str(ROOT / "configs" / "deepspeed" / f"zero{stage}.json"),
        bf16=bf16,
        beta=0.04,
        num_generations=2,
        prompts_per_step=2,
        report_to_tensorboard=False,
    )
    _, model, tokenizer = load_run(config)
    reference = load_reference(str(model_dir), config)
    trainer = GRPOTrainer(
        config, model, tokenizer, [Example(prompt_ids=[1])], None, engine=object(), reference=reference
    )
    row = {"imported_mb": imported, "setup_mb": peak_rss_mb()}
    # One update on a few tokens: where a plain optimizer first allocates its states.
    advantages = torch.tensor([1.0, -1.0])
    trainer.update(pack_sequences([[5, 6, 7]] * 2, [[8, 9, 10], [11]], 0, "cpu", advantages=advantages))
    row["step_mb"] = peak_rss_mb()
    rows: list[dict | None] = [None] * torch_dist.get_world_size()
    torch_dist.all_gather_object(rows, row)
    torch_dist.barrier()
    if torch_dist.get_rank() == 0:
        out.write_text(json.dumps(rows))


def run_once(model_dir: Path, stage: int, bf16: bool, work: Path, port: int) -> list[dict]:
    out = work / "result.json"
    out.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(port)]
    cmd += [__file__, "--worker", "--model", str(model_dir), "--stage", str(stage), "--out", str(out)]
    cmd += ["--bf16"] if bf16 else []
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-4000:])
    return json.loads(out.read_text())


def report(runs: dict[int, list[list[dict]]]) -> None:
    """Per rank: median peak of each stage after set-up and after one step, and ZeRO-3 / ZeRO-0."""
    header = ("rank", 4), ("set-up Z0", 10), ("set-up Z3", 10), ("ratio", 6), ("step Z0", 9), ("step Z3", 9)
    print(" ".join(f"{name:>{width}}" for name, width in header), f"{'ratio':>6}")
    for rank in range(2):
        cells = []
        for key, width in (("setup_mb", 10), ("step_mb", 9)):
            zero0 = statistics.median(run[rank][key] for run in runs[0])
            zero3 = statistics.median(run[rank][key] for run in runs[3])
            cells.append(f"{zero0:>{width}.0f} {zero3:>{width}.0f} {zero3 / zero0:>6.2f}")
        print(f"{rank:>4} {' '.join(cells)}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--dtypes",
        default="bf16,float32",
        help="comma-separated: bf16 (what GPU runs use) and/or float32 (the default on CPU)",
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--bf16", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--stage", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.model, args.stage, args.bf16, args.out)
        sys.stdout.flush()
        os._exit(0)  # skip gloo/shm teardown at interpreter exit (see tests/test_learner_deepspeed.py)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        params = build_model(work / "model")
        size = sum(f.stat().st_size for f in (work / "model").glob("*.safetensors")) / 2**20
        print(f"model: Llama, {params / 1e6:.1f}M parameters, checkpoint {size:.0f} MB (float32)")
        floor: list[float] = []
        for dtype in args.dtypes.split(","):
            runs: dict[int, list[list[dict]]] = {0: [], 3: []}
            for repeat in range(args.repeats):
                for stage in (0, 3):  # interleaved, so drift on a shared machine hits both alike
                    port = 29700 + 20 * repeat + 10 * (dtype == "bf16") + stage
                    runs[stage].append(run_once(work / "model", stage, dtype == "bf16", work, port))
                    floor += [r["imported_mb"] for r in runs[stage][-1]]
            print(f"\n{dtype}, 2 ranks, peak RSS in MB, median of {args.repeats} runs:")
            report(runs)
        print(f"\nfloor (libraries imported, no model): {statistics.median(floor):.0f} MB per process")


if __name__ == "__main__":
    main()
