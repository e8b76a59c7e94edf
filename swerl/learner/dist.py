"""Process-group helpers that degrade to no-ops in a single process.

Trainers call the same reductions whether they run alone (tests, quickstart) or under `torchrun` /
`deepspeed` (real runs), so the loop has no `if distributed:` branches.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as torch_dist


@dataclass(frozen=True)
class DistInfo:
    """Where this process sits: global rank, number of processes, rank on this node, and its device."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: str = "cpu"

    @property
    def is_main(self) -> bool:
        """Rank 0 writes logs, plots and the HF copy of the model; the others stay quiet."""
        return self.rank == 0


def _env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def init_distributed(device: str | None = None) -> DistInfo:
    """Join the process group a launcher described in the environment (RANK, WORLD_SIZE, ...), if any.

    Without a launcher this is a single process and no group is created unless DeepSpeed asks for one
    later (it needs MASTER_ADDR/MASTER_PORT; `Learner` sets loopback defaults). The backend follows the
    device: NCCL on GPUs, gloo on CPU.
    """
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    rank, world = _env_int("RANK", 0), _env_int("WORLD_SIZE", 1)
    local_rank = _env_int("LOCAL_RANK", 0)
    if device == "cuda":
        torch.cuda.set_device(local_rank)
        device = f"cuda:{local_rank}"
    if world > 1 and not torch_dist.is_initialized():
        torch_dist.init_process_group(backend="nccl" if device.startswith("cuda") else "gloo")
    return DistInfo(rank=rank, world_size=world, local_rank=local_rank, device=device)


def ensure_single_process_env() -> None:
    """Give DeepSpeed the rendezvous variables it insists on, for a run started without a launcher.

    Without them DeepSpeed falls back to MPI discovery and fails on a missing mpi4py.
    """
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))


def is_distributed() -> bool:
    return torch_dist.is_available() and torch_dist.is_initialized() and torch_dist.get_world_size() > 1


def all_reduce(tensor: torch.Tensor, op: str = "sum") -> torch.Tensor:
    """In-place all-reduce ('sum' or 'max') across ranks; returns the tensor. A no-op alone."""
    if is_distributed():
        reduce_op = {"sum": torch_dist.ReduceOp.SUM, "max": torch_dist.ReduceOp.MAX}[op]
        torch_dist.all_reduce(tensor, op=reduce_op)
    return tensor


def all_gather_floats(values: list[float]) -> list[float]:
    """Concatenate float lists from every rank in rank order, so metrics describe the global batch.

    Lengths may differ between ranks (groups can be dropped), hence objects rather than a tensor; the
    lists are per-answer scalars, small next to anything else a step moves.
    """
    if not is_distributed():
        return list(values)
    gathered: list[list[float] | None] = [None] * torch_dist.get_world_size()
    torch_dist.all_gather_object(gathered, list(values))
    return [float(v) for part in gathered for v in (part or [])]


def barrier() -> None:
    if is_distributed():
        torch_dist.barrier()


def shutdown_distributed() -> None:
    """Leave the process group before exit: tearing down gloo/shm threads at interpreter exit can abort."""
    if torch_dist.is_available() and torch_dist.is_initialized():
        torch_dist.barrier()
        torch_dist.destroy_process_group()
