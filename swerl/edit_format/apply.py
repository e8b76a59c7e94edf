"""Apply SEARCH/REPLACE edits to file contents held in memory.

The default semantics are the paper's. The reward uses them to turn an answer into new file contents,
so they decide which answers score -1. They are reproduced exactly, quirks included (see
`apply_edits`). `strict=True` adds checks that make an edit mean one thing only. Agentless and data
validation can use that, but it is never the default.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from swerl.edit_format.parse import FormatError, FormatErrorKind, SearchReplace


def group_edits_by_path(edits: Sequence[SearchReplace]) -> dict[str, list[SearchReplace]]:
    """Group edits by path. Paths keep the order they first appear in, and edits keep their order."""
    grouped: dict[str, list[SearchReplace]] = {}
    for edit in edits:
        grouped.setdefault(edit.path, []).append(edit)
    return grouped


def count_occurrences(text: str, needle: str) -> int:
    """Count the positions where `needle` starts in `text`, overlaps included.

    `str.count` skips overlapping matches. In "\\na\\na\\na" it counts "\\na\\na" once, though it starts
    at two places. Strict mode must see both, so it counts positions instead.
    """
    count, start = 0, text.find(needle)
    while start != -1:
        count += 1
        start = text.find(needle, start + 1)
    return count


def apply_edits(
    code_context: Mapping[str, str], edits: Sequence[SearchReplace], *, strict: bool = False
) -> dict[str, str]:
    """Return the new content of every path that has at least one edit, and of no other path.

    Paper semantics (the default), for each path in order of first appearance:

    * The content starts as "\\n" + `code_context.get(path, "")`. A path missing from the context is
      therefore an empty new file, and an empty search on it creates the file with the replacement text.
    * Edits to the path apply one after another, in order. A later search sees what earlier edits
      produced and may match text they inserted.
    * An edit whose search equals its replace is malformed (SEARCH_EQUALS_REPLACE). That includes two
      empty texts.
    * Search and replace each get "\\n" prepended. If "\\n" + search does not occur, the edit is
      malformed (SEARCH_NOT_FOUND). Otherwise every non-overlapping occurrence is replaced.
    * At the end the one leading "\\n" is removed again.

    What follows from that: a search can only start at the start of a line, but it may end in the
    middle of one ("def f" matches the line "def foo():"). A search found twice changes both places.
    An empty search matches every line break, so on an existing file it puts the replacement at the
    start of every line.

    `strict=True` adds three checks:

    * UNKNOWN_PATH: the path is not in `code_context`. One exception: the first edit of a new path may
      have an empty search, which creates the file. The prompt offers that, and `canonical_answer`
      writes new files that way.
    * AMBIGUOUS_SEARCH: "\\n" + search does not start at exactly one position. Overlapping matches count
      (see `count_occurrences`), so exactly one place is ever changed.
    * The paper's checks above still apply.
    """
    new_contents: dict[str, str] = {}
    for path, path_edits in group_edits_by_path(edits).items():
        if strict and path not in code_context and path_edits[0].search != "":
            raise FormatError(
                FormatErrorKind.UNKNOWN_PATH,
                f"{path!r} is not among the given files (only an empty search may create a file)",
                path=path,
            )
        content = "\n" + code_context.get(path, "")
        for edit in path_edits:
            content = _apply_one(content, edit, strict=strict)
        new_contents[path] = content[1:]
    return new_contents


def _apply_one(content: str, edit: SearchReplace, *, strict: bool) -> str:
    """Apply one edit to newline-prefixed `content`. The rules are in `apply_edits`."""
    if edit.search == edit.replace:
        raise FormatError(
            FormatErrorKind.SEARCH_EQUALS_REPLACE,
            f"an edit to {edit.path!r} has identical search and replace texts",
            path=edit.path,
        )
    search = "\n" + edit.search
    if search not in content:
        raise FormatError(
            FormatErrorKind.SEARCH_NOT_FOUND,
            f"search text not found in {edit.path!r}:\n{edit.search}",
            path=edit.path,
        )
    if strict:
        found = count_occurrences(content, search)
        if found != 1:
            raise FormatError(
                FormatErrorKind.AMBIGUOUS_SEARCH,
                f"search text occurs {found} times in {edit.path!r}, expected exactly once:\n{edit.search}",
                path=edit.path,
            )
    return content.replace(search, "\n" + edit.replace)
