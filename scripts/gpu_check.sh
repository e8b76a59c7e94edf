#!/usr/bin/env bash
# GPU check of the training stack: one GPU, no network, about 10 minutes; prints a table at the end.
#
# Needs PyTorch with CUDA and swerl's dependencies; vLLM (pip install 'swerl[vllm]') and peft are optional:
# without them their rows say SKIP and why, they do not fail. Each row runs in its own Python process
# (a failure or a hang costs one row: ROW_TIMEOUT seconds, default 300) and logs to OUT_DIR/<row>.log.
#
#   scripts/gpu_check.sh [OUT_DIR]          # ROWS="hf zero3" runs only those rows
#
# Rows: hf          transformers engine rollouts on the GPU (tokens/s)
#       zero3       one ZeRO-3 bf16 optimizer step through the Learner (peak memory)
#       colocate    vLLM colocated: sleep frees memory, one-parameter-at-a-time sync, wake, greedy log-probs
#                   equal the policy's (bf16 tolerance)
#       grpo        GRPO, ZeRO-3 bf16 + colocated vLLM, 3 steps with a checkpoint, then --resume to step 5
#       server      swerl vllm-serve on this GPU, a trainer on the CPU pushing weights over gloo
#       lora        GRPO with LoRA adapters through peft and colocated vLLM (merged weights pushed)
set -uo pipefail
cd "$(dirname "$0")/.."

OUT="${1:-${OUT:-/tmp/swerl-gpu-check}}"
PY="${PYTHON:-python}"
ROWS="${ROWS:-hf zero3 colocate grpo server lora}"
mkdir -p "$OUT"
: > "$OUT/results.tsv"
export OUT RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT="${MASTER_PORT:-29531}"
export TORCH_EXTENSIONS_DIR="${TORCH_EXTENSIONS_DIR:-$OUT/torch_extensions}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

# row NAME < python-script: PASS on exit 0, SKIP on exit 3, else FAIL; the last "RESULT ..." line it
# prints is the table's detail column.
row() {
  local name=$1 log="$OUT/$1.log" status rc
  if [[ " $ROWS " != *" $name "* ]]; then cat > /dev/null; return; fi
  echo "== $name"
  timeout "${ROW_TIMEOUT:-300}" "$PY" - "$OUT" > "$log" 2>&1
  rc=$?
  case $rc in 0) status=PASS ;; 3) status=SKIP ;; 124) status="FAIL (timeout)" ;; *) status="FAIL (exit $rc)" ;; esac
  grep -v '^RESULT ' "$log" | tail -n 5
  printf '%s\t%s\t%s\n' "$name" "$status" "$(grep '^RESULT ' "$log" | tail -n 1 | cut -c8-)" >> "$OUT/results.tsv"
}

# Every row starts with this: no CUDA or a missing optional package is a SKIP with its reason.
cat > "$OUT/gpu_check_common.py" <<'PY'
import importlib.util, sys, time
import torch

def require(*modules):
    if not torch.cuda.is_available():
        print("RESULT no CUDA device: skipped"); sys.exit(3)
    for name in modules:
        if importlib.util.find_spec(name) is None:
            print(f"RESULT {name} not installed: skipped"); sys.exit(3)

def model_dir():
    from pathlib import Path
    from swerl.models.tiny import build_tiny_model
    path = Path(sys.argv[1]) / "model"
    if not (path / "config.json").exists():  # ~60 M parameters, Qwen2 architecture, built here (no hub)
        build_tiny_model(path, arch="qwen2", vocab_size=8192, hidden_size=512, intermediate_size=1536,
                         num_layers=8, num_heads=8, max_position_embeddings=2048, seed=0)
    return str(path)

def prompts(n, length=96):
    return [[(17 * i + 31 * j) % 8000 + 100 for j in range(length + i)] for i in range(n)]

def pushed_weights_check(engine, model, tok):
    """Perturb `model` (a policy that is not the folder's), sync it into `engine` and compare greedy answers:
    (sync seconds, answers equal of 4, largest |log-prob difference|)."""
    from swerl.rollout import HFEngine, SamplingParams
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    t = time.perf_counter()
    engine.sync_weights(model)
    sync_s = time.perf_counter() - t
    greedy = SamplingParams(n=1, temperature=0, max_new_tokens=16)
    theirs = engine.generate(prompts(4), greedy)
    ours = HFEngine(model, tok).generate([c[0].prompt_ids for c in theirs], greedy)
    diffs = [abs(a - b) for t, o in zip(theirs, ours) for a, b in zip(t[0].logprobs, o[0].logprobs)]
    same = sum(t[0].token_ids == o[0].token_ids for t, o in zip(theirs, ours))
    return sync_s, same, max(diffs)

def zero3_config():
    import json
    from pathlib import Path
    ds = json.loads(Path("configs/deepspeed/zero3.json").read_text())
    ds["zero_optimization"]["stage3_param_persistence_threshold"] = 0  # partition every parameter
    path = Path(sys.argv[1]) / "zero3_all.json"
    path.write_text(json.dumps(ds))
    return str(path)
PY
export PYTHONPATH="$OUT:$PWD${PYTHONPATH:+:$PYTHONPATH}"

echo "== environment"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "nvidia-smi: none"
"$PY" - <<'PY'
import importlib.util, torch, transformers
cuda = torch.cuda.is_available()
print("torch", torch.__version__, "cuda", torch.version.cuda, "device", torch.cuda.get_device_name(0) if cuda else "none")
print("transformers", transformers.__version__)
for name in ("deepspeed", "vllm", "peft"):
    found = importlib.util.find_spec(name) is not None
    print(name, __import__(name).__version__ if found else "not installed (its rows are skipped)")
PY

row hf <<'PY'
from gpu_check_common import *
require()
from swerl.models.tiny import load_model_and_tokenizer
from swerl.rollout import HFEngine, SamplingParams
model, tok = load_model_and_tokenizer(model_dir(), dtype="bfloat16", device="cuda")
engine = HFEngine(model, tok, batch_size=128)
engine.generate(prompts(2), SamplingParams(n=2, max_new_tokens=8))  # warm-up
torch.cuda.synchronize(); t = time.perf_counter()
groups = engine.generate(prompts(16), SamplingParams(n=8, max_new_tokens=256, seed=0))
torch.cuda.synchronize(); dt = time.perf_counter() - t
n = sum(len(c.token_ids) for g in groups for c in g)
print(f"RESULT {n} tokens in {dt:.1f} s: {n / dt:,.0f} tok/s")
PY

row zero3 <<'PY'
from gpu_check_common import *
require("deepspeed")
from swerl.learner import DistInfo, Learner, LearnerConfig
from swerl.models.tiny import load_model_and_tokenizer
model, tok = load_model_and_tokenizer(model_dir())
cfg = LearnerConfig(learning_rate=1e-5, bf16=True, deepspeed=zero3_config(), gradient_checkpointing=True)
learner = Learner(model, cfg, total_steps=10, dist=DistInfo(device="cuda:0"))
ids = torch.randint(0, len(tok), (8, 1024), device="cuda")
for step in range(3):
    torch.cuda.synchronize(); t = time.perf_counter()
    loss = learner.forward(input_ids=ids, labels=ids).loss
    learner.backward(loss, last=True)
    stats = learner.step()
    torch.cuda.synchronize(); dt = time.perf_counter() - t
    print(f"step {step}: loss {loss.item():.3f} grad_norm {stats['grad_norm']:.3f} {ids.numel() / dt:,.0f} tok/s")
assert torch.isfinite(loss)
print(f"RESULT loss {loss.item():.3f}, {ids.numel() / dt:,.0f} tok/s, peak {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")
PY

row colocate <<'PY'
from gpu_check_common import *
require("vllm")
from swerl.models.tiny import load_model_and_tokenizer
from swerl.rollout import SamplingParams
from swerl.rollout.vllm_engine import colocated_engine
path = model_dir()
engine = colocated_engine(path, rank=0, world_size=1, base_seed=0, gpu_memory_utilization=0.3,
                          max_model_len=1024, enforce_eager=True)
t = time.perf_counter()
groups = engine.generate(prompts(16), SamplingParams(n=8, max_new_tokens=256))
dt = time.perf_counter() - t
n = sum(len(c.token_ids) for g in groups for c in g)
free_awake = torch.cuda.mem_get_info()[0]
engine.sleep()
freed = (torch.cuda.mem_get_info()[0] - free_awake) / 2**30
model, tok = load_model_and_tokenizer(path, device="cuda")
sync_s, same, diff = pushed_weights_check(engine, model, tok)  # vLLM must sample from the synced policy
print(f"sleep freed {freed:.2f} GiB; sync {sync_s:.2f} s; greedy answers equal {same}/4; max |dlogp| {diff:.3g}")
assert freed > 0.1 and diff < 0.1, "sleep freed nothing, or vLLM does not sample from the synced weights"
print(f"RESULT {n / dt:,.0f} tok/s; sleep freed {freed:.2f} GiB; sync {sync_s:.2f} s; max |dlogp| {diff:.2g}")
PY

row grpo <<'PY'
from gpu_check_common import *
require("deepspeed", "vllm")
import dataclasses
from swerl.trainers.config import GRPOConfig
from swerl.trainers.data import Example
from swerl.trainers.grpo import GRPOTrainer
from swerl.trainers.loop import load_run
from swerl.trainers.rewards import token_reward
path = model_dir()
examples = [Example(prompt_ids=p[:128]) for p in prompts(32, 128)]
cfg = GRPOConfig(model_name_or_path=path, output_dir=sys.argv[1] + "/grpo", max_steps=3, save_steps=3,
                 num_generations=16, prompts_per_step=8, max_completion_length=256, micro_batch_size=32,
                 learning_rate=1e-5, bf16=True, deepspeed=zero3_config(), report_to_tensorboard=False,
                 rollout_engine="vllm",
                 rollout_kwargs={"gpu_memory_utilization": 0.3, "max_model_len": 1024, "enforce_eager": True})
rows = []
for run in (cfg, dataclasses.replace(cfg, max_steps=5, resume_from_checkpoint="latest")):
    ckpt, model, tok = load_run(run)  # on resume: the checkpoint's model (and vLLM starts from it too)
    trainer = GRPOTrainer(run, model, tok, examples, token_reward(range(1024)), progress=False)
    for m in trainer.train():
        rows.append(m)
        print(f"reward {m['reward']:.3f} step {m['step_time']:.2f} s (generate {m['time/generate']:.2f}, "
              f"train {m['time/train']:.2f}) is_weight {m.get('sampling/is_weight/mean', float('nan')):.4f} "
              f"peak {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")
    trainer.engine.close()
assert len(rows) == 5 and all(torch.isfinite(torch.tensor(m["loss"])) for m in rows)
print(f"RESULT 3 steps + resume to 5; reward {rows[0]['reward']:.3f} -> {rows[-1]['reward']:.3f}; "
      f"{rows[-1]['tokens_per_second']:,.0f} tok/s")
PY

row server <<'PY'
from gpu_check_common import *
require("vllm")
import socket, subprocess
from swerl.models.tiny import load_model_and_tokenizer
from swerl.rollout.vllm_server import VLLMServerEngine
path = model_dir()
with socket.socket() as s:
    s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
log = open(sys.argv[1] + "/server_process.log", "w")
server = subprocess.Popen([sys.executable, "-m", "swerl", "vllm-serve", "--model", path, "--host", "127.0.0.1",
                           "--port", str(port), "--gpu-memory-utilization", "0.3", "--max-model-len", "1024",
                           "--enforce-eager"], stdout=log, stderr=subprocess.STDOUT)
try:
    # One GPU: the trainer side stays on the CPU and sends over gloo (NCCL needs a second device).
    engine = VLLMServerEngine(f"http://127.0.0.1:{port}", device="cpu", weight_backend="gloo", connect_timeout=240)
    model, tok = load_model_and_tokenizer(path)
    sync_s, _, diff = pushed_weights_check(engine, model, tok)
    engine.close()
    assert diff < 0.1, "the server does not sample from the pushed weights"
    print(f"RESULT sync over gloo {sync_s:.2f} s; max |dlogp| {diff:.2g}")
finally:
    server.terminate(); server.wait(timeout=60)
PY

row lora <<'PY'
from gpu_check_common import *
require("vllm", "peft")
from swerl.trainers.config import GRPOConfig
from swerl.trainers.data import Example
from swerl.trainers.grpo import GRPOTrainer
from swerl.trainers.loop import load_run
from swerl.trainers.rewards import token_reward
lora = {"use_peft": True, "lora_r": 16, "lora_alpha": 32, "lora_target_modules": ["q_proj", "v_proj"]}
path = model_dir()
cfg = GRPOConfig(model_name_or_path=path, output_dir=sys.argv[1] + "/lora", max_steps=3, num_generations=8,
                 prompts_per_step=4, max_completion_length=128, micro_batch_size=32, learning_rate=1e-4,
                 bf16=True, beta=0.05, report_to_tensorboard=False, rollout_engine="vllm",
                 rollout_kwargs={"gpu_memory_utilization": 0.3, "max_model_len": 1024, "enforce_eager": True},
                 **lora)
_, model, tok = load_run(cfg)  # the start model with fresh adapters, as `swerl train grpo` builds it
examples = [Example(prompt_ids=p[:96]) for p in prompts(16)]
trainer = GRPOTrainer(cfg, model, tok, examples, token_reward(range(1024)), progress=False)
rows = trainer.train()
assert rows[0]["kl"] == 0.0, rows[0]["kl"]  # adapters start at B = 0: the policy is the reference
print(f"RESULT 3 LoRA steps; reward {rows[0]['reward']:.3f} -> {rows[-1]['reward']:.3f}; "
      f"is_weight {rows[-1].get('sampling/is_weight/mean', float('nan')):.4f}")
PY

echo
echo "== results ($OUT/results.tsv; logs in $OUT/<row>.log)"
{ printf 'check\tstatus\tdetail\n'; cat "$OUT/results.tsv"; } | { column -t -s $'\t' 2>/dev/null || cat; }
! grep -q $'\tFAIL' "$OUT/results.tsv"
