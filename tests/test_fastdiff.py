"""`swerl.fastdiff` must be bit-identical to Python's difflib: the SWE-RL reward depends on it.

Every test compares against `difflib` itself (never against a re-derivation), on inputs chosen to make the
tie-breaking and the autojunk rule matter: tiny alphabets (many equally long matches), lists with popular
elements, full Unicode, and real unified diffs of edited standard-library sources.  Each matching engine
of the extension is also forced in turn (`strategy=`), so a bug in an engine that the cost model rarely
picks cannot hide behind another one.
"""

from __future__ import annotations

import difflib
import random
import subprocess
import sys
import sysconfig
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from swerl import fastdiff

_matcher = pytest.importorskip("swerl.fastdiff._matcher")

# 0 auto, 1 quadratic DP, 2 automaton over the smaller side, 3 over b, 4 over a, 5 sparse b2j DP,
# 6 / 7 the chain path (K-gram index / DP probe) on every window, 8 as 6 with a hash where anagrams collide
STRATEGIES = range(9)
SETTINGS = settings(deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow])


def ref_matching_characters(a: str, b: str) -> int:
    return sum(m.size for m in difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks())


def ref_blocks(a, b, autojunk: bool = True) -> list[tuple[int, int, int]]:
    return [tuple(m) for m in difflib.SequenceMatcher(None, a, b, autojunk=autojunk).get_matching_blocks()]


def ref_body(a: list[str], b: list[str], n: int = 3) -> str:
    """The exact expression the SWE-RL reference implementation evaluates."""
    return "\n".join(list(difflib.unified_diff(a, b, fromfile="old", tofile="new", lineterm="", n=n))[2:])


def test_extension_is_loaded() -> None:
    """CI must not silently measure or test the slow pure-Python fallback."""
    assert fastdiff.HAVE_EXTENSION
    assert fastdiff._matcher is _matcher


# ---------------------------------------------------------------------------------------------------
# character level: ratio / matching_characters

small_alphabet_text = st.sampled_from(["ab", "abc", "abcd", "a b\n"]).flatmap(
    lambda alphabet: st.text(alphabet=alphabet, max_size=120)
)


@SETTINGS
@given(a=small_alphabet_text, b=small_alphabet_text)
@example(a="", b="")
@example(a="", b="abc")
@example(a=" abcd", b="abcd abcd")
@example(a="abxcd", b="abcd")
def test_ratio_small_alphabet_all_engines(a: str, b: str) -> None:
    expected = ref_matching_characters(a, b)
    for strategy in STRATEGIES:
        assert _matcher.matching_characters(a, b, strategy=strategy) == expected, strategy
    assert fastdiff.matching_characters(a, b) == expected
    assert fastdiff.ratio(a, b) == difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


@SETTINGS
@given(a=st.text(max_size=80), b=st.text(max_size=80))
def test_ratio_unicode(a: str, b: str) -> None:
    """All code point widths (PyUnicode kinds 1, 2 and 4), remapped to dense ids in C."""
    assert fastdiff.ratio(a, b) == difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()
    assert _matcher.matching_blocks(a, b, False) == ref_blocks(a, b, autojunk=False)


@SETTINGS
@given(
    base=st.text(alphabet="ab\u00e9\u4e2d\U0001f600", min_size=1, max_size=40),
    edits=st.lists(st.tuples(st.integers(0, 200), st.text(alphabet="ab\u4e2d", max_size=3)), max_size=6),
)
def test_ratio_mixed_widths_near_copies(base: str, edits: list[tuple[int, str]]) -> None:
    """Near-identical strings mixing 1-, 2- and 4-byte code points: long matches with many ties."""
    other = base
    for pos, text in edits:
        pos %= len(other) + 1
        other = other[:pos] + text + other[pos + 1 :]
    assert fastdiff.ratio(base, other) == difflib.SequenceMatcher(None, base, other, autojunk=False).ratio()


@settings(deadline=None, max_examples=12)
@given(
    a=st.text(alphabet="abcdefgh \n", min_size=1000, max_size=3000),
    b=st.text(alphabet="abcdefgh \n", min_size=1000, max_size=3000),
)
def test_ratio_long_strings(a: str, b: str) -> None:
    """Windows big enough for the automaton (and the autojunk rule's threshold, which must NOT apply to
    ratio, but does apply to `matching_blocks` on two str, difflib's default)."""
    expected = ref_matching_characters(a, b)
    for strategy in (0, 2, 6, 8):
        assert _matcher.matching_characters(a, b, strategy=strategy) == expected
    assert fastdiff.matching_blocks(a, b) == ref_blocks(a, b, autojunk=True)


def test_ratio_autojunk_is_off_for_characters() -> None:
    """The reward uses autojunk=False: a popular character (here ' ') must still match."""
    a = "x" + " " * 300 + "y"
    b = " " * 300 + "z"
    assert fastdiff.matching_characters(a, b) == ref_matching_characters(a, b) == 300


def test_matching_characters_rejects_non_str() -> None:
    with pytest.raises(TypeError):
        fastdiff.matching_characters(b"abc", "abc")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------------
# find_longest_match on arbitrary windows


@SETTINGS
@given(
    a=st.lists(st.integers(0, 3), max_size=300),
    b=st.lists(st.one_of(st.integers(0, 3), st.integers(0, 400)), max_size=300),
    data=st.data(),
)
def test_find_longest_match_windows(a: list[int], b: list[int], data: st.DataObject) -> None:
    """Single windows, with and without the autojunk rule (popular set computed over all of b)."""
    alo = data.draw(st.integers(0, len(a)))
    ahi = data.draw(st.integers(alo, len(a)))
    blo = data.draw(st.integers(0, len(b)))
    bhi = data.draw(st.integers(blo, len(b)))
    for autojunk in (False, True):
        expected = tuple(
            difflib.SequenceMatcher(None, a, b, autojunk=autojunk).find_longest_match(alo, ahi, blo, bhi)
        )
        for strategy in STRATEGIES:
            got = _matcher.find_longest_match(a, b, alo, ahi, blo, bhi, autojunk, strategy=strategy)
            assert got == expected, (autojunk, strategy)


# ---------------------------------------------------------------------------------------------------
# line level: matching_blocks with difflib's autojunk ("popular") rule

popular_int_lists = st.lists(
    st.one_of(st.integers(0, 4), st.integers(0, 4), st.integers(0, 600)), min_size=200, max_size=500
)


@settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(a=popular_int_lists, b=popular_int_lists)
def test_matching_blocks_popular_elements(a: list[int], b: list[int]) -> None:
    """len(b) >= 200 with values 0-4 far above len(b)//100 + 1 occurrences: they are popular, can't start
    or continue a match in the DP, but the extension loops still grow matches over them."""
    expected = ref_blocks(a, b)
    assert fastdiff.matching_blocks(a, b) == expected
    for strategy in STRATEGIES:
        assert _matcher.matching_blocks(a, b, True, strategy=strategy) == expected, strategy


def test_matching_blocks_extension_from_empty_match() -> None:
    """Only popular elements in common: the DP finds nothing, yet difflib extends from (alo, blo, 0)."""
    b = [0] * 250 + list(range(1, 50))
    a = [0, 0, 0, 7000]
    assert fastdiff.matching_blocks(a, b) == ref_blocks(a, b) == [(0, 0, 3), (4, 299, 0)]


line_vocab = [
    "",
    "    pass",
    "    return x",
    "def f(x):",
    "x = 1",
    "\t# tab",
    "a\rb",
    "\x0c",
    "\u2028",
    " ",
    "}",
]
line_lists = st.lists(
    st.sampled_from(line_vocab) | st.text(alphabet="xy", min_size=1, max_size=3), max_size=60
)


@SETTINGS
@given(a=line_lists, b=line_lists)
def test_matching_blocks_lines(a: list[str], b: list[str]) -> None:
    assert fastdiff.matching_blocks(a, b) == ref_blocks(a, b)


@SETTINGS
@given(a=st.lists(st.sampled_from(line_vocab), min_size=200, max_size=400), b=line_lists)
def test_matching_blocks_long_line_lists(a: list[str], b: list[str]) -> None:
    b = b + a[::3]  # both sides long enough for the popular rule, sharing many lines
    assert fastdiff.matching_blocks(a, b) == ref_blocks(a, b)
    assert fastdiff.matching_blocks(b, a) == ref_blocks(b, a)


def test_matching_blocks_generic_sequences() -> None:
    """Two str are matched as characters; tuples, ranges and mixed hashables work like difflib."""
    assert fastdiff.matching_blocks("qabxcd", "abycdf") == ref_blocks("qabxcd", "abycdf")
    assert fastdiff.matching_blocks(range(10), tuple(range(3, 12))) == ref_blocks(
        range(10), tuple(range(3, 12))
    )
    mixed_a = [1, "1", 1.0, (1,), None, "x"]
    mixed_b = ["x", None, 1, (1,), "1"]
    assert fastdiff.matching_blocks(mixed_a, mixed_b) == ref_blocks(mixed_a, mixed_b)
    assert fastdiff.matching_blocks([], []) == ref_blocks([], []) == [(0, 0, 0)]


def test_matching_blocks_errors_like_difflib() -> None:
    with pytest.raises(TypeError):
        fastdiff.matching_blocks([[1]], [[1]])

    class Boom:
        def __hash__(self) -> int:
            return 1

        def __eq__(self, other: object) -> bool:
            raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        fastdiff.matching_blocks([Boom()], [Boom(), Boom()])


# ---------------------------------------------------------------------------------------------------
# opcodes and unified diff bodies


@SETTINGS
@given(a=line_lists, b=line_lists, n=st.sampled_from([0, 1, 2, 3, 5]))
def test_grouped_opcodes(a: list[str], b: list[str], n: int) -> None:
    matcher = difflib.SequenceMatcher(None, a, b)
    assert fastdiff.opcodes(a, b) == matcher.get_opcodes()
    assert fastdiff.grouped_opcodes(a, b, n) == list(matcher.get_grouped_opcodes(n))


@SETTINGS
@given(a=line_lists, b=line_lists, n=st.sampled_from([0, 1, 3]))
@example(a=[], b=[], n=3)
@example(a=["x"], b=["x"], n=3)
@example(a=[], b=["x"], n=0)
@example(a=["x", "y"], b=[], n=1)
def test_unified_diff_body(a: list[str], b: list[str], n: int) -> None:
    assert fastdiff.unified_diff_body(a, b, n) == ref_body(a, b, n)
    assert fastdiff.unified_diff_body(a, a, n) == ref_body(a, a, n) == ""


def test_unified_diff_body_rejects_non_str_like_difflib() -> None:
    with pytest.raises(TypeError):
        fastdiff.unified_diff_body([b"x"], ["x"])  # type: ignore[list-item]


# ---------------------------------------------------------------------------------------------------
# real unified diffs

STDLIB = Path(sysconfig.get_paths()["stdlib"])
SOURCES = [
    STDLIB / name
    for name in ("difflib.py", "argparse.py", "textwrap.py", "json/encoder.py", "csv.py", "pathlib.py")
]


def _edit(lines: list[str], rng: random.Random, edits: int) -> list[str]:
    """Replaced identifiers, deleted and inserted lines: what a patch to a Python file looks like."""
    out = list(lines)
    for _ in range(edits):
        pos = rng.randrange(len(out))
        roll = rng.random()
        if roll < 0.4:
            words = out[pos].split(" ")
            words[rng.randrange(len(words))] = rng.choice(["value", "self._cache", "None", "len(items)"])
            out[pos] = " ".join(words)
        elif roll < 0.7:
            del out[pos : pos + rng.randint(1, 5)]
        else:
            indent = out[pos][: len(out[pos]) - len(out[pos].lstrip())]
            out[pos:pos] = [indent + rng.choice(["if x is None:", "return result", "raise ValueError(msg)"])]
    return out


def _real_diffs(seed: int, count: int, lo: int, hi: int) -> list[tuple[str, str]]:
    """(predicted, oracle) diff bodies of lo..hi characters each: partly right answers (same file, some
    shared edits) and wrong ones (another file)."""
    rng = random.Random(seed)
    files = [p.read_text(encoding="utf-8").splitlines() for p in SOURCES]
    pairs: list[tuple[str, str]] = []
    for _ in range(5000):
        if len(pairs) == count:
            break
        src = rng.choice(files)
        start = rng.randrange(len(src) - 200)
        window = src[start : start + rng.randint(150, 1200)]
        edits = rng.randint(2, max(3, hi // 500))
        oracle_new = _edit(window, rng, edits)
        oracle = ref_body(window, oracle_new)
        if rng.random() < 0.6:
            pred = ref_body(window, _edit(oracle_new if rng.random() < 0.5 else window, rng, edits // 2 + 1))
        else:
            other = rng.choice(files)
            ostart = rng.randrange(len(other) - 200)
            owin = other[ostart : ostart + rng.randint(150, 1200)]
            pred = ref_body(owin, _edit(owin, rng, edits))
        if lo <= len(pred) <= hi and lo <= len(oracle) <= hi:
            pairs.append((pred, oracle))
    assert len(pairs) == count
    return pairs


@pytest.mark.parametrize("seed", range(4))
def test_real_diff_pairs_small(seed: int) -> None:
    for pred, oracle in _real_diffs(seed, 10, 300, 3000):
        assert (
            fastdiff.ratio(pred, oracle)
            == difflib.SequenceMatcher(None, pred, oracle, autojunk=False).ratio()
        )


def test_real_diff_pairs_large() -> None:
    """5-20 KB pairs (a few seconds of difflib each): the windows where the automaton does the work."""
    for pred, oracle in _real_diffs(100, 3, 5000, 20000):
        expected = difflib.SequenceMatcher(None, pred, oracle, autojunk=False).ratio()
        assert fastdiff.ratio(pred, oracle) == expected


def test_real_files_line_level() -> None:
    """The reward's first step: unified diff bodies of whole edited files (autojunk on, popular lines)."""
    rng = random.Random(7)
    for path in SOURCES:
        old = path.read_text(encoding="utf-8").splitlines()
        new = _edit(old, rng, 25)
        assert fastdiff.matching_blocks(old, new) == ref_blocks(old, new)
        assert fastdiff.unified_diff_body(old, new) == ref_body(old, new)
        assert fastdiff.unified_diff_body(old, new, 0) == ref_body(old, new, 0)


# ---------------------------------------------------------------------------------------------------
# chains (inputs that make a per-window linear search quadratic overall)

CHAINS = {
    "a vs aab": ("a" * 20000, "aab" * 6667),
    "a vs a*9 b": ("a" * 20000, "aaaaaaaaab" * 2000),
    "a vs ab": ("a" * 20000, "ab" * 10000),
    "spaces vs code": (" " * 20000, "  x = 1\n" * 2500),
    "decreasing runs": ("a" * 20000, "".join("a" * k + "b" for k in range(200, 0, -1))[:20000]),
    "distinct chain": (
        "".join(map(chr, range(0x4E00, 0x4E00 + 8000))),
        "#".join(map(chr, range(0x4E00, 0x4E00 + 8000))),
    ),
}


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_chains_are_fast(name: str) -> None:
    a, b = CHAINS[name]
    start = time.perf_counter()
    fastdiff.ratio(a, b)
    assert time.perf_counter() - start < 0.5  # 20 KB each; the guarantee we aim at is 200 ms


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_chains_exact(name: str) -> None:
    """Small versions against difflib, large ones across engines (difflib needs hours on those)."""
    a, b = CHAINS[name]
    small_a, small_b = a[:150], b[:150]
    expected = ref_blocks(small_a, small_b, autojunk=False)
    for strategy in STRATEGIES:
        assert _matcher.matching_blocks(small_a, small_b, False, strategy=strategy) == expected
    big_a, big_b = a[:4000], b[:4000]
    auto = _matcher.matching_blocks(big_a, big_b, False)
    for strategy in (1, 2, 6, 7, 8):
        assert _matcher.matching_blocks(big_a, big_b, False, strategy=strategy) == auto, strategy


# ---------------------------------------------------------------------------------------------------
# threads and the fallback


def test_threads_give_identical_results() -> None:
    """The extension drops the GIL while matching; results must not depend on concurrency."""
    pairs = _real_diffs(3, 16, 300, 3000)
    expected = [fastdiff.ratio(a, b) for a, b in pairs]
    with ThreadPoolExecutor(max_workers=4) as pool:
        for _ in range(3):
            assert list(pool.map(lambda p: fastdiff.ratio(*p), pairs)) == expected


def test_fallback_without_extension(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the compiled module every function answers from difflib, with the same results."""
    a = "def f(x):\n    return x + 1\n"
    b = "def g(x):\n    return x - 1\n"
    lines_a, lines_b = a.splitlines(), b.splitlines()
    fast = (
        fastdiff.ratio(a, b),
        fastdiff.matching_blocks(lines_a, lines_b),
        fastdiff.unified_diff_body(lines_a, lines_b),
    )
    monkeypatch.setattr(fastdiff, "_matcher", None)
    slow = (
        fastdiff.ratio(a, b),
        fastdiff.matching_blocks(lines_a, lines_b),
        fastdiff.unified_diff_body(lines_a, lines_b),
    )
    assert fast == slow


def test_missing_extension_warns_once() -> None:
    code = (
        "import sys, warnings\n"
        "sys.modules['swerl.fastdiff._matcher'] = None\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    import swerl.fastdiff as f\n"
        "assert not f.HAVE_EXTENSION\n"
        "assert len(caught) == 1 and 'C compiler' in str(caught[0].message), caught\n"
        "assert f.ratio('abc', 'abd') == 2.0 * 2 / 6\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[1])
