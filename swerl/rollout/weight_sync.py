"""Moving the policy's weights into vLLM one parameter at a time, in this process or over the network.

Two things every weight sync here has in common:

- `full_parameters` walks the policy one parameter at a time. Under ZeRO-3 each rank holds a shard of
  every parameter; the parameter being sent is gathered whole only while it is being sent, so a rank
  never holds more than one whole parameter on top of its shards (gathering the whole model for a sync
  costs the full model's size on every GPU, which at 70B does not fit). The gather is collective, so
  every rank walks the same parameters in the same order, also ranks that send nothing.
- `TensorChannel` carries tensors from the trainer to the vLLM workers of a `swerl vllm-serve` server:
  NCCL between GPUs (vLLM's `StatelessProcessGroup` + `PyNcclCommunicator`, outside every torch process
  group, as TRL does), or gloo between CPU processes, which is how the path is tested without a GPU.
  The trainer is the last rank of the channel, the server's vLLM workers are ranks 0..W-1.

`WeightReceiver` is the server side: vLLM mixes it into each of its workers (`worker_extension_cls`) and
the server calls its methods through `LLM.collective_rpc`, so the receive and the `load_weights` run in
the process that holds the model shard.
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import torch
from torch import Tensor, nn

from swerl.models.loading import parse_dtype

CHANNEL_BACKENDS = ("nccl", "gloo")


def full_parameters(module: nn.Module) -> Iterator[tuple[str, Tensor]]:
    """(name, whole tensor) for each parameter of `module`, one at a time (see the module docstring).

    A parameter partitioned by ZeRO-3 (DeepSpeed marks it with `ds_id`) is gathered for its own step of
    the iteration only; the caller must be done with the tensor before asking for the next one.
    Parameters shared between modules (tied embeddings) come once, under their first name, as vLLM's
    `load_weights` expects. A LoRA policy (peft) comes as `merged_adapter_parameters` gives it.
    """
    if hasattr(module, "peft_config") and hasattr(module, "merge_adapter"):
        yield from merged_adapter_parameters(module)
        return
    for name, param in module.named_parameters():
        if hasattr(param, "ds_id"):
            import deepspeed

            with deepspeed.zero.GatheredParameters([param]):
                yield name, param.data
        else:
            yield name, param.data


def base_parameter_name(name: str) -> str:
    """A peft parameter's name in the base model: 'base_model.model.x.q_proj.base_layer.weight' ->
    'x.q_proj.weight' (and a trained copy under `modules_to_save` takes the original's name)."""
    name = name.removeprefix("base_model.model.").replace(".base_layer.", ".")
    return name.replace(".modules_to_save.default.", ".")


def merged_adapter_parameters(model: Any) -> Iterator[tuple[str, Tensor]]:
    """A LoRA policy as vLLM knows it: the base weights with the adapters merged in, under the base
    model's names, adapters and the frozen originals of `modules_to_save` left out (TRL does the same).

    Merging needs whole weights, so under ZeRO-3 the model is gathered whole for the duration: the
    exception to one-parameter-at-a-time, affordable because a LoRA run's base model is frozen and
    usually small enough to be held whole. The adapters are unmerged afterwards (also when the caller
    stops early), so training continues on the unmerged model.
    """
    partitioned = [p for p in model.parameters() if hasattr(p, "ds_id")]
    gathered: Any = contextlib.nullcontext()
    if partitioned:
        import deepspeed

        gathered = deepspeed.zero.GatheredParameters(partitioned)
    with gathered:
        model.merge_adapter()
        try:
            for name, param in model.named_parameters():
                if "lora_" in name or ".original_module." in name:
                    continue
                yield base_parameter_name(name), param.data
        finally:
            model.unmerge_adapter()


def dtype_name(dtype: torch.dtype) -> str:
    """'bfloat16' for torch.bfloat16: how a dtype travels in JSON."""
    return str(dtype).removeprefix("torch.")


class TensorChannel(Protocol):
    """A broadcast group between the trainer and the vLLM workers, outside torch's default group."""

    device: torch.device

    def broadcast(self, tensor: Tensor, src: int) -> None:
        """Send `tensor` from rank `src` to every other rank (in place on the receivers)."""
        ...

    def close(self) -> None: ...


class GlooChannel:
    """A gloo group of its own (its own TCP store, no `init_process_group`): CPU tensors, for tests and
    for a trainer without a GPU."""

    def __init__(self, host: str, port: int, rank: int, world_size: int, timeout_s: float = 300.0) -> None:
        timeout = datetime.timedelta(seconds=timeout_s)
        self._store = torch.distributed.TCPStore(host, port, world_size, rank == 0, timeout=timeout)
        prefixed = torch.distributed.PrefixStore("swerl-weights", self._store)
        self._group: Any = torch.distributed.ProcessGroupGloo(prefixed, rank, world_size, timeout)
        self.device = torch.device("cpu")

    def broadcast(self, tensor: Tensor, src: int) -> None:
        options = torch.distributed.BroadcastOptions()
        options.rootRank = src
        self._group.broadcast([tensor], options).wait()

    def close(self) -> None:
        self._group = None


class NcclChannel:
    """vLLM's NCCL communicator over a `StatelessProcessGroup`: GPU to GPU, the production path."""

    def __init__(self, host: str, port: int, rank: int, world_size: int, device: Any) -> None:
        from vllm.distributed.device_communicators.pynccl import PyNcclCommunicator
        from vllm.distributed.utils import StatelessProcessGroup

        group = StatelessProcessGroup.create(host=host, port=port, rank=rank, world_size=world_size)
        self._comm: Any = PyNcclCommunicator(group, device=device)
        self.device = torch.device(device)

    def broadcast(self, tensor: Tensor, src: int) -> None:
        self._comm.broadcast(tensor, src=src)
        self._comm.group.barrier()

    def close(self) -> None:
        self._comm = None


def open_channel(
    backend: str, host: str, port: int, rank: int, world_size: int, device: Any
) -> TensorChannel:
    """The channel of `backend` ("nccl" or "gloo"); rank 0 hosts the rendezvous at host:port."""
    if backend == "gloo":
        return GlooChannel(host, port, rank, world_size)
    if backend == "nccl":
        return NcclChannel(host, port, rank, world_size, device)
    raise ValueError(f"weight channel backend must be one of {CHANNEL_BACKENDS}, got {backend!r}")


class WeightReceiver:
    """Mixed into every vLLM worker of a `swerl vllm-serve` server (vLLM's `worker_extension_cls`).

    The names carry a `swerl_` prefix: vLLM refuses an extension whose attributes collide with its
    worker's. `self.rank`, `self.device` and `self.model_runner` are the worker's own.
    """

    swerl_channel: TensorChannel | None = None
    swerl_sender: int = -1

    def swerl_open_channel(self, backend: str, host: str, port: int, world_size: int) -> None:
        """Join the channel as rank `self.rank`; the trainer is the last rank."""
        if self.swerl_channel is not None:
            raise RuntimeError("the weight channel is already open; close it first")
        worker: Any = self
        self.swerl_channel = open_channel(backend, host, port, worker.rank, world_size, worker.device)
        self.swerl_sender = world_size - 1

    def swerl_receive(self, params: Sequence[tuple[str, str, Sequence[int]]]) -> None:
        """Receive each (name, dtype, shape) from the trainer, in order, and load it into the model."""
        if self.swerl_channel is None:
            raise RuntimeError("no weight channel: the trainer must open one first (init_communicator)")
        worker: Any = self
        model = worker.model_runner.model
        for name, dtype, shape in params:
            tensor = torch.empty(tuple(shape), dtype=parse_dtype(dtype), device=self.swerl_channel.device)
            self.swerl_channel.broadcast(tensor, self.swerl_sender)
            model.load_weights(weights=[(name, tensor)])

    def swerl_close_channel(self) -> None:
        if self.swerl_channel is not None:
            self.swerl_channel.close()
        self.swerl_channel = None
