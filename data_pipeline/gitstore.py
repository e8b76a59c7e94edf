"""Read mined repositories without ever running anything from them.

Mined repositories are untrusted. Everything here reads git objects directly: commit lists and patches
come from `git log` (with external diff drivers and textconv filters off), file and tree contents from
one persistent `git cat-file --batch` per repository (through GitPython). Nothing is checked out, so no
hook, smudge/clean filter or build step can run, and a symlink is only ever a blob holding a path: we
skip it instead of following it. The clone cache keeps one bare clone per repository, shared by every
PR of that repository and by every later run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import git

REGULAR_MODES = frozenset({"100644", "100755"})
SYMLINK_MODE = "120000"
SUBMODULE_MODE = "160000"
NULL_SHA = "0" * 40

# Config that turns off every way a repository (or a user's config) could make git run a program or
# rewrite what we read. System and global config are ignored entirely.
_SAFE_CONFIG = [
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.quotePath=false",
    "diff.external=",
    "diff.noprefix=false",
    "diff.mnemonicPrefix=false",
    "diff.relative=false",
    "log.showSignature=false",
    "color.ui=false",
]


def safe_env() -> dict[str, str]:
    """The environment for every git process: no system/global config, no prompts, no pager."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        {
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_PAGER": "cat",
            "LC_ALL": "C",
        }
    )
    return env


def git_argv(git_dir: Path, *args: str) -> list[str]:
    """A git command line against a bare repository with the safe configuration."""
    argv = ["git", f"--git-dir={git_dir}"]
    for item in _SAFE_CONFIG:
        argv += ["-c", item]
    return [*argv, *args]


def run_git(git_dir: Path, *args: str, stdin: bytes | None = None) -> bytes:
    """Run git and return stdout as bytes (decoding is the caller's business: contents are byte-exact)."""
    proc = subprocess.run(
        git_argv(git_dir, *args), input=stdin, capture_output=True, env=safe_env(), check=False
    )
    if proc.returncode != 0:
        raise GitError(f"git {args[0]} failed: {proc.stderr.decode('utf-8', 'replace').strip()}")
    return proc.stdout


class GitError(RuntimeError):
    """A git command failed (the message holds git's stderr, never credentials: we pass none to git)."""


def repo_key(repo: str) -> str:
    """`owner/name` -> a file name for the clone cache (`owner__name.git`)."""
    return repo.replace("/", "__") + ".git"


def ensure_bare_clone(cache: Path, repo: str, url: str) -> Path:
    """The bare clone of `repo` in `cache`, cloned from `url` the first time only.

    Cloned into a temporary sibling and renamed into place, so a run killed mid-clone leaves no
    half-clone that a later run would trust.
    """
    dest = cache / repo_key(repo)
    if (dest / "HEAD").exists():
        return dest
    cache.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=cache))
    try:
        git.Repo.clone_from(
            url,
            tmp / "repo.git",
            bare=True,
            env=safe_env(),
            multi_options=["--quiet"],
        )
        os.replace(tmp / "repo.git", dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


@dataclass(frozen=True)
class TreeEntry:
    """A regular file in a tree: path, mode and blob sha. Symlinks and submodules never become one."""

    path: str
    mode: str
    sha: str


@dataclass
class ObjectReader:
    """Blobs and trees of one bare repository through a persistent `git cat-file --batch`.

    Trees are cached by sha (most subtrees are shared between neighbouring commits), so listing the
    files of commit after commit costs little more than reading the trees that changed.
    """

    git_dir: Path
    tree_cache_size: int = 4096
    _repo: git.Repo = field(init=False)
    _trees: OrderedDict[str, list[tuple[str, str, str]]] = field(init=False, default_factory=OrderedDict)

    def __post_init__(self) -> None:
        self._repo = git.Repo(self.git_dir, odbt=git.GitCmdObjectDB)
        self._repo.git.update_environment(**safe_env())

    def close(self) -> None:
        self._repo.close()

    def __enter__(self) -> ObjectReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def read(self, ref: str) -> tuple[str, bytes]:
        """(type, data) of an object; raises GitError when it is missing."""
        try:
            _, kind, _, data = self._repo.git.get_object_data(ref)
        except ValueError as err:  # GitPython raises ValueError for a missing object
            raise GitError(f"missing object {ref}") from err
        return kind.decode("ascii") if isinstance(kind, bytes) else kind, data

    def blob(self, sha: str) -> bytes:
        kind, data = self.read(sha)
        if kind != "blob":
            raise GitError(f"{sha} is a {kind}, not a blob")
        return data

    def exists(self, sha: str) -> bool:
        try:
            self._repo.git.get_object_header(sha)
        except ValueError:
            return False
        return True

    def _tree(self, sha: str) -> list[tuple[str, str, str]]:
        cached = self._trees.get(sha)
        if cached is not None:
            self._trees.move_to_end(sha)
            return cached
        kind, data = self.read(sha)
        if kind != "tree":
            raise GitError(f"{sha} is a {kind}, not a tree")
        entries = []
        pos = 0
        while pos < len(data):
            space = data.index(b" ", pos)
            nul = data.index(b"\0", space)
            mode = data[pos:space].decode("ascii").rjust(6, "0")
            name = data[space + 1 : nul].decode("utf-8", "surrogateescape")
            entries.append((mode, name, data[nul + 1 : nul + 21].hex()))
            pos = nul + 21
        self._trees[sha] = entries
        if len(self._trees) > self.tree_cache_size:
            self._trees.popitem(last=False)
        return entries

    def commit_tree(self, commit: str) -> str:
        kind, data = self.read(commit)
        if kind != "commit" or not data.startswith(b"tree "):
            raise GitError(f"{commit} is not a commit")
        return data[5:45].decode("ascii")

    def list_files(self, commit: str) -> Iterator[TreeEntry]:
        """Every regular file of a commit, depth first in git's order. Symlinks and submodules are skipped."""
        stack: list[tuple[str, str]] = [("", self.commit_tree(commit))]
        while stack:
            prefix, tree = stack.pop()
            subtrees = []
            for mode, name, sha in self._tree(tree):
                path = prefix + name
                if mode == "040000":
                    subtrees.append((path + "/", sha))
                elif mode in REGULAR_MODES:
                    yield TreeEntry(path, mode, sha)
            stack.extend(reversed(subtrees))


def missing_commits(git_dir: Path, shas: Iterable[str]) -> set[str]:
    """The shas that are not commits in the repository (force-pushed away, never fetched, deleted)."""
    wanted = list(dict.fromkeys(shas))
    if not wanted:
        return set()
    out = run_git(git_dir, "cat-file", "--batch-check", stdin="".join(s + "\n" for s in wanted).encode())
    missing = set()
    for sha, line in zip(wanted, out.decode("utf-8", "replace").splitlines(), strict=True):
        parts = line.split()
        if len(parts) < 2 or parts[1] != "commit":
            missing.add(sha)
    return missing


def resolve(git_dir: Path, ref: str) -> str:
    """The commit sha a ref points to now."""
    return run_git(git_dir, "rev-parse", "--verify", f"{ref}^{{commit}}").decode().strip()
