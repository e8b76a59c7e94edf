"""Commits and their patches, streamed from git.

Spawning git once per commit would cost more than the diff itself on a long history, so the commit
listing (for `--local`) reads one long `git log` stream, and the patch extraction one `git diff-tree
--stdin` process kept open per repository and worker; both are split into commits as they arrive.
Memory holds one commit of the listing at a time, and one batch of 128 commits' patches. Merges are
diffed against their first parent, which is the base branch, so a merge commit and a squash commit both
give the PR's change. Renames are not detected: a rename is a deletion plus an addition, which keeps
every path's patch self-contained.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from data_pipeline.gitstore import GitError, GitPipe, git_argv, safe_env

_RECORD = b"\x1e"
_FIELD = "\x1f"
_CHUNK = 1 << 20


def _records(argv: list[str]) -> Iterator[bytes]:
    """Run git and yield the output split on the record separator, one record at a time."""
    with subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=safe_env()
    ) as proc:
        assert proc.stdout is not None
        buffer = b""
        # `read1`: what the pipe holds now, not a full chunk; `read` would wait for a megabyte or the end
        # of the output, and with it the first shard, on a history of a few thousand commits.
        while chunk := proc.stdout.read1(_CHUNK):
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


def _record_sha(record: bytes) -> str:
    """The commit id a record's header line starts with."""
    return record.split(None, 1)[0].decode("ascii")


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


_OBJECT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # SHA-1 or SHA-256, as git prints them
_DIFF_OPTIONS = (
    "--root",
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


class PatchReader(GitPipe):
    """Commits with their raw changes and patch against their first parent, from one persistent
    `git diff-tree --stdin` per repository and process (external diff drivers and textconv off, so the
    patch is git's own view of the bytes).

    A `git log -p` per shard started cold: it paid a process start and re-inflated the delta chain of
    every blob it diffed, which the previous shard's process had just done; kept open across the shards
    a worker runs, git's delta base cache stays warm (about 40% less CPU in git for the same patches).
    diff-tree answers each commit name it reads with that commit's record (the same bytes as `git log`
    with these options) and echoes, then flushes, any line that is not an object name. So after each
    batch of names one such line is written, and the answer is read up to its echo: one round trip per
    batch. No line of git's output can equal it: record headers start with the record separator, raw
    lines with ":", patch lines with a diff prefix.
    """

    # Names per write: 41 bytes each stays far below a pipe's buffer, so git is never blocked writing
    # answers while we are still writing questions (see `ObjectReader._BATCH`). A batch's answers are held
    # together (`patches`): a shard's worth at the default shard size.
    _BATCH = 128
    _END = b"swerl: end of batch\n"

    def __init__(self, git_dir: Path) -> None:
        super().__init__(git_dir, "diff-tree", "--stdin", *_DIFF_OPTIONS)

    def patches(self, shas: list[str]) -> Iterator[CommitPatch]:
        """Each commit of `shas` (existing commits, same order) diffed against its first parent; a
        root commit against the empty tree, with no parent.

        Each batch is asked for in reverse and its records are handed out in the order given. Callers
        list commits oldest first (history order, as shards hold them), and packs store a file's newest
        version whole and older ones as deltas against newer ones: asked newest first, each diff finds
        the bases it needs in git's delta base cache, filled by the commit before it (15% less CPU in
        git for a shard's patches). So a batch's records (at most `_BATCH` commits) are in memory at
        once, not one commit's.

        A name that is not a full object id (an abbreviation, a ref) gives nothing: diff-tree would echo
        it into the output, and `git log` answered it under the commit's full id, which no caller
        looking for the name found either."""
        assert self._proc.stdin is not None
        shas = [sha for sha in shas if _OBJECT_ID.fullmatch(sha)]
        for start in range(0, len(shas), self._BATCH):
            chunk = shas[start : start + self._BATCH]
            self._proc.stdin.write("".join(sha + "\n" for sha in reversed(chunk)).encode() + self._END)
            self._proc.stdin.flush()
            done = False
            try:
                answers = {_record_sha(record): record for record in self._batch_records()}
                done = True
            finally:
                if not done:
                    # Failed mid-batch: the rest of the batch's answer is still in the pipe and would be
                    # read as the next batch's. End the process instead; the next caller gets a fresh
                    # one (see `alive`).
                    self._proc.kill()
                    self.close()
            yield from (_parse_commit(answers[sha]) for sha in chunk if sha in answers)

    def _batch_records(self) -> Iterator[bytes]:
        """The records of one batch, split on the record separator as they arrive, up to the echo that
        ends the batch."""
        assert self._proc.stdout is not None
        buffer = b""
        while True:
            chunk = self._proc.stdout.read1(_CHUNK)
            if not chunk:
                raise GitError("git diff-tree exited")
            buffer += chunk
            if buffer.endswith(self._END) and (buffer == self._END or buffer[-len(self._END) - 1] == 10):
                break
            *complete, buffer = buffer.split(_RECORD)
            yield from (record for record in complete if record)
        yield from (record for record in buffer[: -len(self._END)].split(_RECORD) if record)
