"""The token estimate's fast paths give exactly what its definition (the `_PIECES` regex) gives."""

from __future__ import annotations

import random

import pytest

from data_pipeline.context import tokens
from data_pipeline.context.tokens import (
    _PIECES,
    _estimate,
    _find,
    count_composed,
    estimate_tokens,
    estimate_uncached,
)


def _texts(seed: int, n: int) -> list[str]:
    """Random ASCII texts rich in runs at and around the 8-character cut, plus every class boundary."""
    rng = random.Random(seed)
    alphabet = "aZ09 \t\n\r\x0b\x0c\x1c.-_(){}`" + "x" * 8 + "1" * 4 + " " * 6
    texts = ["", "a", " ", "\n", "a" * 8, "a" * 9, "1" * 17, " " * 16 + "x", "\t \t" * 5]
    for _ in range(n):
        texts.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 300))))
        texts.append(rng.choice("a1 \t.\n") * rng.randint(1, 40))
    return texts


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


def _every_code_point_in_runs() -> list[str]:
    """Every ASCII code point in runs of 1..20, alone and next to each class (and itself after a cut)."""
    texts = []
    for code in range(128):
        for length in range(1, 21):
            run = chr(code) * length
            texts += [run, "a" + run + "1", " " + run + "\t", run + "\n" + run, "x" * 7 + run + "9" * 9]
    return texts


def test_compiled_estimate_counts_the_regex_pieces():
    compiled = pytest.importorskip("data_pipeline.context._tokencount")
    long_runs = [c * 10_000 for c in " \tA9\n."] + ["ab1 " * 5000, "\x1c\x1f\r\x0b\x0c" * 1000]
    for text in _texts(0, 2000) + _every_code_point_in_runs() + long_runs + [""]:
        assert compiled.estimate(text) == len(_PIECES.findall(text)), repr(text)


def test_compiled_estimate_across_its_chunks():
    """The extension works through the text in chunks of 1024 characters: runs across their edges."""
    compiled = pytest.importorskip("data_pipeline.context._tokencount")
    texts = []
    for before in [*range(1005, 1035), 2040, 2048, 3072]:
        for filler in ".a ":
            for run in ["x" * 9, "7" * 17, " " * 25, "\t" * 8, "b" * 3, "\n\n"]:
                texts.append(filler * before + run + "," + run)
    rng = random.Random(6)
    alphabet = "aZ09 \t\n\r\x0b\x0c\x1c.-_(){}`" + "x" * 20 + "1" * 10 + " " * 20
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1000, 6000))) for _ in range(60)]
    for text in texts:
        assert compiled.estimate(text) == len(_PIECES.findall(text)), repr(text)


def _unicode_texts() -> list[str]:
    """Text past ASCII in each width a str stores (1, 2 and 4 bytes a character): Unicode digits (which
    join runs of ASCII digits), Unicode whitespace, letters the regex's [A-Za-z] does not take, and long
    runs of each across the extension's chunks."""
    specials = [
        "\u00e9",  # e-acute: Latin-1, a piece of its own
        "\u00a0\x85\u00b2\u00bd\u00ff",  # NBSP, NEL, superscript two, one half: not digits
        "\u0663\u0967\uff19",  # Arabic-Indic three, Devanagari one, fullwidth nine: Unicode digits (Nd)
        "\u2028\u3000\u2009",  # line separator, ideographic space, thin space
        "\u212a\u0391\u4e2d",  # Kelvin sign, Greek Alpha, a CJK ideograph
        "\U0001d7d8\U0001f600\U00010400",  # mathematical double-struck zero (Nd), an emoji, Deseret
    ]
    rng = random.Random(7)
    alphabet = "aZ09 \t\n.-_" + "x" * 10 + "1" * 10 + " " * 10 + "".join(specials)
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 3000))) for _ in range(200)]
    for special in "".join(specials):
        texts += [special * 20, "12" + special * 9 + "34", "ab" + special + "cd", " " * 9 + special]
        texts += ["x" * 1020 + special * 30 + "9" * 30]  # across the first chunk's edge
    return texts


def test_compiled_estimate_counts_unicode_text_as_the_regex():
    compiled = pytest.importorskip("data_pipeline.context._tokencount")
    for text in _unicode_texts():
        assert compiled.estimate(text) == len(_PIECES.findall(text)), repr(text)
    assert compiled.estimate("\u0663" * 9) == 2  # Nd digits run like 0-9: 8, then 1
    # Every code point of the Basic Multilingual Plane, each in a run after an ASCII digit: pieces do
    # not cross newlines, so the whole text's count is right only if each line's is.
    every = "\n".join("7" + chr(code) * 9 for code in range(128, 0x10000))
    assert compiled.estimate(every) == len(_PIECES.findall(every))


def test_compiled_estimate_rejects_non_str():
    compiled = pytest.importorskip("data_pipeline.context._tokencount")
    for value in [b"abc", None, 3, ["a"]]:
        with pytest.raises(TypeError):
            compiled.estimate(value)


def test_extension_is_used_when_built():
    try:
        import data_pipeline.context._tokencount  # noqa: F401
    except ImportError:
        assert not tokens.HAVE_EXTENSION
    else:
        assert tokens.HAVE_EXTENSION


def test_estimate_counts_the_regex_pieces_on_mixed_text():
    rng = random.Random(3)
    alphabet = "aZ09 \t\n\r\x1c.(é\u00a0٣\u2028\x85" + "x" * 8 + " " * 4
    texts = [*_texts(4, 200), "é", "x\u00a0y", "٣" * 20, "a" * 500 + "é", "1" * 450]
    for _ in range(300):
        texts.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 900))))
    for text in texts:
        expected = len(_PIECES.findall(text))
        assert _estimate(text) == expected, repr(text)
        assert estimate_uncached(text) == expected, repr(text)
        assert estimate_tokens(text) == expected, repr(text)
