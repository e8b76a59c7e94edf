"""Read mined repositories without ever running anything from them.

Mined repositories are untrusted. Everything here reads git objects directly: commit lists and patches
come from `git log` (with external diff drivers and textconv filters off), file and tree contents from
one persistent `git cat-file --batch` per repository (no filters, no textconv: raw objects). Nothing is
checked out, so no hook, smudge/clean filter or build step can run, and a symlink is only ever a blob
holding a path: we skip it instead of following it.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from pathlib import Path
from typing import Self

from swerl.git.command import GitError, git_argv, run_git, safe_env

REGULAR_MODES = frozenset({"100644", "100755"})
SYMLINK_MODE = "120000"
SUBMODULE_MODE = "160000"
NULL_SHA = "0" * 40
# An entry of a raw tree object: octal mode, space, name, NUL, 20-byte binary sha.
_TREE_ENTRY = re.compile(rb"([^ ]*) ([^\0]*)\0(.{20})", re.DOTALL)
# Previous entries looked at, from the next one on, for the bytes at the current position of a tree.
_RESYNC = 4
# A tree entry's (mode, sha) where a tree has no entry of that name (`ObjectReader.changed_files`).
_ABSENT = ("", "")


def parse_commit_object(data: bytes) -> tuple[tuple[str, ...], str]:
    """(parents, message) of a raw commit object. The message is decoded from the encoding its header
    declares (UTF-8 when none), undecodable bytes replaced: a legacy message is read, never fatal."""
    header, _, message = data.partition(b"\n\n")
    parents, encoding = [], "utf-8"
    for line in header.split(b"\n"):
        if line.startswith(b"parent "):
            parents.append(line[7:].decode("ascii"))
        elif line.startswith(b"encoding "):
            encoding = line[9:].decode("ascii", "replace").strip()
    try:
        text = message.decode(encoding, "replace")
    except LookupError:  # an encoding Python does not know
        text = message.decode("utf-8", "replace")
    return tuple(parents), text


def blob_id(data: bytes) -> str:
    """The sha git names a blob with these contents by (`git hash-object`)."""
    digest = hashlib.sha1(b"blob %d\0" % len(data), usedforsecurity=False)
    digest.update(data)
    return digest.hexdigest()


# Pipes this process opened and has not closed (see `_disown_in_child`).
_OPEN_PIPES: weakref.WeakSet[GitPipe] = weakref.WeakSet()


def _disown_in_child() -> None:
    """After a fork, in the child: let go of the parent's git pipes. A forked worker would otherwise hold
    a copy of each pipe's write end, so the parent's git would never see the end of its input, and the
    parent, closing its reader and waiting for git to exit, would wait forever (a `--local` listing
    reads commits while the workers fork). Each inherited end is pointed at /dev/null rather than closed,
    so that the child's copies of the file objects stay valid and never flush into the parent's pipe."""
    null = os.open(os.devnull, os.O_RDWR)
    try:
        for pipe in list(_OPEN_PIPES):
            for stream in (pipe._proc.stdin, pipe._proc.stdout):
                if stream is not None and not stream.closed:
                    os.dup2(null, stream.fileno())
            pipe._disowned = True
    finally:
        os.close(null)
    _OPEN_PIPES.clear()


os.register_at_fork(after_in_child=_disown_in_child)


class GitPipe:
    """One long-lived git process fed object names on stdin (`cat-file --batch`, `diff-tree --stdin`).

    Starting git per request would cost more than most answers, so readers keep one process per
    repository and worker. `alive` lets a caller replace a process that was ended on purpose (a reader
    abandoned mid-answer kills it, so a stale answer can never be read as the next one's). A process
    forked from the owner cannot use the pipe (`_disown_in_child`): it is not `alive` there.
    """

    def __init__(self, git_dir: Path, *args: str) -> None:
        self._disowned = False
        self._proc = subprocess.Popen(
            git_argv(git_dir, *args),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=safe_env(),
        )
        _OPEN_PIPES.add(self)

    def alive(self) -> bool:
        return not self._disowned and self._proc.poll() is None

    def close(self) -> None:
        _OPEN_PIPES.discard(self)
        if not self._disowned and self._proc.poll() is None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ObjectReader(GitPipe):
    """Objects of one bare repository through one persistent `git cat-file --batch` process.

    Requests are pipelined: `blobs` writes a batch of shas and then reads the answers, so a PR's files
    cost one round trip, not one each (a round trip is a context switch to git and back, which under
    load costs more than reading the blob). Blobs are cached by sha within a byte budget, because the
    merged version of a file in one PR is the base version of the next PR that touches it; trees are
    cached by sha (most subtrees are shared between neighbouring commits), and so are the lists of a
    subtree's files of one kind (`matching_files`), so listing the files of commit after commit costs
    little more than reading the trees that changed.
    """

    # At most this many shas per write: 41 bytes each stays far below a pipe's buffer, so git can never
    # be blocked writing answers while we are still blocked writing questions.
    _BATCH = 512

    def __init__(
        self,
        git_dir: Path,
        tree_cache_size: int = 4096,
        blob_cache_bytes: int = 64 << 20,
        listing_cache_entries: int = 1 << 18,
    ) -> None:
        self.git_dir = git_dir
        self.tree_cache_size = tree_cache_size
        self.blob_cache_bytes = blob_cache_bytes
        self._trees: OrderedDict[str, list[tuple[str, str, str]]] = OrderedDict()
        # path -> (raw entries, entries) of the tree last parsed at that path (see `_parse_tree`).
        self._last_at: dict[str, tuple[list[bytes], list[tuple[str, str, str]]]] = {}
        self._commit_trees: OrderedDict[str, str] = OrderedDict()
        self._blobs: OrderedDict[str, bytes] = OrderedDict()
        self._blob_bytes = 0
        self.listing_cache_entries = listing_cache_entries
        self._matches: OrderedDict[tuple[str, str, Hashable], list[tuple[str, str]]] = OrderedDict()
        self._judged: dict[tuple[str, Hashable], dict[tuple[str, str, str], tuple[str, str] | None]] = {}
        self._matched = 0
        self._verdicts = 0  # entries of `_judged`, over all its keys
        super().__init__(git_dir, "cat-file", "--batch")

    def _request(self, refs: list[str]) -> list[tuple[str, bytes] | None]:
        """(type, data) per ref, None where git says it is missing; one write, then every answer."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        out: list[tuple[str, bytes] | None] = []
        for start in range(0, len(refs), self._BATCH):
            chunk = refs[start : start + self._BATCH]
            for ref in chunk:
                if not ref or any(c in ref for c in " \n\t"):
                    raise GitError(f"bad object name {ref!r}")
            self._proc.stdin.write("".join(ref + "\n" for ref in chunk).encode())
            self._proc.stdin.flush()
            for _ in chunk:
                header = self._proc.stdout.readline()
                if not header:
                    raise GitError("git cat-file exited")
                parts = header.split()
                if len(parts) != 3:  # "<ref> missing" / "<ref> ambiguous"
                    out.append(None)
                    continue
                size = int(parts[2])
                data = self._proc.stdout.read(size + 1)[:size]
                out.append((parts[1].decode("ascii"), data))
        return out

    def read(self, ref: str) -> tuple[str, bytes]:
        """(type, data) of an object; raises GitError when it is missing."""
        found = self._request([ref])[0]
        if found is None:
            raise GitError(f"missing object {ref}")
        return found

    def _remember(self, sha: str, data: bytes) -> None:
        if len(data) > self.blob_cache_bytes // 4:
            return
        self._blobs[sha] = data
        self._blob_bytes += len(data)
        while self._blob_bytes > self.blob_cache_bytes:
            _, old = self._blobs.popitem(last=False)
            self._blob_bytes -= len(old)

    def blobs(self, shas: Iterable[str]) -> dict[str, bytes]:
        """The contents of many blobs, cached ones from memory and the rest in one pipelined batch."""
        found: dict[str, bytes] = {}
        wanted: list[str] = []
        for sha in dict.fromkeys(shas):
            cached = self._blobs.get(sha)
            if cached is not None:
                self._blobs.move_to_end(sha)
                found[sha] = cached
            else:
                wanted.append(sha)
        for sha, answer in zip(wanted, self._request(wanted), strict=True):
            if answer is None:
                raise GitError(f"missing object {sha}")
            if answer[0] != "blob":
                raise GitError(f"{sha} is a {answer[0]}, not a blob")
            found[sha] = answer[1]
            self._remember(sha, answer[1])
        return found

    def offer(self, sha: str, data: bytes) -> bool:
        """Cache contents computed elsewhere (a file rebuilt from its patch) as blob `sha`, if they are
        that blob: True when they hash to `sha`, so that the caller need not ask git for them."""
        if blob_id(data) != sha:
            return False
        self._remember(sha, data)
        return True

    def blob(self, sha: str) -> bytes:
        return self.blobs([sha])[sha]

    def _parse_tree(self, sha: str, data: bytes, path: str) -> list[tuple[str, str, str]]:
        """The entries (mode, name, sha) of tree object `data`, found at `path` of a commit.

        A commit's tree at a path differs from the one read there before (usually its parent's) in an
        entry or two, so each entry of the previous one whose bytes recur at the current position is
        taken as parsed; only the others go through the regular expression (~0.1 against ~0.7 us an
        entry). Every entry is still checked byte for byte, so what is returned never depends on what
        was read before, and the entries must cover the object exactly."""
        previous_raw, previous = self._last_at.get(path, ((), ()))
        raws: list[bytes] = []
        entries: list[tuple[str, str, str]] = []
        pos, i, end, known = 0, 0, len(data), len(previous_raw)
        while pos < end:
            # The next previous entry, or one a few places on (entries removed since), when its bytes
            # are here; otherwise the entry here is new or changed.
            j, stop = i, min(i + _RESYNC, known)
            while j < stop and not data.startswith(previous_raw[j], pos):
                j += 1
            if j < stop:
                raws.append(previous_raw[j])
                entries.append(previous[j])
                pos += len(previous_raw[j])
                i = j + 1
                continue
            match = _TREE_ENTRY.match(data, pos)
            if match is None:
                raise GitError(f"tree {sha} is malformed")
            mode, name, raw_sha = match.groups()
            entry = (
                mode.decode("ascii").rjust(6, "0"),
                name.decode("utf-8", "surrogateescape"),
                raw_sha.hex(),
            )
            raws.append(match.group())
            entries.append(entry)
            pos = match.end()
            if i < known and previous[i][1] == entry[1]:
                i += 1  # the same name with another mode or object: that entry changed
        self._last_at.pop(path, None)  # most recently read last: the oldest path is dropped first
        self._last_at[path] = (raws, entries)
        if len(self._last_at) > self.tree_cache_size:
            self._last_at.pop(next(iter(self._last_at)))
        self._trees[sha] = entries
        if len(self._trees) > self.tree_cache_size:
            self._trees.popitem(last=False)
        return entries

    def _tree(self, sha: str, path: str) -> list[tuple[str, str, str]]:
        cached = self._trees.get(sha)
        if cached is not None:
            self._trees.move_to_end(sha)
            return cached
        kind, data = self.read(sha)
        if kind != "tree":
            raise GitError(f"{sha} is a {kind}, not a tree")
        return self._parse_tree(sha, data, path)

    def _remember_commit(self, commit: str, data: bytes) -> str:
        if not data.startswith(b"tree "):
            raise GitError(f"{commit} is not a commit")
        tree = data[5:45].decode("ascii")
        self._commit_trees[commit] = tree
        if len(self._commit_trees) > self.tree_cache_size:
            self._commit_trees.popitem(last=False)
        return tree

    def commit_objects(self, shas: Iterable[str]) -> dict[str, bytes]:
        """The raw object of each of `shas` that is a commit in the repository; the others (force-pushed
        away, never fetched, deleted, not a commit, not a name git could read from a line) are left out.
        Asked on this reader's pipe: no `git` process of its own per shard."""
        wanted = [sha for sha in dict.fromkeys(shas) if sha and not any(c in sha for c in " \n\t")]
        return {
            sha: answer[1]
            for sha, answer in zip(wanted, self._request(wanted), strict=True)
            if answer is not None and answer[0] == "commit"
        }

    def commit_parents(self, shas: Iterable[str]) -> dict[str, tuple[str, ...]]:
        """The parents of each of `shas` that is a commit (see `commit_objects`)."""
        return {sha: parse_commit_object(data)[0] for sha, data in self.commit_objects(shas).items()}

    def commit_tree(self, commit: str) -> str:
        cached = self._commit_trees.get(commit)
        if cached is not None:
            return cached
        kind, data = self.read(commit)
        if kind != "commit":
            raise GitError(f"{commit} is not a commit")
        return self._remember_commit(commit, data)

    def prefetch_trees(self, commits: Iterable[str]) -> None:
        """Read the trees of many commits level by level, one pipelined batch per level of the deepest
        tree, instead of one round trip per tree per commit. Missing objects are left for the caller's
        own read to report."""
        wanted = [c for c in dict.fromkeys(commits) if c not in self._commit_trees]
        frontier: dict[str, str] = {}  # tree sha -> its path (the first met, for `_parse_tree`)
        for commit, answer in zip(wanted, self._request(wanted), strict=True):
            if answer is not None and answer[0] == "commit" and answer[1].startswith(b"tree "):
                frontier.setdefault(self._remember_commit(commit, answer[1]), "")
        seen: set[str] = set()
        while frontier:
            batch = [t for t in frontier if t not in self._trees and t not in seen]
            seen.update(batch)
            paths, frontier = frontier, {}
            for sha, answer in zip(batch, self._request(batch), strict=True):
                if answer is None or answer[0] != "tree":
                    continue
                for mode, name, child in self._parse_tree(sha, answer[1], paths[sha]):
                    if mode == "040000":
                        frontier.setdefault(child, f"{paths[sha]}{name}/")
            # A tree already cached is not descended into: its subtrees were read with it, and
            # `matching_files` reads on demand any that the cache has dropped since.

    def matching_files(
        self, commit: str, key: Hashable, keep: Callable[[str], bool]
    ) -> list[tuple[str, str]]:
        """(path, blob sha) of the regular files of a commit whose path `keep` accepts, depth first in
        git's order (a tree's own files, then each subtree's); symlinks and submodules are never files.
        Kept per subtree under `key`, which must name `keep` (one key, one predicate): a commit differs
        from its neighbours in a few subtrees, so its list costs the entries of those only, and a caller
        that needs one kind of file (a context pool) never walks the others. The list is shared with
        the cache: read it, never change it."""
        return self._matching(self.commit_tree(commit), "", key, keep)

    def _matching(
        self, tree: str, prefix: str, key: Hashable, keep: Callable[[str], bool]
    ) -> list[tuple[str, str]]:
        cache_key = (tree, prefix, key)
        cached = self._matches.get(cache_key)
        if cached is not None:
            self._matches.move_to_end(cache_key)
            return cached
        found: list[tuple[str, str]] = []
        subtrees = []
        # Each entry's verdict, by entry: a tree read again at this path shares most entries with the
        # last one (`_parse_tree`), so most are looked up, not joined into a path and judged again.
        # Bounded over all directories and kinds together (a long history meets ever more of both):
        # past `listing_cache_entries` verdicts, all are dropped and judged again as met.
        if self._verdicts > self.listing_cache_entries:
            self._judged.clear()
            self._verdicts = 0
        seen = self._judged.setdefault((prefix, key), {})
        for entry in self._tree(tree, prefix):
            mode, name, sha = entry
            if mode == "040000":
                subtrees.append((sha, f"{prefix}{name}/"))
                continue
            verdict = seen.get(entry, False)
            if verdict is False:
                path = prefix + name
                verdict = seen[entry] = (path, sha) if mode in REGULAR_MODES and keep(path) else None
                self._verdicts += 1
            if verdict is not None:
                found.append(verdict)
        for sha, path in subtrees:
            found += self._matching(sha, path, key, keep)
        self._matches[cache_key] = found
        self._matched += len(found) + 1
        while self._matched > self.listing_cache_entries:
            _, dropped = self._matches.popitem(last=False)
            self._matched -= len(dropped) + 1
        return found

    def changed_files(
        self, old_commit: str | None, new_commit: str, key: Hashable, keep: Callable[[str], bool]
    ) -> list[tuple[str, str | None, str | None]]:
        """(path, blob sha before, blob sha after) of each regular file `keep` accepts that differs
        between two commits (None where a side has no such file), in no particular order; every such
        file of `new_commit` when `old_commit` is None. Subtrees with the same object on both sides are
        never read, so following a pool from one PR's base to the next costs the trees that changed
        between them, not the pool (`matching_files` rebuilds the list of each changed subtree, whose
        files may be most of the pool). `key` and `keep` as in `matching_files`."""
        new_tree = self.commit_tree(new_commit)
        if old_commit is None:
            return [(path, None, sha) for path, sha in self._matching(new_tree, "", key, keep)]
        found: list[tuple[str, str | None, str | None]] = []
        self._changed(self.commit_tree(old_commit), new_tree, "", key, keep, found)
        return found

    def _changed(
        self,
        old_tree: str,
        new_tree: str,
        prefix: str,
        key: Hashable,
        keep: Callable[[str], bool],
        found: list[tuple[str, str | None, str | None]],
    ) -> None:
        if old_tree == new_tree:
            return
        # The entries of either tree only (a set operation in C: a changed tree such as a large
        # package's differs from its last version in an entry or two), by name on each side.
        before_entries = set(self._tree(old_tree, prefix))
        old: dict[str, tuple[str, str]] = {}
        new: dict[str, tuple[str, str]] = {}
        for entry in before_entries.symmetric_difference(self._tree(new_tree, prefix)):
            mode, name, sha = entry
            (old if entry in before_entries else new)[name] = (mode, sha)
        for name in old.keys() | new.keys():
            before, after = old.get(name, _ABSENT), new.get(name, _ABSENT)
            if before == after:
                continue
            path = prefix + name
            # A name may be a file on one side and a directory on the other: each side is taken apart.
            if before[0] == "040000" and after[0] == "040000":
                self._changed(before[1], after[1], f"{path}/", key, keep, found)
                continue
            if before[0] == "040000":
                found += [(p, s, None) for p, s in self._matching(before[1], f"{path}/", key, keep)]
            if after[0] == "040000":
                found += [(p, None, s) for p, s in self._matching(after[1], f"{path}/", key, keep)]
            old_sha = before[1] if before[0] in REGULAR_MODES else None
            new_sha = after[1] if after[0] in REGULAR_MODES else None
            if old_sha != new_sha and keep(path):
                found.append((path, old_sha, new_sha))


def resolve(git_dir: Path, ref: str) -> str:
    """The commit sha a ref points to now."""
    return run_git(git_dir, "rev-parse", "--verify", f"{ref}^{{commit}}").decode().strip()
