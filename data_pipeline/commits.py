"""Commits and their patches, streamed from one `git log` process per repository and shard.

Spawning git once per commit would cost more than the diff itself on a long history, so both the commit
listing (for `--local`) and the patch extraction read one long `git log` stream and split it into
commits as it arrives. Memory holds one commit at a time. Merges are diffed against their first parent,
which is the base branch, so a merge commit and a squash commit both give the PR's change. Renames are
not detected: a rename is a deletion plus an addition, which keeps every path's patch self-contained.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from data_pipeline.gitstore import GitError, git_argv, safe_env

_RECORD = b"\x1e"
_FIELD = "\x1f"
_CHUNK = 1 << 20


def _records(argv: list[str], stdin_lines: Iterable[str] | None = None) -> Iterator[bytes]:
    """Run git and yield the output split on the record separator, one record at a time."""
    with subprocess.Popen(
        argv,
        stdin=subprocess.PIPE if stdin_lines is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=safe_env(),
    ) as proc:
        if stdin_lines is not None:
            assert proc.stdin is not None
            # Revisions are short; writing them all before reading cannot fill the pipe for long.
            proc.stdin.write("".join(line + "\n" for line in stdin_lines).encode())
            proc.stdin.close()
        assert proc.stdout is not None
        buffer = b""
        while chunk := proc.stdout.read(_CHUNK):
            buffer += chunk
            *complete, buffer = buffer.split(_RECORD)
            yield from (record for record in complete if record)
        if buffer:
            yield buffer
        stderr = proc.stderr.read() if proc.stderr else b""
        if proc.wait() != 0:
            raise GitError(f"git log failed: {stderr.decode('utf-8', 'replace').strip()}")


@dataclass(frozen=True)
class CommitInfo:
    """A commit of the history as the `--local` source sees it."""

    sha: str
    parents: tuple[str, ...]
    author_name: str
    author_email: str
    authored_at: str
    message: str


def first_parent_history(git_dir: Path, head: str) -> Iterator[CommitInfo]:
    """The commits on the first-parent line of `head`, oldest first (a stable order for sharding).

    `--reverse` makes git hold the list of commits, not their contents: a few dozen bytes per commit.
    """
    fmt = "%x1e%H%x1f%P%x1f%an%x1f%ae%x1f%aI%x1f%B"
    argv = git_argv(git_dir, "log", "--first-parent", "--reverse", f"--format={fmt}", head, "--")
    for record in _records(argv):
        text = record.decode("utf-8", "replace")
        sha, parents, name, email, date, message = text.split(_FIELD, 5)
        yield CommitInfo(sha, tuple(parents.split()), name, email, date, message.strip("\n"))


@dataclass
class FileChange:
    """One path changed by a commit: git's raw record plus that path's part of the patch (bytes)."""

    path: str
    status: str
    old_mode: str
    new_mode: str
    old_sha: str
    new_sha: str
    patch: bytes = b""
    quoted: bool = False

    @property
    def binary(self) -> bool:
        return b"\nBinary files " in self.patch or b"\nGIT binary patch\n" in self.patch


@dataclass
class CommitPatch:
    """A commit diffed against its first parent."""

    sha: str
    parent: str | None
    changes: list[FileChange] = field(default_factory=list)


def _parse_raw(line: str) -> FileChange:
    meta, path = line.split("\t", 1)
    old_mode, new_mode, old_sha, new_sha, status = meta[1:].split(" ")
    quoted = path.startswith('"')
    return FileChange(path, status[:1], old_mode, new_mode, old_sha, new_sha, quoted=quoted)


def _section_path(header: bytes) -> str | None:
    """The path of a `diff --git a/P b/P` header (renames are off, so both sides name the same path)."""
    rest = header.decode("utf-8", "surrogateescape").removeprefix("diff --git ")
    if not rest.startswith("a/"):
        return None
    half = (len(rest) - 1) // 2
    left, right = rest[:half], rest[half + 1 :]
    if left[2:] == right[2:] and right.startswith("b/"):
        return left[2:]
    return None


def _parse_commit(record: bytes) -> CommitPatch:
    head, _, body = record.partition(b"\n")
    sha, *parents = head.decode("ascii").split()
    commit = CommitPatch(sha, parents[0] if parents else None)
    body = body.lstrip(b"\n")
    raw, _, patch = body.partition(b"\n\n") if body.startswith(b":") else (b"", b"", body)
    by_path: dict[str, FileChange] = {}
    for line in raw.decode("utf-8", "surrogateescape").splitlines():
        if line.startswith(":"):
            change = _parse_raw(line)
            commit.changes.append(change)
            by_path[change.path] = change
    if patch:
        patch = b"\n" + patch.lstrip(b"\n")
        for section in patch.split(b"\ndiff --git ")[1:]:
            section = b"diff --git " + section
            if not section.endswith(b"\n"):
                section += b"\n"
            path = _section_path(section.split(b"\n", 1)[0])
            target = by_path.get(path) if path is not None else None
            if target is not None:
                target.patch += section  # a type change gives two sections for one path
    return commit


def commit_patches(git_dir: Path, shas: list[str]) -> Iterator[CommitPatch]:
    """Each commit in `shas` (same order) with its raw changes and patch against its first parent.

    External diff drivers and textconv are off, so the patch is git's own view of the bytes.
    """
    if not shas:
        return
    argv = git_argv(
        git_dir,
        "log",
        "--no-walk=unsorted",
        "--stdin",
        "--diff-merges=first-parent",
        "--no-renames",
        "--raw",
        "-p",
        "--full-index",
        "--no-abbrev",
        "--no-ext-diff",
        "--no-textconv",
        "--no-color",
        "--format=%x1e%H %P",
    )
    for record in _records(argv, shas):
        yield _parse_commit(record)
