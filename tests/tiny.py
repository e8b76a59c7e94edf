"""The tiny Llama config the learner tests share (0.1 M parameters: seconds on CPU, even under DeepSpeed).

A plain module rather than a fixture: `test_learner_deepspeed.py` is also its own torchrun worker
script, outside pytest, and both ways find it next to the tests on `sys.path`.
"""

from __future__ import annotations

from typing import Any

from transformers import LlamaConfig


def tiny_llama_config(**overrides: Any) -> LlamaConfig:
    """One shape for every learner test, so their losses and checksums stay comparable; `overrides`
    for what a test needs on top (the DeepSpeed worker's pad id)."""
    values: dict[str, Any] = {
        "vocab_size": 97,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "tie_word_embeddings": True,
    }
    return LlamaConfig(**{**values, **overrides})
