"""Benchmark: peak memory of the GRPO loss's log-probs and entropy over one long answer, chunked vs whole.

The trainer turns the LM head's logits `[1, T, V]` (bf16 on a GPU) into per-token log-probs (with a
gradient) and entropies (a metric). The whole-tensor way, which swerl used before, makes float32 copies
of the full `[T, V]` (log-softmax, its exp, the entropy's products): several times the logits. swerl now
computes both a chunk of positions at a time (`swerl.algorithms.token_logprobs`, `entropy_from_logits`).

Each measurement runs in a fresh process: the bf16 logits are filled chunk by chunk (so setting up leaves
no high-water mark above them), the kernel's peak-RSS counter is reset (`/proc/self/clear_refs` 5), the
loss runs, and the new peak minus the resident size before it is the loss's own memory. Two phases:
forward (log-probs with autograd + entropy) and forward + backward (which also allocates the logits'
gradient, the same bf16 size as the logits, whichever way the loss is computed: the LM head's backward
needs it). Reported as multiples of the bf16 logits' size, medians over `--repeats` alternating runs.

    PYTHONPATH=. python bench/logprob_memory.py [--tokens 4096] [--vocab 152064] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch


def _status(field: str) -> int:
    """A `/proc/self/status` field (VmRSS, VmHWM) in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def _whole_tensor(
    logits: torch.Tensor, ids: torch.Tensor, temperature: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """The previous path: float32 copies of the whole logits for log-probs and for the entropy."""
    z = logits.float() / temperature
    logp = z.gather(-1, ids.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(z, dim=-1)
    with torch.no_grad():
        all_logp = torch.log_softmax(logits.detach().float() / temperature, dim=-1)
        p = all_logp.exp()
        entropy = -torch.where(p > 0, p * all_logp, torch.zeros(())).sum(dim=-1)
    return logp, entropy


def _chunked(
    logits: torch.Tensor, ids: torch.Tensor, temperature: float
) -> tuple[torch.Tensor, torch.Tensor]:
    from swerl.algorithms import entropy_from_logits, token_logprobs

    return token_logprobs(logits, ids, temperature), entropy_from_logits(logits.detach(), temperature)


def child(path: str, tokens: int, vocab: int, backward: bool) -> dict[str, float]:
    """One measurement in this process (see the module docstring)."""
    torch.manual_seed(0)
    logits = torch.empty(1, tokens, vocab, dtype=torch.bfloat16)
    for lo in range(0, tokens, 64):
        logits[0, lo : lo + 64] = torch.randn(min(64, tokens - lo), vocab) * 3
    logits.requires_grad_(True)
    ids = torch.randint(0, vocab, (1, tokens))
    weights = torch.randn(1, tokens)
    fn = _chunked if path == "chunked" else _whole_tensor
    # Warm-up on a small tensor: imports, kernels and thread pools are not the loss's memory.
    small = torch.randn(1, 8, 64, requires_grad=True)
    (fn(small, ids[:, :8] % 64, 0.9)[0]).sum().backward()
    Path("/proc/self/clear_refs").write_text("5")
    before = _status("VmRSS")
    start = time.perf_counter()
    logp, entropy = fn(logits, ids, 0.9)
    if backward:
        (logp * weights).sum().backward()
    seconds = time.perf_counter() - start
    peak = _status("VmHWM") - before
    return {"peak_bytes": float(peak), "seconds": seconds, "entropy_mean": float(entropy.mean())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--vocab", type=int, default=152064)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", nargs=2, metavar=("PATH", "PHASE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        path, phase = args.child
        print(json.dumps(child(path, args.tokens, args.vocab, phase == "backward")))
        return

    logits_bytes = args.tokens * args.vocab * 2
    print(
        f"logits [1, {args.tokens}, {args.vocab}] bf16 = {logits_bytes / 2**30:.2f} GiB, "
        f"torch {torch.__version__}"
    )
    runs: dict[tuple[str, str], list[dict[str, float]]] = {}
    for _ in range(args.repeats):
        for phase in ("forward", "backward"):
            for path in ("whole", "chunked"):  # alternating, so the machine's load hits both alike
                shape = ["--tokens", str(args.tokens), "--vocab", str(args.vocab)]
                out = subprocess.run(
                    [sys.executable, __file__, *shape, "--child", path, phase],
                    check=True,
                    capture_output=True,
                    text=True,
                )
                runs.setdefault((path, phase), []).append(json.loads(out.stdout))
    print(
        "| phase | path | loss peak (GiB, median) | x bf16 logits (loss) | x bf16 logits (with logits) | s |"
    )
    print("|---|---|---|---|---|---|")
    for phase in ("forward", "backward"):
        for path in ("whole", "chunked"):
            rows = runs[(path, phase)]
            peak = statistics.median(r["peak_bytes"] for r in rows)
            secs = statistics.median(r["seconds"] for r in rows)
            print(
                f"| {phase} | {path} | {peak / 2**30:.2f} | {peak / logits_bytes:.2f} | "
                f"{1 + peak / logits_bytes:.2f} | {secs:.2f} |"
            )
    entropies = {round(r["entropy_mean"], 4) for rs in runs.values() for r in rs}
    print(f"entropy means (must agree): {sorted(entropies)}")


if __name__ == "__main__":
    main()
