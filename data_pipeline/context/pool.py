"""The files of one kind in a commit's tree, followed from one PR's base commit to the next by tree
diffs, and the part of them a context pool holds (the first `max_candidate_files` in tree order).

Listing a large repository's pool at every PR costs the pool (thousands of files, most of the context
stage's time on ansible/ansible), though neighbouring PRs' bases differ by a few files. `PoolListing`
keeps the whole listing in tree order and takes in the changes between two commits
(`ObjectReader.changed_files`); what moves in or out of the held part is then the changed files and
the few files its edge passes over, found by bisection. What it holds equals what a full listing cut
at the cap gives (`ContextBuilder._pool`, tested against it over histories visited in every order).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterable


def tree_order_key(path: str) -> bytes:
    """A key that sorts paths as `ObjectReader.matching_files` lists them: each tree's own files by name,
    then its subtrees in git's order (a subtree's name compares with a "/" after it)."""
    *dirs, name = path.encode("utf-8", "surrogateescape").split(b"/")
    return b"".join(b"\x01" + folder + b"/" for folder in dirs) + b"\x00" + name


class PoolListing:
    """path -> blob sha of every file of one kind at `commit`, in tree order, and the edge of the part
    that is held: the first `cap` files but for the modified ones of the PR last asked, which are held
    too when they come before the edge (as `ContextBuilder._pool` reports them)."""

    def __init__(self) -> None:
        self.commit: str | None = None
        self.files: dict[str, str] = {}
        self._order: list[bytes] = []  # tree-order keys of `files`, sorted
        self._path_of: dict[bytes, str] = {}
        self.edge = b""  # the key of the last file held (b"": none)

    def apply(self, commit: str, changes: Iterable[tuple[str, str | None, str | None]]) -> set[str]:
        """Take in the changes from `self.commit` to `commit` ((path, sha before, sha after), None for
        absent); the paths changed."""
        touched: set[str] = set()
        for path, _, sha in changes:
            touched.add(path)
            known = path in self.files
            if sha is None:
                if known:
                    del self.files[path]
                    key = tree_order_key(path)
                    del self._order[bisect_left(self._order, key)]
                    del self._path_of[key]
                continue
            if not known:
                key = tree_order_key(path)
                insort(self._order, key)
                self._path_of[key] = path
            self.files[path] = sha
        self.commit = commit
        return touched

    def held_edge(self, cap: int, modified: Iterable[str]) -> bytes:
        """The key of the last file held for a PR that modifies `modified`: the held part ends at the
        `cap`-th file that is not modified (or at the last file)."""
        positions = sorted(bisect_left(self._order, tree_order_key(p)) for p in modified if p in self.files)
        end = cap
        for at in positions:
            if at < end:
                end += 1
        end = min(end, len(self._order))
        return self._order[end - 1] if end else b""

    def between(self, one: bytes, other: bytes) -> list[str]:
        """The paths whose keys lie after the lower of two edges, up to and including the higher: those
        held on one side of a move of the edge and not on the other."""
        low, high = sorted((one, other))
        start, stop = bisect_right(self._order, low), bisect_right(self._order, high)
        return [self._path_of[key] for key in self._order[start:stop]]

    def is_held(self, path: str, edge: bytes) -> bool:
        return path in self.files and tree_order_key(path) <= edge
