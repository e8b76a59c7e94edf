#!/usr/bin/env bash
# GPU smoke check for the training stack, for one GPU and no network (prepared; see docs/training.md).
#
# Needs: PyTorch with CUDA; swerl's other dependencies installed from wheels brought along
# (pip install --no-index --find-links WHEELS -e .); vLLM optional. Finishes in a few minutes:
#   1. rollouts with the transformers engine on the GPU (and vLLM if importable), tokens/s;
#   2. one ZeRO-3 bf16 optimizer step through the Learner (DeepSpeed, one process);
#   3. a few GRPO steps (token reward) on a small Qwen2-architecture model built from a config;
# each part prints its throughput. Output: paste it into docs/ when run.
#
#   scripts/gpu_check.sh [OUT_DIR]
set -euo pipefail

OUT="${1:-${OUT:-/tmp/swerl-gpu-check}}"
PY="${PYTHON:-python}"
mkdir -p "$OUT"
export RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT="${MASTER_PORT:-29531}"
export TORCH_EXTENSIONS_DIR="${TORCH_EXTENSIONS_DIR:-$OUT/torch_extensions}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

echo "== environment"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
"$PY" - <<'PY'
import torch, transformers
print("torch", torch.__version__, "cuda", torch.version.cuda, "device", torch.cuda.get_device_name(0))
print("bf16 supported:", torch.cuda.is_bf16_supported(), "| transformers", transformers.__version__)
try:
    import deepspeed; print("deepspeed", deepspeed.__version__)
except ImportError as err:
    print("deepspeed missing:", err)
try:
    import vllm; print("vllm", vllm.__version__)
except ImportError:
    print("vllm: not installed (skipping the vLLM rollout)")
PY

echo "== build a small Qwen2-architecture model from a config (~60 M parameters)"
"$PY" - "$OUT" <<'PY'
import sys, time
from pathlib import Path
from swerl.models.tiny import build_tiny_model
t = time.perf_counter()
path = build_tiny_model(Path(sys.argv[1]) / "model", arch="qwen2", vocab_size=8192, hidden_size=512,
                        intermediate_size=1536, num_layers=8, num_heads=8, seed=0)
print(f"built {path} in {time.perf_counter() - t:.1f} s")
PY

echo "== 1. rollouts (transformers engine on the GPU)"
"$PY" - "$OUT" <<'PY'
import sys, time, torch
from swerl.models.tiny import load_model_and_tokenizer
from swerl.rollout.base import SamplingParams
from swerl.rollout.hf import HFEngine
model, tok = load_model_and_tokenizer(sys.argv[1] + "/model", dtype="bfloat16", device="cuda")
engine = HFEngine(model, tok, batch_size=128)
prompts = [tok("def solve(data):\n    " * 8)["input_ids"][:96 + i] for i in range(16)]
params = SamplingParams(n=8, max_new_tokens=256, temperature=1.0, seed=0)
engine.generate(prompts[:2], SamplingParams(n=2, max_new_tokens=8))  # warm-up
torch.cuda.synchronize(); t = time.perf_counter()
groups = engine.generate(prompts, params)
torch.cuda.synchronize(); dt = time.perf_counter() - t
n = sum(len(c.token_ids) for g in groups for c in g)
print(f"HF engine: {len(prompts)} prompts x 8 = {n} new tokens in {dt:.2f} s -> {n / dt:,.0f} tok/s")
PY

if "$PY" -c "import vllm" 2>/dev/null; then
  echo "== 1b. rollouts (vLLM)"
  "$PY" - "$OUT" <<'PY' || echo "vLLM rollout FAILED (see above)"
import sys, time
from vllm import LLM, SamplingParams
llm = LLM(model=sys.argv[1] + "/model", dtype="bfloat16", gpu_memory_utilization=0.3, enforce_eager=True)
prompts = [{"prompt_token_ids": list(range(10, 106 + i))} for i in range(16)]
t = time.perf_counter()
out = llm.generate(prompts, SamplingParams(n=8, max_tokens=256, temperature=1.0, ignore_eos=True))
dt = time.perf_counter() - t
n = sum(len(c.token_ids) for o in out for c in o.outputs)
print(f"vLLM: {n} new tokens in {dt:.2f} s -> {n / dt:,.0f} tok/s")
PY
fi

echo "== 2. one ZeRO-3 bf16 step through the Learner"
"$PY" - "$OUT" <<'PY'
import sys, time, torch
from swerl.learner import DistInfo, Learner, LearnerConfig
from swerl.models.tiny import load_model_and_tokenizer
model, tok = load_model_and_tokenizer(sys.argv[1] + "/model")
cfg = LearnerConfig(learning_rate=1e-5, bf16=True, deepspeed="configs/deepspeed/zero3.json",
                    gradient_checkpointing=True)
t = time.perf_counter()
learner = Learner(model, cfg, total_steps=10, dist=DistInfo(device="cuda:0"))
print(f"DeepSpeed init {time.perf_counter() - t:.1f} s (first run compiles ops)")
ids = torch.randint(0, len(tok), (8, 1024), device="cuda")
for step in range(3):
    torch.cuda.synchronize(); t = time.perf_counter()
    loss = learner.forward(input_ids=ids, labels=ids).loss
    learner.backward(loss, last=True)
    stats = learner.step()
    torch.cuda.synchronize(); dt = time.perf_counter() - t
    print(f"step {step}: loss {loss.item():.3f} grad_norm {stats['grad_norm']:.3f} "
          f"{ids.numel() / dt:,.0f} tok/s, peak mem {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")
PY

echo "== 3. GRPO steps (token reward) with ZeRO-2 bf16"
"$PY" - "$OUT" <<'PY'
import sys, time
from swerl.models.tiny import load_model_and_tokenizer
from swerl.trainers.config import GRPOConfig
from swerl.trainers.data import Example
from swerl.trainers.grpo import GRPOTrainer
from swerl.trainers.rewards import token_reward
model, tok = load_model_and_tokenizer(sys.argv[1] + "/model")
ids = tok("import os\nimport sys\n\ndef main(argv):\n    " * 20)["input_ids"]
examples = [Example(prompt_ids=ids[i : i + 128]) for i in range(32)]
cfg = GRPOConfig(output_dir=sys.argv[1] + "/grpo", max_steps=5, num_generations=16, prompts_per_step=8,
                 max_completion_length=256, micro_batch_size=32, generation_batch_size=128,
                 learning_rate=1e-5, bf16=True, deepspeed="configs/deepspeed/zero2.json",
                 report_to_tensorboard=False)
trainer = GRPOTrainer(cfg, model, tok, examples, token_reward(range(len(tok) // 8)), progress=False)
for m in trainer.train():
    print(f"reward {m['reward']:.3f} step {m['step_time']:.2f} s (generate {m['time/generate']:.2f}, "
          f"train {m['time/train']:.2f}) {m['tokens_per_second']:,.0f} tok/s "
          f"logp mismatch max {m.get('sampling/sampling_logp_difference/max', float('nan')):.2e}")
PY
echo "== done: $OUT"
