"""The token estimate's fast paths give exactly what its definition (the `_PIECES` regex) gives."""

from __future__ import annotations

import random

from data_pipeline.tokens import _PIECES, _ascii_estimate, _find, count_composed, estimate_tokens


def _texts(seed: int, n: int) -> list[str]:
    """Random ASCII texts rich in runs at and around the 8-character cut, plus every class boundary."""
    rng = random.Random(seed)
    alphabet = "aZ09 \t\n\r\x0b\x0c\x1c.-_(){}`" + "x" * 8 + "1" * 4 + " " * 6
    texts = ["", "a", " ", "\n", "a" * 8, "a" * 9, "1" * 17, " " * 16 + "x", "\t \t" * 5]
    for _ in range(n):
        texts.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 300))))
        texts.append(rng.choice("a1 \t.\n") * rng.randint(1, 40))
    return texts


def test_ascii_estimate_counts_the_regex_pieces():
    for text in _texts(0, 2000):
        if text:
            assert _ascii_estimate(text) == len(_PIECES.findall(text)), repr(text)


def test_find_is_str_find():
    rng = random.Random(1)
    for _ in range(5000):
        text = "".join(rng.choice("ab\n") for _ in range(rng.randint(0, 400)))
        start = rng.randint(0, len(text))
        part = text[start : rng.randint(start, len(text))]
        if rng.random() < 0.3:
            part = "".join(rng.choice("ab") for _ in range(rng.randint(1, 200)))
        pos = rng.randint(0, len(text))
        assert _find(text, part, pos) == text.find(part, pos)


def test_count_composed_is_the_count_of_the_whole_text():
    rng = random.Random(2)
    for _ in range(300):
        parts = ["".join(rng.choice("ab \n=") for _ in range(rng.randint(0, 200))) for _ in range(4)]
        glue = ["\n### f.py\n```\n", "\n```\n\n", "x", "\n"]
        text = "".join(g + p for g, p in zip(glue, parts, strict=True)) + "\nend"
        assert count_composed(estimate_tokens, text, parts) == len(_PIECES.findall(text))
