"""`swerl vllm-serve`: vLLM on GPUs of its own, for trainers with `rollout_engine: vllm_server`."""

from __future__ import annotations

import argparse

from swerl.cli.args import model_name, nonnegative_int, positive_int, unit_interval
from swerl.errors import UserError


def register(groups: argparse._SubParsersAction) -> None:
    parser = groups.add_parser(
        "vllm-serve",
        help="serve vLLM for a trainer that pushes its weights after every step",
        description="Load MODEL into vLLM (optional extra: pip install 'swerl[vllm]') and answer a trainer "
        "with rollout_engine vllm_server: generation over HTTP, new weights over NCCL (gloo without a GPU). "
        "Start it on GPUs the trainer does not use, e.g. CUDA_VISIBLE_DEVICES=7 swerl vllm-serve --model M, "
        "then train on the others. Stop it with Ctrl-C.",
        epilog="example: CUDA_VISIBLE_DEVICES=7 swerl vllm-serve --model Qwen/Qwen2.5-Coder-7B-Instruct "
        "--port 8000",
    )
    parser.add_argument("--model", required=True, type=model_name, help="HF model id or directory")
    parser.add_argument("--host", default="0.0.0.0", help="address to listen on")
    parser.add_argument("--port", type=positive_int, default=8000, help="HTTP port")
    parser.add_argument("--tensor-parallel-size", type=positive_int, default=1, help="GPUs per model copy")
    parser.add_argument(
        "--gpu-memory-utilization", type=unit_interval, default=0.9, help="share of each GPU vLLM may take"
    )
    parser.add_argument(
        "--dtype",
        default="bfloat16",
        choices=("auto", "bfloat16", "float16", "float32"),
        help="weights and activations of the served copy (default bfloat16; the trainer's weights are cast)",
    )
    parser.add_argument(
        "--max-model-len", type=positive_int, default=None, help="context length (default: model's)"
    )
    parser.add_argument("--seed", type=nonnegative_int, default=0, help="sampling seed of the engine")
    parser.add_argument("--enforce-eager", action="store_true", help="no CUDA graphs (faster start)")
    parser.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    from swerl.rollout.vllm_engine import vllm_missing
    from swerl.rollout.vllm_server import serve

    problem = vllm_missing("swerl vllm-serve", "Without GPUs train with rollout_engine: hf instead.")
    if problem:
        raise UserError(problem)

    def ready(server: object) -> None:
        print(f"vLLM server ready on {args.host}:{getattr(server, 'port', args.port)}", flush=True)

    serve(
        args.model,
        host=args.host,
        port=args.port,
        ready=ready,
        tensor_parallel_size=args.tensor_parallel_size,
        gpu_memory_utilization=args.gpu_memory_utilization,
        dtype=args.dtype,
        max_model_len=args.max_model_len,
        seed=args.seed,
        enforce_eager=args.enforce_eager,
    )
    return 0
