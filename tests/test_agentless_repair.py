"""Repair candidates: every malformed answer becomes a recorded error kind, good ones a git patch."""

from __future__ import annotations

from agentless.localize.elements import EditLocation
from agentless.repair.candidates import make_candidate
from agentless.repair.context import build_context
from swerl.edit_format import apply_patch_to_contents, canonical_answer

OLD = {"pkg/mod.py": "def f(x):\n    return x - 1\n\n\ndef g():\n    return 2\n"}


def _read(path: str) -> str | None:
    return OLD.get(path)


def _answer(path: str, search: str, replace: str) -> str:
    return (
        "<think>\nreason\n</think>\n<solution>\n```python\n"
        f"### {path}\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n```\n</solution>"
    )


def test_good_answer_becomes_a_patch_that_applies() -> None:
    new = {"pkg/mod.py": OLD["pkg/mod.py"].replace("x - 1", "x + 1")}
    cand = make_candidate(0, canonical_answer(OLD, new), _read)
    assert cand.error is None and cand.paths == ["pkg/mod.py"]
    assert apply_patch_to_contents(OLD, cand.patch) == new


def test_new_file_with_empty_search_is_allowed() -> None:
    cand = make_candidate(0, _answer("pkg/new.py", "", "X = 1"), _read)
    assert cand.error is None and "new file mode" in cand.patch


def test_malformed_answers_are_recorded_not_raised() -> None:
    cases = {
        "no tags at all": "tag_count",
        "<think>\n</think>\n<solution>\nx\n</solution>": "empty_thought",
        "<think>t</think><solution>no blocks</solution>": "no_blocks",
        _answer("pkg/other.py", "def f(x):", "def f(y):"): "unknown_path",
        _answer("pkg/mod.py", "    return x - 7", "    return x"): "search_not_found",
        _answer("pkg/mod.py", "    return 2", "    return 2"): "search_equals_replace",
        _answer("pkg/mod.py", "    return x - 1", "    return (x - "): "syntax_error",
        _answer("../etc/passwd", "", "x"): "bad_path",
        _answer("/etc/passwd", "", "x"): "bad_path",
    }
    for answer, kind in cases.items():
        cand = make_candidate(3, answer, _read, temperature=0.8)
        assert cand.error == kind, (answer, cand.message)
        assert cand.patch == "" and cand.to_row()["index"] == 3


def test_context_shows_small_files_whole_and_windows_of_large_ones() -> None:
    big = "".join(f"x{i} = {i}\n" for i in range(2000))
    sources = {"small.py": "a = 1\n", "big.py": big, "other.py": big}
    ctx = build_context(sources, ["big.py", "small.py", "other.py"], [EditLocation("big.py", 1000, 1001)])
    assert list(ctx) == ["big.py", "small.py"]  # a large file without locations is left out
    assert ctx["small.py"] == "a = 1\n"
    assert ctx["big.py"].startswith("...\nx984 = 984\n") and "x1015 = 1015\n...\n" in ctx["big.py"]
