"""Paper semantics and strict mode of `apply_edits`, one test per quirk."""

from __future__ import annotations

import pytest

from swerl.edit_format import (
    FormatError,
    FormatErrorKind,
    SearchReplace,
    apply_edits,
    count_occurrences,
    group_edits_by_path,
)

SRC = "def f(x):\n    return x + 1\n\n\ndef g(y):\n    return y + 1\n"


def kind_of(context, edits, strict=False) -> FormatErrorKind:
    with pytest.raises(FormatError) as info:
        apply_edits(context, edits, strict=strict)
    return info.value.kind


def test_simple_edit_returns_only_edited_paths():
    context = {"m.py": SRC, "other.py": "x\n"}
    new = apply_edits(context, [SearchReplace("m.py", "def f(x):", "def f(x, z):")])
    assert new == {"m.py": SRC.replace("def f(x):", "def f(x, z):")}


def test_replace_all_changes_every_occurrence():
    new = apply_edits({"m.py": SRC}, [SearchReplace("m.py", "    return", "    yield")])
    assert new["m.py"] == SRC.replace("    return", "    yield")
    assert new["m.py"].count("yield") == 2


def test_search_may_end_mid_line():
    new = apply_edits({"m.py": SRC}, [SearchReplace("m.py", "def g", "def h")])
    assert new["m.py"] == SRC.replace("def g(y)", "def h(y)")


def test_search_is_anchored_at_a_line_start():
    # "x + 1" occurs only in the middle of a line, so "\nx + 1" is not found
    assert (
        kind_of({"m.py": SRC}, [SearchReplace("m.py", "x + 1", "x + 2")]) is FormatErrorKind.SEARCH_NOT_FOUND
    )
    # the first line is reachable thanks to the prepended newline
    assert apply_edits({"m.py": SRC}, [SearchReplace("m.py", "def f", "def F")])["m.py"].startswith(
        "def F(x)"
    )


@pytest.mark.parametrize("text", ["", "    return x + 1"])
def test_search_equal_to_replace(text):
    kind = kind_of({"m.py": SRC}, [SearchReplace("m.py", text, text)])
    assert kind is FormatErrorKind.SEARCH_EQUALS_REPLACE


def test_missing_path_is_an_empty_new_file():
    assert apply_edits({}, [SearchReplace("new.py", "", "print(1)\n")]) == {"new.py": "print(1)\n"}
    # a non-empty search on a file that does not exist is not found
    assert kind_of({}, [SearchReplace("new.py", "x", "y")]) is FormatErrorKind.SEARCH_NOT_FOUND


def test_empty_search_on_existing_file_hits_every_line_break():
    new = apply_edits({"m.py": "a\nb"}, [SearchReplace("m.py", "", "#")])
    assert new == {"m.py": "#a\n#b"}  # the replacement lands at the start of every line


def test_edits_apply_sequentially_and_see_earlier_results():
    edits = [
        SearchReplace("m.py", "def f(x):", "def f(x):\n    x = abs(x)"),
        SearchReplace("m.py", "    x = abs", "    x = int"),
    ]
    new = apply_edits({"m.py": SRC}, edits)
    assert new["m.py"].startswith("def f(x):\n    x = int(x)\n    return x + 1\n")


def test_edits_are_grouped_by_path_in_first_appearance_order():
    edits = [SearchReplace("b", "1", "2"), SearchReplace("a", "x", "y"), SearchReplace("b", "2", "3")]
    grouped = group_edits_by_path(edits)
    assert list(grouped) == ["b", "a"]
    assert grouped["b"] == [edits[0], edits[2]]
    assert apply_edits({"a": "x", "b": "1"}, edits) == {"b": "3", "a": "y"}


def test_a_later_error_fails_the_whole_answer():
    edits = [SearchReplace("m.py", "def f", "def F"), SearchReplace("m.py", "def f", "def G")]
    assert kind_of({"m.py": SRC}, edits) is FormatErrorKind.SEARCH_NOT_FOUND


def test_error_names_the_path():
    with pytest.raises(FormatError) as info:
        apply_edits({"m.py": SRC}, [SearchReplace("m.py", "nothing", "x")])
    assert info.value.path == "m.py"


def test_strict_rejects_unknown_path_but_allows_creation():
    assert kind_of({}, [SearchReplace("n.py", "x", "y")], strict=True) is FormatErrorKind.UNKNOWN_PATH
    edits = [SearchReplace("n.py", "", "a\nb\n"), SearchReplace("n.py", "b", "c")]
    assert apply_edits({}, edits, strict=True) == {"n.py": "a\nc\n"}


def test_strict_rejects_ambiguous_search_default_does_not():
    edit = SearchReplace("m.py", "    return", "    yield")
    assert kind_of({"m.py": SRC}, [edit], strict=True) is FormatErrorKind.AMBIGUOUS_SEARCH
    assert apply_edits({"m.py": SRC}, [edit])  # default: replace-all, no error


def test_strict_counts_overlapping_matches():
    content = "a\na\na"
    assert ("\n" + content).count("\na\na") == 1  # str.count skips the overlapping second match
    assert count_occurrences("\n" + content, "\na\na") == 2
    edit = SearchReplace("m", "a\na", "b")
    assert kind_of({"m": content}, [edit], strict=True) is FormatErrorKind.AMBIGUOUS_SEARCH
    assert apply_edits({"m": content}, [edit]) == {"m": "b\na"}


def test_strict_still_applies_paper_checks():
    assert (
        kind_of({"m.py": SRC}, [SearchReplace("m.py", "zzz", "y")], strict=True)
        is FormatErrorKind.SEARCH_NOT_FOUND
    )
    assert kind_of({"m.py": SRC}, [SearchReplace("m.py", "a", "a")], strict=True) is (
        FormatErrorKind.SEARCH_EQUALS_REPLACE
    )
    assert apply_edits({"m.py": SRC}, [SearchReplace("m.py", "def g", "def h")], strict=True)["m.py"] == (
        SRC.replace("def g", "def h")
    )
