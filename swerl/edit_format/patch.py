"""Git patches from in-memory contents and back.

`build_git_patch` writes the patch a predicted change becomes (for evaluation with `git apply`).
`apply_patch_to_contents` turns a merged PR's patch into the oracle's new file contents. Both keep
content byte for byte: lines are split on "\\n" only, as git does, so CR, form feed, U+2028 and the
like stay inside a line. A missing final newline is written and read as "\\ No newline at end of
file".
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from itertools import accumulate

import unidiff

from swerl.fastdiff import grouped_opcodes

DEV_NULL = "/dev/null"
NO_NEWLINE_MARKER = "\\ No newline at end of file\n"
FILE_MODE = "100644"


# What `str.splitlines` also breaks on in ASCII text (and "\x85", "\u2028", "\u2029" beyond ASCII).
_OTHER_ASCII_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e"


def split_lines(text: str) -> list[str]:
    """Split `text` into lines that keep their "\\n". Only "\\n" ends a line, unlike `str.splitlines`.

    The last line has no "\\n" when the text doesn't end with one. An empty text has no lines.
    """
    if text.isascii() and not any(char in text for char in _OTHER_ASCII_BREAKS):
        # The same lines, about twice as fast (no string built per line): patches are applied to whole
        # files on the mining hot path, and source files almost never hold those characters.
        return text.splitlines(keepends=True)
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


_NEEDS_QUOTING = re.compile(r'[\x00-\x1f\x7f"\\]')


def _check_path(path: str) -> None:
    """Refuse paths that git would quote. We don't write quoted names, so these would be misread."""
    if not path or _NEEDS_QUOTING.search(path):
        raise ValueError(
            f"unsupported path for a git patch (empty, control char, quote, backslash): {path!r}"
        )


def _format_range(start: int, stop: int) -> str:
    """A hunk range the way git writes it: 1-based, ",count" omitted for one line, "N,0" when empty."""
    length = stop - start
    if length == 1:
        return str(start + 1)
    if length == 0:
        return f"{start},0"
    return f"{start + 1},{length}"


def _emit(prefix: str, line: str, out: list[str]) -> None:
    out.append(prefix + line)
    if not line.endswith("\n"):
        out.append("\n" + NO_NEWLINE_MARKER)


def _hunks(old: str, new: str, context_lines: int) -> list[str]:
    a, b = split_lines(old), split_lines(new)
    out: list[str] = []
    for group in grouped_opcodes(a, b, context_lines):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        out.append(f"@@ -{_format_range(i1, i2)} +{_format_range(j1, j2)} @@\n")
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                for line in a[a1:a2]:
                    _emit(" ", line, out)
                continue
            for line in a[a1:a2]:
                _emit("-", line, out)
            for line in b[b1:b2]:
                _emit("+", line, out)
    return out


def _file_header_name(prefix: str, path: str) -> str:
    # git adds a tab after a name containing a space, so that readers know where the name ends.
    return f"{prefix}{path}\t" if " " in path else f"{prefix}{path}"


def build_git_patch(old: Mapping[str, str], new: Mapping[str, str | None], *, context_lines: int = 3) -> str:
    """A git-style unified diff that turns `old` into `new`, for `git apply` in a checkout of `old`.

    Every path in `new` whose content differs from `old.get(path)` gets a section, in sorted order.
    `None` in `new` deletes the file. A path missing from `old` is a new file (mode 100644). Paths only
    in `old` are left alone. Empty files work too: creating or deleting one gives a header without
    hunks, as git writes it. Returns "" when nothing changes.
    """
    sections: list[str] = []
    for path in sorted(new):
        before, after = old.get(path), new[path]
        if before == after:
            continue
        _check_path(path)
        out = [f"diff --git a/{path} b/{path}\n"]
        if before is None:
            out.append(f"new file mode {FILE_MODE}\n")
        elif after is None:
            out.append(f"deleted file mode {FILE_MODE}\n")
        hunks = _hunks(before or "", after or "", context_lines)
        if hunks:
            source = DEV_NULL if before is None else _file_header_name("a/", path)
            target = DEV_NULL if after is None else _file_header_name("b/", path)
            out.append(f"--- {source}\n+++ {target}\n")
            out.extend(hunks)
        sections.append("".join(out))
    return "".join(sections)


class PatchApplyError(ValueError):
    """The patch does not fit the given contents, or it is something we can't apply in memory."""


def parse_patch(patch: str) -> unidiff.PatchSet:
    """Parse a unified diff with `unidiff`.

    Lines are split on "\\n" only, so a CR before it stays in the line's value. A line's value includes
    its "\\n". Raises `unidiff.UnidiffParseError` on text that is not a diff.
    """
    return unidiff.PatchSet.from_string(patch)


_PREFIX = re.compile(r"^[abciow12]/")
_OCTAL = re.compile(r"[0-7]{3}")
_C_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "t": "\t",
    "n": "\n",
    "v": "\v",
    "f": "\f",
    "r": "\r",
    '"': '"',
    "\\": "\\",
}


def _unquote(name: str) -> str:
    """Undo git's C-style quoting of a name. By default git quotes non-ASCII names too, as octal bytes."""
    if not (len(name) >= 2 and name.startswith('"') and name.endswith('"')):
        return name
    body, out, i = name[1:-1], bytearray(), 0
    while i < len(body):
        char = body[i]
        if char != "\\":
            out += char.encode("utf-8")
            i += 1
        elif _OCTAL.fullmatch(body, i + 1, i + 4):
            out.append(int(body[i + 1 : i + 4], 8))
            i += 4
        else:
            out += _C_ESCAPES.get(body[i + 1 : i + 2], body[i + 1 : i + 2]).encode("utf-8")
            i += 2
    return out.decode("utf-8", errors="surrogateescape")


def _clean_path(name: str) -> str | None:
    """A path from a patch header without its quotes and its a/ or b/ prefix. /dev/null gives None."""
    name = _unquote(name)
    if name == DEV_NULL:
        return None
    return _PREFIX.sub("", name, count=1)


def _source_and_target(patched: unidiff.PatchedFile) -> tuple[str | None, str | None]:
    return _clean_path(patched.source_file), _clean_path(patched.target_file)


def patch_paths(patch: str) -> list[str]:
    """The paths a patch touches, in patch order and without repeats. A rename gives both names."""
    paths: list[str] = []
    for patched in parse_patch(patch):
        for path in _source_and_target(patched):
            if path is not None and path not in paths:
                paths.append(path)
    return paths


def _hunk_sides(hunk: unidiff.Hunk) -> tuple[list[str], list[str]]:
    """The hunk's source and target lines, each with its own "\\n", minus the ones marked missing."""
    source: list[str] = []
    target: list[str] = []
    last_kind = None
    for line in hunk:
        if line.line_type == "\\":
            # The line before has no newline at the end of the file, on whichever side(s) it belongs to.
            if last_kind in ("-", " ") and source:
                source[-1] = source[-1].removesuffix("\n")
            if last_kind in ("+", " ") and target:
                target[-1] = target[-1].removesuffix("\n")
            continue
        if line.line_type in ("-", " "):
            source.append(line.value)
        if line.line_type in ("+", " "):
            target.append(line.value)
        if line.line_type in ("-", "+", " "):
            last_kind = line.line_type
    return source, target


def _line_ends(text: str) -> Sequence[int]:
    """Where each line of `text` ends (the offset after it), lines split as `split_lines` splits them.

    Applying a patch to a whole file then costs a few slices instead of a string per line (5x faster on
    the mining hot path, where every PR's files are rebuilt from their base). ASCII text is scanned with
    numpy; other text is split into lines."""
    if text.isascii():
        import numpy as np  # only here: the edit format's other users never need it

        ends = np.flatnonzero(np.frombuffer(text.encode("ascii"), np.uint8) == 10) + 1
        return np.append(ends, len(text)) if text and not text.endswith("\n") else ends
    return list(accumulate(map(len, split_lines(text))))


def _apply_hunks(path: str, before: str, patched: unidiff.PatchedFile) -> str:
    ends = _line_ends(before)
    count = len(ends)

    def lines(first: int, stop: int) -> str:
        """Lines first..stop-1 of `before`, as one slice."""
        stop = min(stop, count)
        return before[int(ends[first - 1]) if first > 0 else 0 : int(ends[stop - 1]) if stop > 0 else 0]

    out: list[str] = []
    cursor = 0
    for hunk in patched:
        source, target = _hunk_sides(hunk)
        start = hunk.source_start - 1 if hunk.source_length > 0 else hunk.source_start
        if start < cursor:
            raise PatchApplyError(f"{path}: hunk at line {hunk.source_start} overlaps the previous hunk")
        if start + len(source) > count or lines(start, start + len(source)) != "".join(source):
            found = split_lines(lines(start, start + 3)) if start < count else []
            raise PatchApplyError(
                f"{path}: hunk @@ -{hunk.source_start},{hunk.source_length} does not match the contents "
                f"(expected {source[:3]!r}..., found {found!r}...)"
            )
        out.append(lines(cursor, start))
        out.extend(target)
        cursor = start + len(source)
    out.append(lines(cursor, count))
    return "".join(out)


def rebase_patch(old: Mapping[str, str], patch: str) -> str:
    """`patch` with each hunk moved to where its source lines are in `old`: the place nearest to the line
    its header names, after the previous hunk, as `git apply` finds a hunk at an offset. Published gold
    patches need this (SWE-bench's were made against a slightly different tree); a patch that fits as
    written comes back unchanged in content. Files not in `old` (new files) are left as they are.
    Raises `PatchApplyError` when a hunk's lines are nowhere after the previous hunk."""
    try:
        parsed = parse_patch(patch)
    except unidiff.UnidiffParseError as err:
        raise PatchApplyError(f"not a valid unified diff: {err}") from err
    for patched in parsed:
        source = _source_and_target(patched)[0]
        if source is None or source not in old:
            continue
        lines = split_lines(old[source])
        cursor = shift = 0
        for hunk in patched:
            want = _hunk_sides(hunk)[0]
            start = _nearest(lines, want, hunk.source_start - 1 if want else hunk.source_start, cursor)
            if start is None:
                raise PatchApplyError(
                    f"{source}: the lines of hunk @@ -{hunk.source_start} are not in the file"
                )
            hunk.source_start = start + 1 if want else start
            hunk.target_start = hunk.source_start + shift
            shift += hunk.target_length - hunk.source_length
            cursor = start + len(want)
    return str(parsed)


def _nearest(lines: Sequence[str], want: Sequence[str], start: int, cursor: int) -> int | None:
    """The index at or after `cursor` nearest to `start` where `want` runs in `lines` (`start` itself for
    a hunk with no source lines), or None."""
    if not want:
        return start
    found = [
        i
        for i in range(cursor, len(lines) - len(want) + 1)
        if lines[i] == want[0] and list(lines[i : i + len(want)]) == list(want)
    ]
    return min(found, key=lambda i: abs(i - start)) if found else None


def apply_patch_to_contents(old: Mapping[str, str], patch: str) -> dict[str, str | None]:
    """Apply a unified diff to in-memory contents. Returns the new content of every path it touches.

    A deleted path maps to None. A rename maps the old name to None and the new name to the patched
    content. Every hunk must match at exactly the line its header gives. No fuzz and no offsets are
    allowed, because a PR's patch fits its base commit exactly. Anything else raises
    `PatchApplyError`: a mismatch, a modified path missing from `old`, a binary patch. A new file
    starts empty, whatever `old` says about its path. A section without hunks (a mode change, an
    empty new file) keeps or gives the path's content unchanged. A deletion without hunks (an empty
    file, or `git diff -D`) is trusted. A deletion with hunks must remove every line. Copies can't be
    told from renames here.
    """
    try:
        parsed = parse_patch(patch)
    except unidiff.UnidiffParseError as err:
        raise PatchApplyError(f"not a valid unified diff: {err}") from err
    return apply_parsed_patch(old, parsed)


def apply_parsed_patch(old: Mapping[str, str], parsed: unidiff.PatchSet) -> dict[str, str | None]:
    """`apply_patch_to_contents` for a patch that `parse_patch` has already parsed, so that a caller who
    needs the parse anyway (to count changed lines) does not parse the same text twice."""
    result: dict[str, str | None] = {}
    for patched in parsed:
        source, target = _source_and_target(patched)
        label = target or source or "?"
        if patched.is_binary_file:
            raise PatchApplyError(f"{label}: binary patches cannot be applied to text contents")
        if source is None:
            before = ""
        elif source in old:
            before = old[source]
        else:
            raise PatchApplyError(f"{source}: the patch changes a file that is not in the given contents")
        after = _apply_hunks(label, before, patched)
        if target is None:
            if after and len(patched) > 0:
                raise PatchApplyError(f"{source}: the file is deleted but its hunks do not remove all of it")
            result[label] = None
            continue
        if source is not None and source != target:
            result[source] = None
        result[target] = after
    return result
