"""Parse a model answer into its thought and its SEARCH/REPLACE edits.

These rules are the format half of the SWE-RL reward. An answer that breaks one of them scores -1, so
they match the paper's reference implementation exactly, odd corners included. Every such corner is
listed in the docstring of the function that has it, and each one has a test in
tests/test_edit_format_parse.py. Don't "fix" one here: the reward, SFT data and Agentless would then
disagree about which answers are well formed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
SOLUTION_OPEN = "<solution>"
SOLUTION_CLOSE = "</solution>"
TAGS = (THINK_OPEN, THINK_CLOSE, SOLUTION_OPEN, SOLUTION_CLOSE)

SEARCH_MARKER = "<<<<<<< SEARCH"
DIVIDER = "======="
REPLACE_MARKER = ">>>>>>> REPLACE"

# One fenced block holds one edit. The groups are path, search and replace. `.` does not match a
# newline, so the language tag and the path each stay on their own line. The path is not stripped, and
# every newline is a bare "\n", so an answer written with CRLF line endings yields no block at all.
# Search and replace are lazy: each stops at the first divider or closing marker that follows it.
EDIT_BLOCK_RE = re.compile(
    r"```.*?\n### (.*)\n"
    + re.escape(SEARCH_MARKER)
    + r"\n([\s\S]*?)\n"
    + re.escape(DIVIDER)
    + r"\n([\s\S]*?)\n"
    + re.escape(REPLACE_MARKER)
    + r"\n```"
)


class FormatErrorKind(StrEnum):
    """Why an answer is malformed. The values are stable strings, because reward logs record them."""

    TAG_COUNT = "tag_count"
    EMPTY_THOUGHT = "empty_thought"
    NO_BLOCKS = "no_blocks"
    SEARCH_NOT_FOUND = "search_not_found"
    SEARCH_EQUALS_REPLACE = "search_equals_replace"
    UNKNOWN_PATH = "unknown_path"
    AMBIGUOUS_SEARCH = "ambiguous_search"


class FormatError(ValueError):
    """A malformed answer. `kind` says which rule it broke; `path` names the file when one is involved.

    It subclasses ValueError so that callers which only want to skip bad answers can catch that.
    """

    def __init__(self, kind: FormatErrorKind, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.path = path

    def __reduce__(self) -> tuple[object, ...]:
        # Keep the error picklable. The batch reward scorer sends results between processes.
        return (_rebuild_format_error, (self.kind, self.message, self.path))


def _rebuild_format_error(kind: FormatErrorKind, message: str, path: str | None) -> FormatError:
    return FormatError(kind, message, path=path)


@dataclass(frozen=True)
class SearchReplace:
    """One edit: in file `path`, replace the text `search` with `replace`. See `apply_edits`."""

    path: str
    search: str
    replace: str


@dataclass(frozen=True)
class ParsedAnswer:
    """A well-formed answer: the stripped thought, the stripped solution and its edits in textual order."""

    thought: str
    solution: str
    edits: tuple[SearchReplace, ...]


def extract_thought_solution(text: str) -> tuple[str, str]:
    """Return `(thought, solution)` from an answer shaped `<think>...</think> <solution>...</solution>`.

    The rules, exactly as the paper applies them:

    * Each of the four tags must occur exactly once in the whole text, or the answer is malformed
      (TAG_COUNT). That counts mentions of a tag inside the thought or inside code too.
    * thought = the text after `<think>`, cut at the first `</think>` after it, then stripped. The
      same goes for the solution. A thought that is empty after stripping is malformed (EMPTY_THOUGHT).
      An empty solution is not rejected here. `parse_answer` rejects it because it has no edits.

    Quirk: the order of the tags is never checked. `<solution>S</solution><think>T</think>` is
    accepted. When a closing tag comes before its opening tag, the part runs to the end of the text,
    so `</think>x<think>T` gives the thought `T`.
    """
    for tag in TAGS:
        count = text.count(tag)
        if count != 1:
            raise FormatError(FormatErrorKind.TAG_COUNT, f"{tag} occurs {count} times, expected exactly once")
    thought = text.split(THINK_OPEN)[1].split(THINK_CLOSE)[0].strip()
    solution = text.split(SOLUTION_OPEN)[1].split(SOLUTION_CLOSE)[0].strip()
    if not thought:
        raise FormatError(FormatErrorKind.EMPTY_THOUGHT, "the thought between <think> and </think> is empty")
    return thought, solution


def parse_edits(solution: str) -> list[SearchReplace]:
    """Return every SEARCH/REPLACE block in `solution`, in textual order. This never raises.

    Each block has to be written exactly like this (the language tag may be empty or anything without
    a newline):

        ```python
        ### path/to/file.py
        <<<<<<< SEARCH
        lines to find
        =======
        lines to put instead
        >>>>>>> REPLACE
        ```

    Quirks:

    * The path is the rest of the `### ` line and is not stripped. A trailing space stays part of it.
    * The search ends at the first "\\n=======\\n" after the SEARCH marker. A search that itself has a
      `=======` line after its first line is therefore cut short. The replace ends at the first
      "\\n>>>>>>> REPLACE\\n```".
    * An empty search or replace is written as one blank line. A SEARCH marker followed right away by
      `=======` is not an empty search: the search runs on to the next "\\n=======\\n", which may be
      in a later block, and then two blocks parse as one edit.
    * Only "\\n" line breaks match. With CRLF line endings nothing parses.
    * Matches don't overlap and are found left to right. A malformed block is not always just skipped,
      because a lazy group can run on into the next block.
    """
    return [SearchReplace(path, search, replace) for path, search, replace in EDIT_BLOCK_RE.findall(solution)]


def parse_answer(text: str) -> ParsedAnswer:
    """Parse a whole answer. Raises FormatError when it is malformed.

    Besides the rules of `extract_thought_solution`, a solution with no SEARCH/REPLACE block is
    malformed (NO_BLOCKS). Whether the edits apply is checked by `apply_edits`, not here.
    """
    thought, solution = extract_thought_solution(text)
    edits = parse_edits(solution)
    if not edits:
        raise FormatError(FormatErrorKind.NO_BLOCKS, "the solution contains no SEARCH/REPLACE block")
    return ParsedAnswer(thought=thought, solution=solution, edits=tuple(edits))
