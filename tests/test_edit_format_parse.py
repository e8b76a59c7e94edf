"""The answer format rules of `swerl.edit_format.parse`, one test per rule and quirk, plus the prompt."""

from __future__ import annotations

import pickle

import pytest

from swerl.edit_format import (
    COMPACT_SYSTEM_PROMPT,
    SYSTEM_PROMPT,
    FormatError,
    FormatErrorKind,
    SearchReplace,
    build_messages,
    extract_thought_solution,
    parse_answer,
    parse_edits,
    render_repair_prompt,
)


def block(path: str, search: str, replace: str, lang: str = "python") -> str:
    return f"```{lang}\n### {path}\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n```"


def answer(solution: str, thought: str = "look at f") -> str:
    return f"<think>\n{thought}\n</think>\n<solution>\n{solution}\n</solution>"


GOOD = answer(block("m.py", "    return 1", "    return 2"))


def kind_of(text: str) -> FormatErrorKind:
    with pytest.raises(FormatError) as info:
        parse_answer(text)
    return info.value.kind


def test_well_formed_answer_parses():
    parsed = parse_answer(GOOD)
    assert parsed.thought == "look at f"
    assert parsed.edits == (SearchReplace("m.py", "    return 1", "    return 2"),)
    assert parsed.solution.startswith("```python") and parsed.solution.endswith("```")


@pytest.mark.parametrize("tag", ["<think>", "</think>", "<solution>", "</solution>"])
def test_each_tag_missing_or_doubled(tag):
    assert kind_of(GOOD.replace(tag, "")) is FormatErrorKind.TAG_COUNT
    assert kind_of(GOOD.replace(tag, tag + tag)) is FormatErrorKind.TAG_COUNT


def test_tag_mentioned_inside_code_counts():
    text = answer(block("m.py", "x = 1", 'x = "<think>"'))
    assert kind_of(text) is FormatErrorKind.TAG_COUNT


@pytest.mark.parametrize("thought", ["", " ", "\n\t \n"])
def test_empty_thought(thought):
    assert kind_of(answer(block("m.py", "a", "b"), thought=thought)) is FormatErrorKind.EMPTY_THOUGHT


def test_tag_order_is_not_checked():
    text = f"<solution>\n{block('m.py', 'a', 'b')}\n</solution>\n<think>why</think>"
    parsed = parse_answer(text)
    assert parsed.thought == "why"
    assert parsed.edits == (SearchReplace("m.py", "a", "b"),)


def test_closing_tag_before_opening_tag_runs_to_the_end():
    thought, solution = extract_thought_solution("</think>x<think> T <solution>S</solution>")
    assert thought == "T <solution>S</solution>"
    assert solution == "S"


def test_no_blocks():
    assert kind_of(answer("Change return 1 to return 2.")) is FormatErrorKind.NO_BLOCKS
    assert kind_of(answer("")) is FormatErrorKind.NO_BLOCKS


def test_path_is_not_stripped():
    assert parse_edits(block("m.py ", "a", "b")) == [SearchReplace("m.py ", "a", "b")]
    assert parse_edits(block(" m.py", "a", "b"))[0].path == " m.py"


@pytest.mark.parametrize("lang", ["", "python", "diff", "py title=x", "```"])
def test_language_tag_is_optional_and_arbitrary(lang):
    assert parse_edits(block("m.py", "a", "b", lang=lang)) == [SearchReplace("m.py", "a", "b")]


def test_crlf_answer_has_no_blocks():
    text = GOOD.replace("\n", "\r\n")
    assert kind_of(text) is FormatErrorKind.NO_BLOCKS


def test_two_blocks_are_matched_lazily_in_order():
    solution = block("a.py", "x", "y") + "\nsome prose\n" + block("b.py", "1\n2", "3")
    assert parse_edits(solution) == [SearchReplace("a.py", "x", "y"), SearchReplace("b.py", "1\n2", "3")]


def test_empty_search_and_replace_are_blank_lines():
    assert parse_edits(block("new.py", "", "")) == [SearchReplace("new.py", "", "")]


def test_marker_line_inside_search_cuts_it_short():
    edits = parse_edits(block("m.py", "a\n=======\nb", "c"))
    assert edits == [SearchReplace("m.py", "a", "b\n=======\nc")]


def test_search_marker_directly_followed_by_divider_swallows_next_block():
    first = "```python\n### a.py\n<<<<<<< SEARCH\n=======\nx\n>>>>>>> REPLACE\n```"
    edits = parse_edits(first + "\n" + block("b.py", "s", "r"))
    assert len(edits) == 1
    assert edits[0].path == "a.py"
    assert edits[0].search.startswith("=======\nx\n>>>>>>> REPLACE")


def test_missing_closing_fence_is_not_a_block():
    assert parse_edits(block("m.py", "a", "b").removesuffix("```")) == []


def test_format_error_carries_kind_and_pickles():
    err = FormatError(FormatErrorKind.SEARCH_NOT_FOUND, "nope", path="m.py")
    assert isinstance(err, ValueError) and str(err) == "nope"
    clone = pickle.loads(pickle.dumps(err))
    assert (clone.kind, clone.message, clone.path) == (err.kind, "nope", "m.py")
    assert FormatErrorKind.TAG_COUNT == "tag_count"


def test_prompt_lists_files_in_order_and_explains_the_format():
    context = [("z.py", "print('z')\n"), ("a.py", "x = ```1```")]
    prompt = render_repair_prompt("Crash on start", context)
    assert prompt.index("Crash on start") < prompt.index("### z.py") < prompt.index("### a.py")
    assert "### z.py\n```\nprint('z')\n```" in prompt
    # a file holding backticks gets a longer fence, and a missing final newline is only added for display
    assert "### a.py\n````\nx = ```1```\n````" in prompt
    assert "<<<<<<< SEARCH" in prompt and ">>>>>>> REPLACE" in prompt
    # the example block in the instructions is itself in the exact format the parser reads
    assert parse_edits(prompt)[-1].path == "path/to/file.py"
    assert render_repair_prompt("Crash on start", dict(context)) == prompt


def test_messages_are_system_then_user():
    messages = build_messages("issue", {"a.py": "x\n"})
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"] == SYSTEM_PROMPT
    assert "<think>" in SYSTEM_PROMPT and "<solution>" in SYSTEM_PROMPT
    assert build_messages("issue", {}, system_prompt="S")[0]["content"] == "S"


def test_compact_style_keeps_the_layout_and_a_parsable_example_with_fewer_words():
    context = [("z.py", "print('z')\n")]
    full = render_repair_prompt("Crash on start", context)
    compact = render_repair_prompt("Crash on start", context, style="compact")
    # same issue and files, in the same place; only the instructions after them differ
    head = full[: full.index("Find the cause")]
    assert compact.startswith(head) and "Rules:" not in compact
    assert parse_edits(compact)[-1].path == "path/to/file.py"
    assert len(compact) - len(head) < (len(full) - len(head)) / 2
    messages = build_messages("Crash on start", context, style="compact")
    assert messages == [
        {"role": "system", "content": COMPACT_SYSTEM_PROMPT},
        {"role": "user", "content": compact},
    ]
    for tag in ("<think>", "</think>", "<solution>", "</solution>"):
        assert tag in COMPACT_SYSTEM_PROMPT
    assert len(COMPACT_SYSTEM_PROMPT) < len(SYSTEM_PROMPT) / 2


def test_unknown_prompt_style_is_refused_by_name():
    with pytest.raises(ValueError, match=r"unknown prompt style 'terse'.*full, compact"):
        build_messages("issue", {}, style="terse")  # type: ignore[arg-type]
