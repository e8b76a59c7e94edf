"""Loading any causal LM and its tokenizer, a hub id or a local folder, tiny or real, plain or LoRA
adapters: one code path for training, sampling and evaluation, so what a run trains is what it serves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from swerl.errors import UserError
from swerl.models.adapters import base_model_of, is_adapter_dir, load_merged


def parse_dtype(name: str) -> torch.dtype:
    """The torch dtype named `name` ('bfloat16' or 'torch.bfloat16'); anything else is refused."""
    dtype = getattr(torch, name.removeprefix("torch."), None)
    if not isinstance(dtype, torch.dtype):
        raise UserError(f"unknown dtype {name!r} (e.g. float32, bfloat16, float16 or auto)")
    return dtype


def _resolve_dtype(dtype: str | torch.dtype | None) -> torch.dtype | str | None:
    if dtype is None or isinstance(dtype, torch.dtype) or dtype == "auto":
        return dtype
    return parse_dtype(dtype)


def load_tokenizer(name_or_path: str | Path, trust_remote_code: bool = False) -> Any:
    """The tokenizer `load_model_and_tokenizer` gives for `name_or_path`, alone: a trainer checks its
    rows' lengths with it before the weights load (minutes for a large model, wasted on a bad input)."""
    adapters = is_adapter_dir(name_or_path)
    # A LoRA run saves its tokenizer beside the adapters; adapters from elsewhere may come without one.
    has_tokenizer = not adapters or (Path(name_or_path) / "tokenizer_config.json").is_file()
    tokenizer = AutoTokenizer.from_pretrained(
        str(name_or_path) if has_tokenizer else base_model_of(name_or_path),
        trust_remote_code=trust_remote_code,
    )
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_model_and_tokenizer(
    name_or_path: str | Path,
    dtype: str | torch.dtype | None = None,
    device: str | torch.device | None = "cpu",
    trust_remote_code: bool = False,
    **model_kwargs: Any,
) -> tuple[Any, Any]:
    """Load a causal LM and its tokenizer from a hub id or a local folder (tiny or real), one code path.

    `dtype` is a torch dtype, its name ("bfloat16"), "auto" (the checkpoint's) or None (float32, the
    transformers default). A tokenizer without a pad token gets EOS as pad, so batched generation and
    padding in the trainer work for base models too. `trust_remote_code` goes to both loaders; other
    keyword arguments go to the model's `from_pretrained` (e.g. `attn_implementation`). A folder of LoRA
    adapters (a LoRA run's checkpoint or final/) loads as its base model with the adapters merged in
    (`swerl.models.adapters`), so it evaluates and generates like any model. `device` None
    leaves the model where loading put it (a ZeRO-3 model built partitioned must not be moved whole).
    """
    adapters = is_adapter_dir(name_or_path)
    weights = base_model_of(name_or_path) if adapters else str(name_or_path)
    tokenizer = load_tokenizer(name_or_path, trust_remote_code)
    kwargs = dict(model_kwargs, trust_remote_code=trust_remote_code)
    resolved = _resolve_dtype(dtype)
    if resolved is not None:
        kwargs["dtype"] = resolved
    model = AutoModelForCausalLM.from_pretrained(weights, **kwargs)
    if adapters:
        model = load_merged(name_or_path, model)
    if device is not None:
        model.to(device)
    return model, tokenizer


def merge_to_folder(adapter_dir: str | Path, out_dir: str | Path) -> Path:
    """Write base + merged adapters (and the tokenizer) to `out_dir` as a plain HF model folder."""
    model, tokenizer = load_model_and_tokenizer(adapter_dir, dtype="auto")
    out = Path(out_dir)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return out
