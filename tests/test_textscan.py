"""`swerl._textscan.contains_any` answers exactly as `any(needle in text for needle in needles)`."""

from __future__ import annotations

import random

import pytest

from swerl.edit_format import inverse

textscan = pytest.importorskip("swerl._textscan")

NEEDLES = (*inverse._SPECIAL, "\n=======\n")


def _texts() -> list[str]:
    """Texts in each width a str stores, with needles whole, cut short, at either end and overlapping."""
    rng = random.Random(3)
    pieces = [
        "x = 1\n",
        "think",
        ">",
        "<<<<<<<",
        " SEARCH",
        "\n",
        "=======",
        "solution>",
        "é",
        "\u2014",
        "\U0001f600",
    ]
    pieces += [*NEEDLES, "<<<<<<< SEARC", ">>>>>>> REPLAC", "=======\n", "\n======="]
    texts = ["", "think>", "x" * 5000 + "solution>", "solution>" + "x" * 5000, "=" * 50, "\n=======\n"]
    texts += ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 40))) for _ in range(3000)]
    return texts


def test_contains_any_matches_in_for_every_width():
    needle_sets = [NEEDLES, ("é",), ("\u2014", "think>"), ("\U0001f600",), ("thinké",), ()]
    kinds = set()
    for text in _texts():
        for needles in needle_sets:
            found = textscan.contains_any(text, needles)
            if found is None:  # wider than one byte a character: the caller searches
                assert max(map(ord, text)) > 0xFF
                continue
            kinds.add(max(map(ord, text), default=0) > 0x7F)
            assert found == any(needle in text for needle in needles), (text, needles)
    assert kinds == {False, True}  # ASCII and Latin-1 text both searched in C


def test_contains_any_empty_needle_and_bad_arguments():
    assert textscan.contains_any("", ("",)) is True
    assert textscan.contains_any("abc", ("x", "")) is True
    assert textscan.contains_any("abc", ()) is False
    for args in [(b"abc", ("a",)), ("abc", ["a"]), ("abc", (b"a",)), ("abc",)]:
        with pytest.raises(TypeError):
            textscan.contains_any(*args)


def test_plain_text_is_the_same_without_the_extension(monkeypatch):
    texts = [*_texts(), "=======", "=======\nx", "x\n=======", "x\n=======\ny", "========", "x=======\n"]
    compiled = [inverse._plain_text(text) for text in texts]
    monkeypatch.setattr(inverse, "_compiled_contains_any", None)
    assert [inverse._plain_text(text) for text in texts] == compiled
    assert compiled.count(False) > 100 and compiled.count(True) > 100
    assert not inverse._plain_text("x\n=======") and inverse._plain_text("========\nx=======")


def test_line_ends_are_where_split_lines_ends_each_line(monkeypatch):
    """The compiled offsets, numpy's and a plain split agree, for every width and ending."""
    from itertools import accumulate

    from swerl.edit_format import patch

    rng = random.Random(9)
    texts = ["", "\n", "a", "a\n", "\n\nb", "x\r\ny", "é\n", "tail é", *_texts()]
    texts += ["".join(rng.choice("ab\n\n é\u2014") for _ in range(rng.randint(0, 3000))) for _ in range(300)]
    widths = set()
    for text in texts:
        expected = list(accumulate(map(len, patch.split_lines(text))))
        packed = textscan.line_ends(text)
        if packed is None:
            assert max(map(ord, text)) > 0xFF
        else:
            widths.add(text.isascii())
            assert list(memoryview(packed).cast("q")) == expected, repr(text)
        assert [int(end) for end in patch._line_ends(text)] == expected
        monkeypatch.setattr(patch, "_compiled_line_ends", None)
        assert [int(end) for end in patch._line_ends(text)] == expected
        monkeypatch.undo()
    assert widths == {True, False}
    with pytest.raises(TypeError):
        textscan.line_ends(b"a\n")
