"""Repository cache: one bare mirror per repository, trees read or checked out at any commit.

Localization only reads blobs, so it never needs a checkout: `files_at` and `read_blobs` go straight to
the object store. Tests need a work tree: `checkout` makes a shared clone of the mirror at a commit
(hooks off: a repository's own hooks are code we must not run), leaving the mirror untouched, so many
checkouts of one repository can coexist.

Where mirrors come from: `mirror_dir` (offline: a directory of clones in any usual layout, see
`find_clone`), else GitHub over https unless `offline`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from swerl.errors import UserError

# Configuration passed on every git call: no hooks, no credential prompts, no system/global config
# surprises (a user's autocrlf or hooksPath must not change what we read or run).
_GIT_CONFIG = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.autocrlf=false",
    "-c",
    "protocol.file.allow=always",
)


class RepoError(UserError, RuntimeError):
    """A repository or commit could not be found or read."""


@dataclass(frozen=True)
class TreeEntry:
    """One regular file of a commit's tree."""

    path: str
    blob: str
    mode: str


def _git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1"})
    return env


def run_git(args: Iterable[str], *, cwd: Path | None = None, input: bytes | None = None) -> bytes:
    """Run git and return stdout as bytes (decoding is the caller's choice: contents stay byte-exact)."""
    argv = ["git", *_GIT_CONFIG, *args]
    proc = subprocess.run(argv, cwd=cwd, input=input, capture_output=True, env=_git_env(), check=False)
    if proc.returncode != 0:
        message = proc.stderr.decode("utf-8", errors="replace").strip()
        raise RepoError(f"git {' '.join(args)} failed: {message}")
    return proc.stdout


def repo_slug(repo: str) -> str:
    """`owner/name` -> `owner__name`, the file-system name of a repository (as SWE-bench writes ids)."""
    if repo.count("/") != 1 or ".." in repo:
        raise ValueError(f"repository must be 'owner/name', got {repo!r}")
    return repo.replace("/", "__")


def clone_names(repo: str) -> list[str]:
    """The names a clone of `owner/name` goes by in a directory of clones, most specific first."""
    owner, name = repo.split("/")
    stems = [repo_slug(repo), f"{owner}+{name}", f"{owner}/{name}", name]
    return [n for stem in stems for n in (stem, f"{stem}.git")]


def _is_git_dir(path: Path) -> bool:
    """A work tree (with .git) or a bare repository (HEAD, objects/ and refs/ at the top)."""
    return (path / ".git").exists() or all((path / n).exists() for n in ("HEAD", "objects", "refs"))


def find_clone(root: Path, repo: str) -> Path | None:
    """A clone of `repo` under `root` in any usual layout, or None.

    Names as `clone_names` lists them; each may be the repository itself or hold it as `repo/` (the
    layout of mirrors fetched as `owner+name/repo`). Names are matched case-insensitively, since GitHub's
    are.
    """
    if not root.is_dir():
        return None
    entries = {p.name.lower(): p for p in root.iterdir()}
    owner_dirs = {p.name.lower(): p for p in root.iterdir() if p.is_dir()}
    for name in clone_names(repo):
        if "/" in name:
            owner, rest = name.split("/")
            parent = owner_dirs.get(owner.lower())
            path = (
                next((p for p in parent.iterdir() if p.name.lower() == rest.lower()), None)
                if parent
                else None
            )
        else:
            path = entries.get(name.lower())
        if path is None:
            continue
        for candidate in (path, path / "repo", path / "repo.git"):
            if candidate.is_dir() and _is_git_dir(candidate):
                return candidate.resolve()
    return None


class RepoCache:
    """Bare mirrors under `root`; see the module docstring for where they come from."""

    def __init__(
        self, root: str | Path, *, mirror_dir: str | Path | None = None, offline: bool = False
    ) -> None:
        self.root = Path(root)
        self.mirror_dir = Path(mirror_dir) if mirror_dir is not None else None
        self.offline = offline

    def bare_path(self, repo: str) -> Path:
        return self.root / f"{repo_slug(repo)}.git"

    def _source(self, repo: str) -> str:
        if self.mirror_dir is not None:
            found = find_clone(self.mirror_dir, repo)
            if found is not None:
                return str(found)
            if self.offline:
                raise RepoError(
                    f"{repo}: no clone under {self.mirror_dir} (looked for {', '.join(clone_names(repo))}, "
                    "each bare or not, or holding the repository as repo/)"
                )
        if self.offline:
            raise RepoError(f"{repo}: not cached at {self.bare_path(repo)} and running offline")
        return f"https://github.com/{repo}.git"

    def has_commit(self, repo: str, commit: str) -> bool:
        bare = self.bare_path(repo)
        if not bare.exists():
            return False
        try:
            run_git(["cat-file", "-e", f"{commit}^{{commit}}"], cwd=bare)
        except RepoError:
            return False
        return True

    def ensure(self, repo: str, commit: str) -> Path:
        """The mirror of `repo`, cloned or fetched so that it holds `commit`. Returns its path."""
        bare = self.bare_path(repo)
        if self.has_commit(repo, commit):
            return bare
        source = self._source(repo)
        if not bare.exists():
            self.root.mkdir(parents=True, exist_ok=True)
            # Clone to a temporary name and rename: a half-finished clone must never look usable.
            tmp = Path(tempfile.mkdtemp(prefix=f".{repo_slug(repo)}-", dir=self.root))
            try:
                run_git(["clone", "--mirror", "--quiet", source, str(tmp / "repo.git")])
                (tmp / "repo.git").rename(bare)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        if not self.has_commit(repo, commit):
            try:
                run_git(["fetch", "--quiet", source, commit], cwd=bare)
            except RepoError as err:
                raise RepoError(f"{repo}: commit {commit} not found in {source}: {err}") from err
        return bare

    def files_at(self, repo: str, commit: str) -> list[TreeEntry]:
        """Regular files of the commit (symlinks and submodules are left out: they hold no code to read)."""
        bare = self.ensure(repo, commit)
        out = run_git(["ls-tree", "-r", "-z", "--full-tree", commit], cwd=bare)
        entries = []
        for record in out.split(b"\0"):
            if not record:
                continue
            meta, path = record.split(b"\t", 1)
            mode, kind, blob = meta.decode().split()
            if kind == "blob" and mode in ("100644", "100755"):
                entries.append(TreeEntry(path.decode("utf-8", errors="surrogateescape"), blob, mode))
        return entries

    def read_blobs(self, repo: str, blobs: Iterable[str]) -> Iterator[tuple[str, bytes]]:
        """(blob sha, content) for each requested blob, through one `cat-file --batch` process."""
        wanted = list(dict.fromkeys(blobs))
        if not wanted:
            return
        bare = self.bare_path(repo)
        proc = subprocess.Popen(
            ["git", *_GIT_CONFIG, "cat-file", "--batch"],
            cwd=bare,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=_git_env(),
        )
        assert proc.stdin is not None and proc.stdout is not None
        try:
            # Feed requests from a thread-free loop: one request, one answer, so pipes never fill up.
            for sha in wanted:
                proc.stdin.write(f"{sha}\n".encode())
                proc.stdin.flush()
                header = proc.stdout.readline().split()
                if len(header) != 3:
                    raise RepoError(f"{repo}: cannot read blob {sha}")
                size = int(header[2])
                data = proc.stdout.read(size)
                proc.stdout.read(1)
                yield sha, data
        finally:
            proc.stdin.close()
            proc.wait()

    def read_file(self, repo: str, commit: str, path: str) -> str | None:
        """One file's text at `commit`, or None when it does not exist there."""
        bare = self.ensure(repo, commit)
        try:
            data = run_git(["cat-file", "blob", f"{commit}:{path}"], cwd=bare)
        except RepoError:
            return None
        return data.decode("utf-8", errors="replace")

    def checkout(self, repo: str, commit: str, dest: str | Path) -> Path:
        """A git work tree of `commit` at `dest` (a fresh directory), sharing the mirror's objects.

        For tests: the harness's patch commands need a repository (`git apply --3way`, a reset between
        attempts, `git checkout <base> -- <test files>`). No hooks run (hooksPath is /dev/null), and the
        mirror is never written.
        """
        bare = self.ensure(repo, commit)
        target = Path(dest)
        run_git(["clone", "--quiet", "--shared", "--no-checkout", str(bare), str(target)])
        run_git(["-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", commit], cwd=target)
        return target
