"""`canonical_answer` must reproduce `new` under both semantics, or refuse loudly."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swerl.edit_format import (
    DEFAULT_THOUGHT,
    SearchReplace,
    answer_error,
    apply_edits,
    canonical_answer,
    canonical_edits,
    edits_to_text,
    parse_answer,
    parse_edits,
)


def changed(old, new):
    return {path: content for path, content in new.items() if old.get(path) != content}


def round_trip(old, new, **kwargs):
    """Apply the canonical answer both ways and check it against `new`. Returns the parsed edits."""
    text = canonical_answer(old, new, **kwargs)
    edits = parse_answer(text).edits
    assert apply_edits(old, edits) == changed(old, new)
    assert apply_edits(old, edits, strict=True) == changed(old, new)
    return edits


def test_answer_shape_and_thought():
    text = canonical_answer({"m.py": "a\nb\n"}, {"m.py": "a\nc\n"}, thought="Fix b.")
    assert text.startswith("<think>\nFix b.\n</think>\n<solution>\n```python\n### m.py\n")
    assert text.endswith("```\n</solution>")
    assert parse_answer(canonical_answer({"m.py": "a"}, {"m.py": "b"})).thought == DEFAULT_THOUGHT


def test_minimal_context_grows_only_until_unique():
    old = "x = 1\ny = 2\nx = 1\n"
    assert round_trip({"m": old}, {"m": old.replace("y = 2", "y = 3")}, context_lines=0) == (
        SearchReplace("m", "y = 2", "y = 3"),
    )
    # the first "x = 1" is not unique on its own, so one line of context after it is added
    assert round_trip({"m": old}, {"m": "x = 9\ny = 2\nx = 1\n"}, context_lines=0) == (
        SearchReplace("m", "x = 1\ny = 2", "x = 9\ny = 2"),
    )


def test_search_that_would_match_a_longer_line_gets_context():
    # "\nab" is a prefix of the line "abc" too, so "ab" alone would be ambiguous
    edits = round_trip({"m": "abc\nab\n"}, {"m": "abc\nAB\n"}, context_lines=0)
    assert edits[0].search != "ab"


def test_pure_insertion_and_deletion_carry_context():
    old = "a\nb\nc\n"
    edits = round_trip({"m": old}, {"m": "a\nb\nnew\nc\n"}, context_lines=0)
    assert all(edit.search and edit.replace for edit in edits)
    edits = round_trip({"m": old}, {"m": "a\nc\n"}, context_lines=0)
    assert all(edit.search and edit.replace for edit in edits)


def test_nearby_hunks_merge_and_distant_ones_do_not():
    old = "".join(f"line {i}\n" for i in range(30))
    near = old.replace("line 3\n", "LINE 3\n").replace("line 5\n", "LINE 5\n")
    assert len(round_trip({"m": old}, {"m": near}, context_lines=1)) == 1
    far = old.replace("line 3\n", "LINE 3\n").replace("line 20\n", "LINE 20\n")
    assert len(round_trip({"m": old}, {"m": far}, context_lines=1)) == 2


def test_new_file_is_one_empty_search():
    edits = round_trip({}, {"pkg/new.py": "print(1)\n"})
    assert edits == (SearchReplace("pkg/new.py", "", "print(1)\n"),)
    assert round_trip({"e.txt": ""}, {"e.txt": "filled"}) == (SearchReplace("e.txt", "", "filled"),)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("a\nb\n", ""),  # file emptied
        ("a\nb\n", "a\nb"),  # final newline removed
        ("a\nb", "a\nb\n"),  # final newline added
        ("a\n\n\nb\n", "a\n\nb\n"),  # blank lines
        ("\n\n\n", "\n\n"),
        ("x\nx\nx\nx\n", "x\nx\ny\nx\nx\n"),  # nothing but repeated lines
        ("a\r\nb\r\n", "a\r\nc\r\n"),  # CRLF content
        ("s = '''\n```\ncode\n```\n'''\n", "s = '''\n```\nCODE\n```\n'''\n"),  # fences in content
        ("=======\nx\n", "=======\ny\n"),  # a divider line that ends up first in the search
        (">>>>>>> REPLACE\nx\n", ">>>>>>> REPLACE\ny\n"),
        ("a\n=======\nb\n", "A\n=======\nb\n"),  # collides with context after "a", so none is used
        ("a\n=======\nb\n", "a\nb\n"),  # deleting the divider line works with context after it
        ("a\nb\n", "a\n=======\nb\n"),  # a divider line in a replace is harmless
        ("a\nb\n", "a\n>>>>>>> REPLACE\n```\nb\n"),  # so is a marker as the first replace line
        ("a\x0cb\u2028c\n", "a\x0cB\u2028c\n"),  # not line breaks for "\n" splitting
    ],
)
def test_edge_contents(old, new):
    round_trip({"m": old}, {"m": new})
    round_trip({"m": old}, {"m": new}, context_lines=0)


@pytest.mark.parametrize(
    ("old", "new", "match"),
    [
        ("a\n", "a\n", "nothing to answer"),
        (None, "", "empty file"),
        ("a\n=======\n", "b\nc\n", "collide"),  # the divider line must follow another line of the search
        ("a\n", "a\n>>>>>>> REPLACE\n```\n", "collide"),
        ("a\nb\n", "a\n<solution>\nb\n", "malformed"),
    ],
)
def test_unrepresentable_changes_raise(old, new, match):
    with pytest.raises(ValueError, match=match):
        canonical_answer({} if old is None else {"m": old}, {"m": new})


def test_other_refusals():
    with pytest.raises(ValueError, match="deleting"):
        canonical_answer({"m": "a"}, {"m": None})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="empty_thought"):
        canonical_answer({"m": "a"}, {"m": "b"}, thought="  ")
    with pytest.raises(ValueError, match="context_lines"):
        canonical_edits({"m": "a"}, {"m": "b"}, context_lines=-1)


def test_unchanged_and_untouched_paths_get_no_edits():
    edits = round_trip({"a": "1\n", "b": "2\n", "c": "3\n"}, {"b": "2\n", "c": "4\n"})
    assert {edit.path for edit in edits} == {"c"}


def test_edits_to_text_round_trips_through_the_parser():
    edits = [
        SearchReplace("a.py", "", "x\n"),
        SearchReplace("b c.py ", "s\n\nt", ""),
        SearchReplace("a.py", "q", "r"),
    ]
    assert parse_edits(edits_to_text(edits)) == edits
    assert (
        edits_to_text(edits[:1], language="")
        == "```\n### a.py\n<<<<<<< SEARCH\n\n=======\nx\n\n>>>>>>> REPLACE\n```"
    )


# A few short lines, some of them prefixes of others, so repeats and near-repeats are everywhere.
LINE = st.sampled_from(["a", "ab", "b", "", "    a", "x = 1", "x = 10", "}"])
PATHS = ["m.py", "pkg/n.py", "new.py"]


def mutate(draw, content: str) -> str:
    lines = content.split("\n")
    for _ in range(draw(st.integers(1, 4))):
        position = draw(st.integers(0, len(lines)))
        action = draw(st.sampled_from(["insert", "delete", "replace"]))
        if action == "insert" or not lines:
            lines.insert(position, draw(LINE))
        elif action == "delete":
            del lines[min(position, len(lines) - 1)]
        else:
            lines[min(position, len(lines) - 1)] = draw(LINE)
    return "\n".join(lines)


@st.composite
def old_and_new(draw):
    content = st.lists(LINE, max_size=14).map("\n".join)
    old = draw(st.dictionaries(st.sampled_from(PATHS[:2]), content, max_size=2))
    new = {}
    for path in PATHS:
        choice = draw(st.sampled_from(["skip", "mutate", "random"]))
        if choice == "mutate" and path in old:
            new[path] = mutate(draw, old[path])
        elif choice == "random":
            new[path] = draw(content)
    return old, new


@settings(max_examples=1000, deadline=None)
@given(case=old_and_new(), context_lines=st.integers(0, 3))
def test_round_trip_on_random_contents(case, context_lines):
    old, new = case
    diff = changed(old, new)
    if not diff or any(path not in old and content == "" for path, content in diff.items()):
        with pytest.raises(ValueError):
            canonical_answer(old, new, context_lines=context_lines)
        return
    round_trip(old, new, context_lines=context_lines)


# Texts made of marker lines, marker fragments and fences: where the block parser can be confused.
MARKERISH = st.lists(
    st.sampled_from(["=======", "==", ">>>>>>> REPLACE", ">>>>>>> REPLACE x", "```", "x", "", "### p"]),
    max_size=5,
).map("\n".join)


@settings(max_examples=2000, deadline=None)
@given(
    path=st.sampled_from(["a.py", "a b.py ", "x\ny.py", "```", "a.py\n```"]),
    search=MARKERISH,
    replace=MARKERISH,
)
def test_collision_shortcut_agrees_with_the_parser(path, search, replace):
    """`_collides` answers without parsing when no marker occurs; it must agree with a parse."""
    from swerl.edit_format.inverse import _collides

    edit = SearchReplace(path, search, replace)
    assert _collides(edit) == (parse_edits(edits_to_text([edit])) != [edit])


def test_a_failing_check_reports_the_first_mode_that_fails():
    """Strict mode is tried first (it settles both modes when it passes); when it fails, the error
    still names the first mode, in order, that does not reproduce the new contents."""
    from swerl.edit_format.inverse import _reproduces_strictly

    old = {"a.py": "x\ny\nx\n"}
    ambiguous = [SearchReplace("a.py", "x", "z")]
    assert not _reproduces_strictly(old, ambiguous, {"a.py": "z\ny\nz\n"})
    assert apply_edits(old, ambiguous) == {"a.py": "z\ny\nz\n"}
    assert _reproduces_strictly(old, [SearchReplace("a.py", "y", "w")], {"a.py": "x\nw\nx\n"})


# Contents where the shortcut of `answer_error` applies (plain lines) and where it must not (markers,
# tags, fences), so both of its paths are compared with building the answer.
SOMETIMES_SPECIAL = st.sampled_from(
    [
        "a",
        "ab",
        "",
        "x = 1",
        "=======",
        "========",
        "x=======",
        "=======x",
        ">>>>>>> REPLACE",
        "<<<<<<< SEARCH",
        "</solution>",
        "<think>",
        "```",
    ]
)


@st.composite
def old_and_new_with_markers(draw):
    content = st.lists(st.one_of(LINE, SOMETIMES_SPECIAL), max_size=10).map("\n".join)
    old = draw(st.dictionaries(st.sampled_from(PATHS[:2]), content, max_size=2))
    new = {}
    for path in PATHS:
        choice = draw(st.sampled_from(["skip", "mutate", "random", "same"]))
        if choice == "mutate" and path in old:
            new[path] = mutate(draw, old[path])
        elif choice == "random":
            new[path] = draw(content)
        elif choice == "same" and path in old:
            new[path] = old[path]
    return old, new


@settings(max_examples=1500, deadline=None)
@given(case=old_and_new_with_markers())
def test_answer_error_says_whether_canonical_answer_succeeds(case):
    old, new = case
    try:
        canonical_answer(old, new)
        expected = None
    except ValueError as err:
        expected = str(err)
    assert answer_error(old, new) == expected


def test_answer_error_refusals():
    assert "deleting" in answer_error({"a.py": "x"}, {"a.py": None})
    assert "empty file" in answer_error({}, {"new.py": ""})
    assert "identical" in answer_error({"a.py": "x"}, {"a.py": "x"})
    assert answer_error({"a.py": "x\ny\n"}, {"a.py": "x\nz\n"}) is None
    assert "tag_count" in answer_error({"a.py": "x"}, {"a.py": "x\n</solution>"})
    assert answer_error({"a.py": "a\n=======\nb\n"}, {"a.py": "a\n=======\nc\n"}) is None  # built and checked
