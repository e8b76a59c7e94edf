"""From (old, new) contents to an answer in the action format: SFT targets and Agentless output.

`canonical_answer` writes one SEARCH/REPLACE edit per diff hunk. Each edit gets the least context that
makes its search text occur exactly once in the file at the moment it applies, so the answer
reproduces `new` under the paper's replace-all semantics and under strict mode alike. Every answer is
parsed and applied again before it is returned, and an answer that does not reproduce `new` raises.
A training target is therefore never subtly wrong.

The work is line based, with lines split on "\\n" only: `text.split("\\n")`. A text that ends with
"\\n" therefore ends with an empty pseudo-line, and an edit that touches it changes the final newline.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from swerl.edit_format.apply import apply_edits
from swerl.edit_format.parse import (
    DIVIDER,
    REPLACE_MARKER,
    SEARCH_MARKER,
    TAGS,
    FormatError,
    SearchReplace,
    parse_answer,
    parse_edits,
)
from swerl.fastdiff import grouped_opcodes

DEFAULT_THOUGHT = "The issue is caused by the code changed below; these edits fix it."
DEFAULT_LANGUAGE = "python"


def edits_to_text(edits: Sequence[SearchReplace], *, language: str = DEFAULT_LANGUAGE) -> str:
    """Write edits as fenced SEARCH/REPLACE blocks separated by blank lines, the way `parse_edits` reads them.

    An empty search or replace becomes one blank line, which the parser reads back as empty. Nothing is
    checked here. `canonical_answer` checks its output with a round trip.
    """
    blocks = [
        f"```{language}\n### {edit.path}\n{SEARCH_MARKER}\n{edit.search}\n{DIVIDER}\n"
        f"{edit.replace}\n{REPLACE_MARKER}\n```"
        for edit in edits
    ]
    return "\n\n".join(blocks)


def _occurs_once(text: str, needle: str) -> bool:
    first = text.find(needle)
    return first != -1 and text.find(needle, first + 1) == -1


Span = tuple[int, int, int, int]


def _hunk_spans(a: list[str], b: list[str], context_lines: int) -> list[Span]:
    """The hunks of `a` -> `b` as (i1, i2, j1, j2), `context_lines` of context included where there is any.

    The empty pseudo-line after a final "\\n" is not useful as trailing context, so it is dropped from
    there. It comes back only when an edit needs it to be unique.
    """
    spans: list[Span] = []
    for group in grouped_opcodes(a, b, context_lines):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        last_tag, last_i1, last_i2 = group[-1][0], group[-1][1], group[-1][2]
        if last_tag == "equal" and last_i2 > last_i1 and i2 == len(a) and a[-1] == "":
            i2, j2 = i2 - 1, j2 - 1
        spans.append((i1, i2, j1, j2))
    return spans


def _collides(edit: SearchReplace) -> bool:
    """True when the edit's own text would confuse the block parser (a marker line inside it).

    Decided without parsing when the texts hold no marker at all, which is almost always: the block
    parser then reads the block back as written. Its match starts at the block's opening fence (the
    leftmost place where one can); the language tag and a path without a newline are single lines;
    the lazy search group stops at the first "\\n=======\\n" after the SEARCH line, which is the
    divider written after the search, because any earlier one would put "=======" inside the search;
    likewise the replace group stops at the closing marker written after it. That match ends the
    text, so there is no second one.
    """
    if "\n" not in edit.path and DIVIDER not in edit.search and REPLACE_MARKER not in edit.replace:
        return False
    return parse_edits(edits_to_text([edit])) != [edit]


def _file_edits(
    path: str, before: str, after: str, context_lines: int, *, grow_before_first: bool = True
) -> list[SearchReplace]:
    """Edits that turn `before` into `after` when applied in order. Each search is unique when it applies.

    The edits run top to bottom, so when the edit for hunk (i1, i2, j1, j2) applies, the file reads
    `b[:j1] + a[i1:]`. Context before the hunk therefore comes from `b` (it may have been written by
    the previous edit) and context after it from `a`. Context grows one line at a time, before and
    after in turn (`grow_before_first` picks which goes first), until search and replace are both
    non-empty and different and the search occurs once. Context that runs into the next hunk merges
    that hunk into this edit. At worst an edit is the whole file, whose text occurs exactly once in
    itself.
    """
    if before == "":
        # Creating or filling an empty file is one empty search, as the prompt describes it.
        return [SearchReplace(path, "", after)]
    a, b = before.split("\n"), after.split("\n")
    spans = _hunk_spans(a, b, context_lines)
    edits: list[SearchReplace] = []
    k = 0
    while k < len(spans):
        i1, i2, j1, j2 = spans[k]
        current = "\n" + "\n".join(b[:j1] + a[i1:])
        ctx_before = ctx_after = 0
        while True:
            if k + 1 < len(spans) and i2 + ctx_after > spans[k + 1][0]:
                _, i2, _, j2 = spans.pop(k + 1)
                ctx_after = 0
                continue
            search = b[j1 - ctx_before : j1] + a[i1 : i2 + ctx_after]
            replace = b[j1 - ctx_before : j2] + a[i2 : i2 + ctx_after]
            if search and replace and search != replace and _occurs_once(current, "\n" + "\n".join(search)):
                break
            can_grow_before, can_grow_after = ctx_before < j1, i2 + ctx_after < len(a)
            if not (can_grow_before or can_grow_after):  # unreachable: the whole file is always valid
                raise ValueError(f"{path}: no SEARCH/REPLACE edit can express this change")
            before_turn = ctx_before < ctx_after or (ctx_before == ctx_after and grow_before_first)
            if can_grow_before and (before_turn or not can_grow_after):
                ctx_before += 1
            else:
                ctx_after += 1
        edits.append(SearchReplace(path, "\n".join(search), "\n".join(replace)))
        k += 1
    return edits


def canonical_edits(
    old: Mapping[str, str], new: Mapping[str, str], *, context_lines: int = 1
) -> list[SearchReplace]:
    """The edits `canonical_answer` writes, before any check. Paths come in sorted order.

    Raises ValueError for changes the format cannot express: deleting a file (None in `new`) and
    creating an empty file. When a file's edits would collide with the block markers, they are laid
    out again with no minimum context, growing context before and then after the change first. If
    every layout collides the last one is returned, and `canonical_answer` refuses it.
    """
    if context_lines < 0:
        raise ValueError("context_lines must be >= 0")
    edits: list[SearchReplace] = []
    for path in sorted(new):
        after, before = new[path], old.get(path)
        if after is None:
            raise ValueError(f"{path}: deleting a file cannot be expressed as SEARCH/REPLACE edits")
        if before == after:
            continue
        if before is None and after == "":
            raise ValueError(
                f"{path}: creating an empty file cannot be expressed (search would equal replace)"
            )
        if "\n" in path:
            raise ValueError(f"{path!r}: a path with a newline cannot be written in a block header")
        # A marker line in the content (say `=======`) breaks parsing only at some places in a search,
        # so when the first layout collides, a tighter or differently grown one may not.
        for context, before_first in dict.fromkeys([(context_lines, True), (0, True), (0, False)]):
            file_edits = _file_edits(path, before or "", after, context, grow_before_first=before_first)
            if not any(_collides(edit) for edit in file_edits):
                break
        edits.extend(file_edits)
    return edits


def _reproduces_strictly(
    old: Mapping[str, str], edits: Sequence[SearchReplace], expected: Mapping[str, str]
) -> bool:
    """Whether strict application of `edits` to `old` gives `expected`. When it does, the paper's
    semantics give the same, so one application checks both: strict mode runs the same steps with
    extra checks, and once each search occurs at exactly one place, replacing all of its occurrences
    changes that one place, as in strict mode. When it does not, `canonical_answer` runs both modes
    in order, for the error message of the first that fails."""
    try:
        return apply_edits(old, edits, strict=True) == expected
    except FormatError:
        return False


def canonical_answer(
    old: Mapping[str, str],
    new: Mapping[str, str],
    *,
    thought: str = DEFAULT_THOUGHT,
    context_lines: int = 1,
) -> str:
    """A well-formed answer whose edits turn `old` into `new`, checked before it is returned.

    The answer is `<think>\\n{thought}\\n</think>\\n<solution>\\n{blocks}\\n</solution>`. Every path in
    `new` whose content differs from `old` gets edits, and paths in `old` only are left alone.
    `context_lines` is the smallest context around each change. Edits get more when that is needed to
    make their search unique. Hunks whose context would overlap become one edit.

    Guarantee: `apply_edits(old, parse_answer(answer).edits, strict=s)` returns exactly the changed
    paths with their `new` contents, for `s` False and True. That is checked by running it. Raises
    ValueError when no representable answer exists or the check fails: no change at all, a deletion,
    a new empty file, a thought that is empty or holds a tag, content holding a tag such as
    `<solution>`, and content whose lines collide with the block markers in every layout tried (a
    `=======` line past the first line of a search, or, past the first line of a replace, a
    `>>>>>>> REPLACE` line followed by a line starting with a fence).
    """
    edits = canonical_edits(old, new, context_lines=context_lines)
    if not edits:
        raise ValueError("old and new contents are identical: there is nothing to answer")
    for edit in edits:
        if _collides(edit):
            raise ValueError(
                f"{edit.path}: the edit's text contains lines that collide with the SEARCH/REPLACE markers, "
                "so it would be parsed differently"
            )
    answer = f"<think>\n{thought}\n</think>\n<solution>\n{edits_to_text(edits)}\n</solution>"
    expected = {path: new[path] for path in dict.fromkeys(edit.path for edit in edits)}
    try:
        parsed = parse_answer(answer)
        if _reproduces_strictly(old, parsed.edits, expected):
            return answer
        for strict in (False, True):
            if apply_edits(old, parsed.edits, strict=strict) != expected:
                raise ValueError(f"the answer does not reproduce the new contents (strict={strict})")
    except FormatError as err:
        raise ValueError(f"the answer would be malformed ({err.kind.value}): {err}") from err
    return answer


# Texts that can change how a written answer parses: a tag (counted over the whole answer; "think>" and
# "solution>" stand for the opening and the closing tag, one scan for both) and a block marker (where a
# lazy group of the block regex may stop). A divider stops a search only as a whole line: as the first
# or last line of a text, or between two newlines (the last needle here).
_SPECIAL = (*dict.fromkeys(tag.lstrip("</") for tag in TAGS), SEARCH_MARKER, REPLACE_MARKER)
_NOT_PLAIN = (*_SPECIAL, f"\n{DIVIDER}\n")


def _contains_any(text: str, needles: tuple[str, ...]) -> bool:
    return any(needle in text for needle in needles)


def _plain_text(text: str) -> bool:
    """No tag or marker in `text`, and no divider line (split on "\n")."""
    if text == DIVIDER or text.startswith(DIVIDER + "\n") or text.endswith("\n" + DIVIDER):
        return False
    return not _contains_any(text, _NOT_PLAIN)


def _plain(path: str, before: str | None, after: str | None) -> bool:
    """A change that `canonical_answer` always expresses: not a deletion or a new empty file, no newline
    in the path, no tag or marker in the path or either text, and no divider line in either text."""
    if after is None or (before is None and after == "") or "\n" in path:
        return False
    return not _contains_any(path, _SPECIAL) and _plain_text(before or "") and _plain_text(after)


def answer_error(old: Mapping[str, str], new: Mapping[str, str]) -> str | None:
    """None when `canonical_answer(old, new)` returns an answer, else the message of the ValueError it
    raises; in the usual case decided without writing the answer (data pipelines check every mined
    row, and most are plain).

    When some file changes and every changed file is plain (`_plain`), an answer always exists: the
    blocks parse back as written (a search ends at the first divider line after it, the written one,
    and a replace at the written closing marker), the answer has each tag once,
    and each edit's search is grown until it occurs exactly once, at worst to the whole file as it reads
    when the edit applies, which occurs exactly once in itself (`_file_edits`). Any other change is
    settled by building the answer and checking it.
    """
    changed = [(path, old.get(path), after) for path, after in new.items() if old.get(path) != after]
    if changed and all(_plain(path, before, after) for path, before, after in changed):
        return None
    try:
        canonical_answer(old, new)
    except ValueError as err:
        return str(err)
    return None
