"""Model loading, and tiny real-architecture models with locally trained tokenizers for offline runs."""

from swerl.models.loading import load_model_and_tokenizer
from swerl.models.tiny import (
    CHAT_TEMPLATE,
    EOS_TOKEN,
    PAD_TOKEN,
    build_tiny_model,
    default_corpus,
    train_tokenizer,
)

__all__ = [
    "CHAT_TEMPLATE",
    "EOS_TOKEN",
    "PAD_TOKEN",
    "build_tiny_model",
    "default_corpus",
    "load_model_and_tokenizer",
    "train_tokenizer",
]
