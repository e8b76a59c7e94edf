"""Commits and their patches, streamed from git.

Spawning git once per commit would cost more than the diff itself on a long history, so the commit
listing (for `--local`) reads one long `git log` stream, and the patch extraction one `git diff-tree
--stdin` process kept open per repository and worker; both are split into commits as they arrive.
Memory holds one commit of the listing at a time, and one batch of 128 PRs' patches. A PR's change is
its last commit diffed against its base: the first parent (the base branch) for a merge commit and for
a squash commit, the commit before the first rebased one for a rebase merge (see `extract`). Renames are
not detected: a rename is a deletion plus an addition, which keeps every path's patch self-contained.
"""

from __future__ import annotations

import re
import secrets
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from swerl.git import GitError, git_argv, run_git, safe_env
from swerl.git.objects import GitPipe

_RECORD = b"\x1e"
_FIELD = "\x1f"
_CHUNK = 1 << 20


def _records(argv: list[str], separator: bytes = _RECORD) -> Iterator[bytes]:
    """Run git and yield the output split on `separator`, one record at a time. A listing closed before
    its end (an interrupt, a consumer that stops) kills git rather than waiting for it: `git log
    --reverse` computes the whole list before it writes, so the wait lasted seconds and a second interrupt
    during it printed a traceback."""
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=safe_env()
    )
    assert proc.stdout is not None and proc.stderr is not None
    try:
        buffer = b""
        # `read1`: what the pipe holds now, not a full chunk; `read` would wait for a megabyte or the end
        # of the output, and with it the first shard, on a history of a few thousand commits.
        while chunk := proc.stdout.read1(_CHUNK):
            buffer += chunk
            *complete, buffer = buffer.split(separator)
            yield from (record for record in complete if record)
        if buffer:
            yield buffer
        stderr = proc.stderr.read()
        if proc.wait() != 0:
            raise GitError(f"git log failed: {stderr.decode('utf-8', 'replace').strip()}")
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()
        proc.stderr.close()
        proc.wait()


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
    Records and fields are separated by control characters around a random token drawn for this
    listing: a message or name may hold any byte (separators included), but not a token it cannot know.
    Messages come re-encoded to UTF-8 from the encoding their commit declares; bytes that are not UTF-8
    all the same are replaced, not fatal.
    """
    return _listing(git_dir, head, "--first-parent")


def full_history(git_dir: Path, head: str) -> Iterator[CommitInfo]:
    """Every commit `head` reaches, each after all of its parents (`--topo-order`, reversed), listed as
    `first_parent_history` lists the line: the first-parent line comes in its own order, and the
    commits a merge brings in come before it, so one stream serves what a walk per merge asked of git a
    round trip at a time."""
    return _listing(git_dir, head, "--topo-order")


def first_parent_line(git_dir: Path, head: str) -> set[str]:
    """The ids of the commits on the first-parent line of `head`."""
    return set(run_git(git_dir, "rev-list", "--first-parent", head, "--").decode("ascii").split())


def _listing(git_dir: Path, head: str, order: str) -> Iterator[CommitInfo]:
    token = secrets.token_hex(8)
    record, field = f"{_RECORD.decode()}{token}", f"{_FIELD}{token}"
    fmt = field.join(("%H", "%P", "%an", "%ae", "%aI", "%B"))
    argv = git_argv(git_dir, "log", order, "--reverse", f"--format={record}{fmt}", head, "--")
    for raw in _records(argv, record.encode()):
        sha, parents, name, email, date, message = raw.decode("utf-8", "replace").split(field, 5)
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
    """The change a PR made: its last commit (`sha`) diffed against the PR's base (`parent`: the first
    parent for a merge or squash commit, the commit before the first rebased one for a rebase merge).
    `error` says why git could not hand the diff over (then `changes` is empty)."""

    sha: str
    parent: str
    changes: list[FileChange] = field(default_factory=list)
    error: str | None = None


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


def parse_diff(base: str, head: str, body: bytes) -> CommitPatch:
    """The changes from `base` to `head` out of git's `--raw -p` output for that pair (`body`)."""
    commit = CommitPatch(head, base)
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
    "--no-commit-id",
    "--no-renames",
    "--raw",
    "-p",
    "--full-index",
    "--no-abbrev",
    "--no-ext-diff",
    "--no-textconv",
    "--no-color",
)
# A diff this large is no training row (the filters stop at hundreds of lines and 256 KB files) and would
# hold memory: its bytes are skipped as they arrive and the PR is dropped as `patch_too_large`.
MAX_DIFF_BYTES = 32 << 20
TOO_LARGE = "patch_too_large"


class PatchReader(GitPipe):
    """Diffs between pairs of commits (a PR's base and its last commit) from one persistent `git
    diff-tree --stdin` per repository and process (external diff drivers and textconv off, so the patch
    is git's own view of the bytes).

    A `git log -p` per shard started cold: it paid a process start and re-inflated the delta chain of
    every blob it diffed, which the previous shard's process had just done; kept open across the shards
    a worker runs, git's delta base cache stays warm (about 40% less CPU in git for the same patches).

    A line `HEAD BASE` asks for commit HEAD diffed against BASE as if BASE were its only parent (the
    form diff-tree documents as a commit followed by its parents), whatever HEAD's real parents are.
    Framing: diff-tree echoes, then flushes, any input line that is not an object name. Each pair is
    sent after a line `<RS><n>` (RS = 0x1e), which comes back as the header of its diff, and each batch
    ends with a line that comes back after its last diff. Only these echoes can start a line with RS or
    `swerl:`: raw lines start with ":", patch lines with a diff prefix (" ", "+", "-", "\\", "diff",
    "index", ...), and git quotes control characters in paths. So the output is split on a newline
    followed by RS, never on a bare RS: a file's content may hold that byte anywhere, even right after a
    diff prefix (real histories do: psf/requests has over ten thousand RS bytes in its patches).
    """

    # Pairs per write: ~90 bytes each stays far below a pipe's buffer, so git is never blocked writing
    # answers while we are still writing questions (see `ObjectReader._BATCH`). A batch's answers are held
    # together (`patches`): a shard's worth at the default shard size.
    _BATCH = 128
    _END = b"swerl: end of batch\n"

    def __init__(self, git_dir: Path) -> None:
        self.git_dir = git_dir
        self._args = ("diff-tree", "--stdin", *_DIFF_OPTIONS)
        super().__init__(git_dir, *self._args)

    def _restart(self) -> None:
        """A fresh diff-tree after one that failed or was abandoned mid-answer: what is left of that
        answer in the old pipe can never be read as the next one's."""
        if self._proc.poll() is None:
            self._proc.kill()
        self.close()
        super().__init__(self.git_dir, *self._args)

    def patches(self, pairs: list[tuple[str, str]]) -> Iterator[CommitPatch]:
        """The diff of each (base, head) pair of existing commits, in the order given.

        Each batch is asked for in reverse and its diffs are handed out in the order given. Callers list
        PRs oldest first (history order, as shards hold them), and packs store a file's newest version
        whole and older ones as deltas against newer ones: asked newest first, each diff finds the bases
        it needs in git's delta base cache, filled by the diff before it (15% less CPU in git for a
        shard's patches). So a batch's diffs (at most `_BATCH`) are in memory at once.

        A batch git fails on (it exits on an object it cannot read) is asked again one pair at a time,
        each with a fresh process if need be, so one bad commit costs only its own PR: its CommitPatch
        carries the `error`. A pair whose names are not full object ids gives nothing."""
        pairs = [pair for pair in pairs if all(_OBJECT_ID.fullmatch(sha) for sha in pair)]
        for start in range(0, len(pairs), self._BATCH):
            chunk = pairs[start : start + self._BATCH]
            try:
                answers = self._ask(chunk)
            except GitError:
                self._restart()
                answers = {}
                for pair in chunk:
                    try:
                        answers.update(self._ask([pair]))
                    except GitError as err:
                        self._restart()
                        answers[pair] = CommitPatch(pair[1], pair[0], error=str(err)[:200])
            yield from (answers[pair] for pair in chunk)

    def _ask(self, chunk: list[tuple[str, str]]) -> dict[tuple[str, str], CommitPatch]:
        """One round trip: the diffs of `chunk`'s pairs, each parsed as it is complete."""
        assert self._proc.stdin is not None
        order = list(reversed(chunk))
        request = b"".join(
            b"\x1e%d\n%s %s\n" % (i, head.encode(), base.encode()) for i, (base, head) in enumerate(order)
        )
        done = False
        try:
            try:
                self._proc.stdin.write(request + self._END)
                self._proc.stdin.flush()
            except (BrokenPipeError, OSError) as err:
                raise GitError(f"git diff-tree exited: {err}") from None
            answers: dict[tuple[str, str], CommitPatch] = {}
            for index, body in self._batch_records():  # a framing fault is git's failure too
                base, head = order[index]
                if body is None:
                    answers[(base, head)] = CommitPatch(head, base, error=TOO_LARGE)
                else:
                    answers[(base, head)] = parse_diff(base, head, body)
            # A pair whose diff is empty (the PR changed nothing at the end) gets no record.
            for base, head in chunk:
                answers.setdefault((base, head), CommitPatch(head, base))
            done = True
            return answers
        finally:
            if not done:
                self._restart()

    def _batch_records(self) -> Iterator[tuple[int, bytes | None]]:
        """(request number, diff) of each pair of one batch as it is complete, up to the echo that ends
        the batch; None for a diff over `MAX_DIFF_BYTES`, whose bytes are dropped as they arrive."""
        assert self._proc.stdout is not None
        end = b"\n" + self._END
        buffer = bytearray(b"\n")  # every header, the first one too, follows a newline
        skipping = False
        while True:
            chunk = self._proc.stdout.read1(_CHUNK)
            if not chunk:
                raise GitError("git diff-tree exited")
            searched = max(0, len(buffer) - 1)
            buffer += chunk
            if skipping:  # inside a diff over the limit: only its end is looked for
                first = buffer.find(b"\n\x1e", searched)
                if first < 0:
                    if buffer.endswith(end):
                        return
                    del buffer[: -len(end)]
                    continue
                del buffer[:first]
                skipping, searched = False, 0
            if buffer.endswith(end):
                break
            cut = buffer.rfind(b"\n\x1e", searched)
            if cut > 0:
                yield from _framed(bytes(buffer[: cut + 1]))
                del buffer[:cut]
            elif len(buffer) > MAX_DIFF_BYTES:
                index, _, _ = bytes(buffer[2:24]).partition(b"\n")
                yield int(index), None
                skipping = True
                del buffer[: -len(end)]
        yield from _framed(bytes(buffer[: -len(self._END)]))


def _framed(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(request number, diff) of each complete record in `data`: whole records, each after a newline and
    ending with one."""
    for piece in data[:-1].split(b"\n\x1e")[1:]:
        index, _, body = piece.partition(b"\n")
        yield int(index), (body + b"\n" if body else b"")
