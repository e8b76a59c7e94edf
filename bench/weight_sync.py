"""What a weight sync costs in server mode next to colocated, on CPU (the transport only, no GPU).

Colocated, vLLM loads the policy's parameters in process (`VLLMEngine.sync_weights`); in server mode rank 0
sends each one's name, dtype and shape over HTTP and the tensor over a gloo broadcast group to a
`swerl vllm-serve` process (`VLLMServerEngine.sync_weights`). Both load into the stand-in for vLLM 0.33.0
(tests/fake_vllm: `load_weights` copies into a transformers model), so what differs is the transport:
per-parameter HTTP round trips and the broadcast. Medians over repeats, both measured in the same run.

    python bench/weight_sync.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAKE_VLLM = ROOT / "tests" / "fake_vllm"


def timed(fn: object, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    sys.path.insert(0, str(FAKE_VLLM))
    from swerl.learner.dist import ensure_single_process_env
    from swerl.net import free_port

    os.environ.setdefault("MASTER_PORT", str(free_port()))
    ensure_single_process_env()  # the external launcher reads a torchrun rendezvous
    from swerl.models.loading import load_model_and_tokenizer
    from swerl.models.tiny import build_tiny_model
    from swerl.rollout.vllm_engine import VLLMEngine
    from swerl.rollout.vllm_server import VLLMServerEngine

    with tempfile.TemporaryDirectory() as tmp:
        path = build_tiny_model(
            Path(tmp) / "model", arch="qwen2", vocab_size=8192, hidden_size=512, intermediate_size=1536,
            num_layers=8, num_heads=8, max_position_embeddings=2048, seed=0,
        )  # fmt: skip
        model, _ = load_model_and_tokenizer(path)
        params = list(model.parameters())
        mb = sum(p.numel() * p.element_size() for p in params) / 2**20
        colocated = VLLMEngine(
            str(path), enable_sleep_mode=False, distributed_executor_backend="external_launcher"
        )
        local = timed(lambda: colocated.sync_weights(model), args.repeats)

        port = free_port()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(FAKE_VLLM), str(ROOT)])}
        command = [sys.executable, "-m", "swerl", "vllm-serve", "--model", str(path), "--host", "127.0.0.1"]
        server = subprocess.Popen([*command, "--port", str(port)], env=env, stdout=subprocess.DEVNULL)
        try:
            remote = VLLMServerEngine(
                f"http://127.0.0.1:{port}", group_port=free_port(), weight_backend="gloo"
            )
            pushed = timed(lambda: remote.sync_weights(model), args.repeats)
            remote.close()
        finally:
            server.terminate()
            server.wait(timeout=60)

    t_local, t_remote = statistics.median(local), statistics.median(pushed)
    size = sum(p.numel() for p in params) / 1e6
    print(f"model: {size:.1f} M parameters, {len(params)} tensors, {mb:.0f} MiB fp32")
    print("| sync | median s | MiB/s | ratio |")
    print("|---|---|---|---|")
    print(f"| colocated, in process | {t_local:.3f} | {mb / t_local:,.0f} | 1.00 |")
    ratio = t_remote / t_local
    print(f"| server, HTTP + gloo over loopback | {t_remote:.3f} | {mb / t_remote:,.0f} | {ratio:.2f} |")


if __name__ == "__main__":
    main()
