"""The lines each extracted change removed and added, so that the context stage counts the lines of a new
file version from the version before it instead of splitting the whole file again.

The context stage keeps the line counts of the last version of every file it indexed (`context.
VersionStore`) and derives a new version's facts from the lines that differ. Counting a version's lines
(`Counter(text.split("\\n"))`) was most of the cost of indexing it, though the version usually differs
from one already counted by the few lines of a PR that this process has just extracted. Extraction
records those lines here (`LineEdges.record`), per file version it rebuilt from its patch and verified
against git's blob id; the context stage follows the recorded changes from the version it knows to the
one it needs (`LineEdges.chain`). Any gap (a commit this process did not extract, a test file, an evicted
record) falls back to counting, which gives the same counts: what a process extracted before changes how
fast it indexes, never what it computes.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Sequence

import unidiff

# A change's lines split as `str.split("\n")` splits the file: each line without its newline.
Delta = tuple[list[str], list[str]]


def segment_delta(patched: unidiff.PatchedFile, old_text: str, new_text: str) -> Delta:
    """(removed, added): the pieces of `old_text.split("\\n")` the patch removes and the pieces of
    `new_text.split("\\n")` it adds, as multisets, for a patch that turns `old_text` into `new_text`.

    A piece is a line without its newline; the empty piece after a final newline (or of an empty text)
    comes and goes when the patch changes whether the text ends with a newline."""
    removed: list[str] = []
    added: list[str] = []
    for hunk in patched:
        for line in hunk:
            # A line marked "\ No newline at end of file" is the same piece with or without its newline.
            if line.line_type == "-":
                removed.append(line.value.removesuffix("\n"))
            elif line.line_type == "+":
                added.append(line.value.removesuffix("\n"))
    old_open, new_open = _ends_open(old_text), _ends_open(new_text)
    if old_open and not new_open:
        removed.append("")
    elif new_open and not old_open:
        added.append("")
    return removed, added


def _ends_open(text: str) -> bool:
    """Whether `text.split("\\n")` ends with an empty piece."""
    return not text or text.endswith("\n")


def apply_deltas(lines: Counter[str], deltas: Sequence[Delta]) -> bool:
    """Move `lines` (piece counts) through `deltas` in order, in place; False when a delta removes a piece
    that is not there (the counts are then unusable: the caller counts the text instead)."""
    for removed, added in deltas:
        for piece in removed:
            left = lines[piece] - 1
            if left > 0:
                lines[piece] = left
            elif left == 0:
                del lines[piece]
            else:
                return False
        lines.update(added)
    return True


class LineEdges:
    """(repository, path, new blob sha) -> (old blob sha, delta), most recent records kept within a byte
    budget (the text of the pieces held)."""

    # Steps followed back from a wanted version: a context needs the versions at its base commit, a few
    # PRs after the versions indexed for the row before it.
    MAX_CHAIN = 16

    def __init__(self, limit_bytes: int) -> None:
        self.limit = limit_bytes
        self._items: OrderedDict[tuple[str, str, str], tuple[str, Delta, int]] = OrderedDict()
        self._bytes = 0

    def record(self, repo: str, path: str, old_sha: str, new_sha: str, delta: Delta) -> None:
        key = (repo, path, new_sha)
        size = sum(map(len, delta[0])) + sum(map(len, delta[1])) + 64 * (len(delta[0]) + len(delta[1]) + 1)
        previous = self._items.pop(key, None)
        if previous is not None:
            self._bytes -= previous[2]
        self._items[key] = (old_sha, delta, size)
        self._bytes += size
        while self._bytes > self.limit and self._items:
            _, (*_, dropped) = self._items.popitem(last=False)
            self._bytes -= dropped

    def chain(self, repo: str, path: str, from_sha: str, to_sha: str) -> list[Delta] | None:
        """The deltas that lead from version `from_sha` of `path` to version `to_sha`, oldest first, or
        None when the records do not connect them."""
        deltas: list[Delta] = []
        sha = to_sha
        while sha != from_sha:
            found = self._items.get((repo, path, sha))
            if found is None or len(deltas) == self.MAX_CHAIN:
                return None
            sha, delta, _ = found
            deltas.append(delta)
        deltas.reverse()
        return deltas


# Per process, shared by extraction (which records) and the context stage (which reads), like the
# version store; ~8 MB of changed lines is thousands of PRs.
EDGES = LineEdges(8 << 20)
