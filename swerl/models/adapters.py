"""LoRA adapter folders (what `peft`'s `save_pretrained` writes) as models to evaluate and serve.

A LoRA run's checkpoints and final/ hold `adapter_config.json` and `adapter_model.safetensors` (a few MB)
plus the tokenizer, not a whole model. Evaluating or serving them needs the base model with the adapters
applied: `load_merged` folds them into the base weights (W + B A * alpha / r), after which the model is
a plain transformers model, as fast as the base and accepted by every engine; `merge_to_folder` writes
that model out for engines that load from disk (vLLM).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from swerl.errors import UserError

ADAPTER_CONFIG = "adapter_config.json"


def require_peft() -> Any:
    """The `peft` module, or a UserError that says how to install it."""
    try:
        import peft
    except ImportError:
        raise UserError("LoRA needs the peft package: pip install 'swerl[lora]'") from None
    return peft


def is_adapter_dir(name_or_path: str | Path) -> bool:
    """Whether `name_or_path` is a local folder of LoRA adapters rather than of a whole model."""
    return (Path(name_or_path) / ADAPTER_CONFIG).is_file()


def base_model_of(adapter_dir: str | Path) -> str:
    """The model the adapters were trained on, as recorded in their config."""
    path = Path(adapter_dir) / ADAPTER_CONFIG
    base = json.loads(path.read_text(encoding="utf-8")).get("base_model_name_or_path")
    if not base:
        raise UserError(f"{path} names no base_model_name_or_path: the adapters cannot be applied")
    return str(base)


def load_merged(adapter_dir: str | Path, base: Any) -> Any:
    """`base` (the model named by `base_model_of`) with the adapters of `adapter_dir` merged into it."""
    peft = require_peft()
    return peft.PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()
