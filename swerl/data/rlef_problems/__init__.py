"""The bundled RLEF problem sets (train / valid / test, and the hidden-constant hidden_train / hidden_test
for the feedback demonstration; JSONL in the code_contests shape); see generate.py."""

from __future__ import annotations

from pathlib import Path

SPLITS = ("train", "valid", "test", "hidden_train", "hidden_test")


def bundled_path(split: str) -> Path:
    """The JSONL file of one split of the bundled set."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    return Path(__file__).parent / f"{split}.jsonl"
