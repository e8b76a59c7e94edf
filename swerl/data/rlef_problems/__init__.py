"""The bundled RLEF problem sets (train / valid / test, and the hidden-constant hidden_train / hidden_test
for the feedback demonstration; JSONL in the code_contests shape); see generate.py."""

from __future__ import annotations

from pathlib import Path

from swerl.errors import UserError

SPLITS = ("train", "valid", "test", "hidden_train", "hidden_test")


def bundled_path(split: str) -> Path:
    """The JSONL file of one split of the bundled set."""
    if split not in SPLITS:
        raise UserError(f"bundled:{split}: no such bundled split; choose one of {', '.join(SPLITS)}")
    return Path(__file__).parent / f"{split}.jsonl"
