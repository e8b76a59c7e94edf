"""Real git repositories with a realistic history of small fixes, built offline in seconds.

Benchmarks, tests and the offline quickstart need realistic code changes but cannot reach GitHub. This
module commits real Python source (from the running interpreter's standard library) into a fresh
repository and then adds commits that each make a few plausible edits (a changed condition or constant, an
inserted guard, a deleted line), so diffs have the shape, size and context of real bug fixes. Everything
is read back through git, so consumers exercise the same path as for a mined repository.

Every history here, and the richer ones the data pipeline's tests plan (`data_pipeline.synthetic`) and
the quickstart's, is written by one writer, `FastImport`: commits are collected in memory and handed to
`git fast-import` in one stream, thousands of commits a second where `git commit` manages tens.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sysconfig
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

_GIT_ENV = {
    "GIT_AUTHOR_NAME": "swerl",
    "GIT_AUTHOR_EMAIL": "swerl@example.invalid",
    "GIT_COMMITTER_NAME": "swerl",
    "GIT_COMMITTER_EMAIL": "swerl@example.invalid",
    "GIT_AUTHOR_DATE": "2025-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2025-01-01T00:00:00Z",
    "GIT_CONFIG_NOSYSTEM": "1",
    "HOME": "/nonexistent",
}
_SWAPS = [
    ("==", "!="),
    (" < ", " <= "),
    (" > ", " >= "),
    ("True", "False"),
    (" and ", " or "),
    ("+ 1", "- 1"),
]
_NUMBER = re.compile(r"\b\d+\b")


@dataclass(frozen=True)
class Commit:
    """One commit of the generated history: the files it changed, before and after."""

    sha: str
    message: str
    old: dict[str, str]
    new: dict[str, str]


# The time of `git`'s fixed identity (`_GIT_ENV`), for commits `FastImport` writes in its name.
_GIT_TIME = 1_735_689_600


def git(repo: Path, *args: str, stdin: bytes | None = None) -> str:
    """Run git in `repo` with a fixed identity and date (reproducible shas), returning stdout.

    Decoded by hand: `text=True` would translate "\r\n" and so alter file contents read with `git show`.
    """
    env = {**_GIT_ENV, "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    proc = subprocess.run(["git", *args], cwd=repo, env=env, input=stdin, capture_output=True, check=True)
    return proc.stdout.decode("utf-8", errors="replace")


class FastImport:
    """A history for `git fast-import`: `commit` adds one (on any branch, with a second parent for a
    merge), `write` creates the repository. Commit `n` (from 1) is dated `start + n * step`, so a
    history's shas depend only on what it commits."""

    def __init__(self, start: int = _GIT_TIME, step: int = 0) -> None:
        self.start = start
        self.step = step
        self.marks = 0
        self._parts: list[bytes] = []

    def commit(
        self,
        message: str,
        changes: Mapping[str, str | bytes | None],
        *,
        ref: str = "refs/heads/main",
        parent: int | None = None,
        merge: int | None = None,
        author: str = "swerl <swerl@example.invalid>",
        symlinks: Mapping[str, str] | None = None,
    ) -> int:
        """Add a commit on `ref` whose tree is `parent`'s with `changes` (path -> text, bytes, or None
        to delete) and `symlinks` (path -> target); its mark, which later commits name as parent."""
        self.marks += 1
        when = self.start + self.marks * self.step
        out = [b"commit %s\nmark :%d\n" % (ref.encode(), self.marks)]
        out += [b"%s %s %d +0000\n" % (role, author.encode(), when) for role in (b"author", b"committer")]
        out.append(_data(message.encode()))
        if parent is not None:
            out.append(b"from :%d\n" % parent)
        if merge is not None:
            out.append(b"merge :%d\n" % merge)
        for path, content in changes.items():
            if content is None:
                out.append(b"D %s\n" % path.encode())
            else:
                raw = content.encode() if isinstance(content, str) else content
                out.append(b"M 100644 inline %s\n" % path.encode() + _data(raw))
        for path, target in (symlinks or {}).items():
            out.append(b"M 120000 inline %s\n" % path.encode() + _data(target.encode()))
        self._parts.append(b"".join(out))
        return self.marks

    def write(self, repo: Path, checkout: bool = False) -> list[str]:
        """Create the repository at `repo` (HEAD on main; a work tree of main when `checkout`); the shas
        of main's first-parent history, oldest first."""
        repo.mkdir(parents=True, exist_ok=True)
        git(repo, "init", "-q", "-b", "main")
        git(repo, "fast-import", "--quiet", stdin=b"".join(self._parts) + b"done\n")
        if checkout:
            git(repo, "reset", "-q", "--hard", "main")
        return git(repo, "rev-list", "--first-parent", "--reverse", "main").split()


def _data(raw: bytes) -> bytes:
    """fast-import's `data` command: the length, then exactly these bytes."""
    return b"data %d\n%s\n" % (len(raw), raw)


def init_repo(repo: Path, files: dict[str, str], message: str) -> str:
    """A new repository at `repo` (with a work tree) holding `files` (path -> text) in one commit on
    main; its sha."""
    history = FastImport()
    history.commit(message + "\n", files)
    return history.write(repo, checkout=True)[-1]


def stdlib_sources(
    count: int, rng: random.Random, min_lines: int = 80, max_lines: int = 1500
) -> dict[str, str]:
    """`count` real Python modules of a realistic size from the standard library, keyed by a repo path."""
    root = Path(sysconfig.get_paths()["stdlib"])
    candidates = []
    for path in sorted(root.glob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        if min_lines <= text.count("\n") <= max_lines:
            candidates.append((f"pkg/{path.name}", text))
    return dict(rng.sample(candidates, min(count, len(candidates))))


def _edit_line(line: str, rng: random.Random) -> str | None:
    swaps = [(a, b) for a, b in _SWAPS if a in line]
    if swaps:
        a, b = rng.choice(swaps)
        return line.replace(a, b, 1)
    if _NUMBER.search(line):
        return _NUMBER.sub(lambda m: str(int(m.group()) + rng.randint(1, 9)), line, count=1)
    return None


def mutate_lines(lines: Sequence[str], rng: random.Random, edits: int) -> list[str]:
    """Apply `edits` plausible code edits at random places of a file given as lines (with newlines)."""
    out = list(lines)
    for _ in range(edits):
        code = [i for i, line in enumerate(out) if line.strip() and not line.lstrip().startswith("#")]
        if not code:
            break
        i = rng.choice(code)
        indent = out[i][: len(out[i]) - len(out[i].lstrip())]
        kind = rng.random()
        changed = _edit_line(out[i], rng) if kind < 0.5 else None
        if changed is not None:
            out[i] = changed
        elif kind < 0.8:
            name = rng.choice(["value", "result", "item", "self._cache", "args"])
            out[i:i] = [
                f"{indent}if {name} is None:\n",
                f"{indent}    raise ValueError('{name} is required')\n",
            ]
        else:
            del out[i : i + rng.randint(1, 3)]
    return out


def build_history(repo: Path, sources: dict[str, str], commits: int, rng: random.Random) -> list[Commit]:
    """Create a repository at `repo` holding `sources`, then `commits` fix-like commits on top of it.

    Returns the commits as read back from git (`git show parent:path` / `sha:path`).
    """
    writer = FastImport()
    tip = writer.commit("Initial import\n", sources)
    current = dict(sources)
    paths = sorted(sources)
    for n in range(commits):
        changes = {}
        for path in rng.sample(paths, rng.choice([1, 1, 1, 2])):
            lines = mutate_lines(current[path].splitlines(keepends=True), rng, rng.randint(1, 4))
            current[path] = changes[path] = "".join(lines)
        tip = writer.commit(f"Fix issue #{n + 1}\n", changes, parent=tip)
    writer.write(repo, checkout=True)
    history = []
    for sha in git(repo, "rev-list", "--reverse", "HEAD").split()[1:]:
        changed = git(repo, "diff", "--name-only", f"{sha}^", sha).split()
        old = {p: git(repo, "show", f"{sha}^:{p}") for p in changed}
        new = {p: git(repo, "show", f"{sha}:{p}") for p in changed}
        history.append(Commit(sha, git(repo, "log", "-1", "--format=%s", sha).strip(), old, new))
    return history
