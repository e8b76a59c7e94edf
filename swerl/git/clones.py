"""Clones: one bare mirror per repository, trees read or checked out at any commit.

Localization only reads blobs, so it never needs a checkout: `files_at` and `read_blobs` go straight to
the object store. Tests need a work tree: `checkout` makes a repository that holds the one commit and
its tree and nothing else of the mirror (no later commit, object or ref: code under test, a model's patch
included, must not find the merged fix in `.git`), with hooks off (a repository's own hooks are code we
must not run). The mirror is only read, so many checkouts of one repository can coexist.

Where mirrors come from: `mirror_dir` (offline: a directory of clones in any usual layout, see
`find_clone`), else GitHub over https unless `offline`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from swerl.git.command import GitError, git_argv, repo_slug, run_git, safe_env


@dataclass(frozen=True)
class TreeEntry:
    """One regular file of a commit's tree."""

    path: str
    blob: str
    mode: str


def ensure_bare_clone(cache: Path, repo: str, url: str) -> Path:
    """The bare clone of `repo` in `cache`, cloned from `url` the first time only.

    Cloned into a temporary sibling and renamed into place, so a run killed mid-clone leaves no
    half-clone that a later run would trust.
    """
    dest = cache / f"{repo_slug(repo)}.git"
    if (dest / "HEAD").exists():
        return dest
    import git  # GitPython: only to clone (about 30 ms of import that a warm cache never needs)

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
        # Absolute once, here: checkouts and sandboxes elsewhere must never see a relative path.
        self.root = Path(root).resolve()
        self.mirror_dir = Path(mirror_dir).resolve() if mirror_dir is not None else None
        self.offline = offline

    def bare_path(self, repo: str) -> Path:
        return self.root / f"{repo_slug(repo)}.git"

    def _source(self, repo: str) -> str:
        if self.mirror_dir is not None:
            found = find_clone(self.mirror_dir, repo)
            if found is not None:
                return str(found)
            if self.offline:
                raise GitError(
                    f"{repo}: no clone under {self.mirror_dir} (looked for {', '.join(clone_names(repo))}, "
                    "each bare or not, or holding the repository as repo/)"
                )
        if self.offline:
            raise GitError(f"{repo}: not cached at {self.bare_path(repo)} and running offline")
        return f"https://github.com/{repo}.git"

    def has_commit(self, repo: str, commit: str) -> bool:
        bare = self.bare_path(repo)
        if not bare.exists():
            return False
        try:
            run_git(bare, "cat-file", "-e", f"{commit}^{{commit}}")
        except GitError:
            return False
        return True

    def ensure(self, repo: str, commit: str) -> Path:
        """The mirror of `repo`, cloned or fetched so that it holds `commit`. Returns its path."""
        bare = self.bare_path(repo)
        if self.has_commit(repo, commit):
            return bare
        # One preparer per mirror (threads of `--workers N`, other processes): a second clone or fetch
        # would race the first one's rename and its ref updates.
        self.root.mkdir(parents=True, exist_ok=True)
        with (self.root / f".{repo_slug(repo)}.lock").open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                return self._prepare(repo, commit)
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _prepare(self, repo: str, commit: str) -> Path:
        """`ensure`'s clone or fetch, under the mirror's lock (an earlier holder may have done it)."""
        bare = self.bare_path(repo)
        if self.has_commit(repo, commit):
            return bare
        source = self._source(repo)
        if not bare.exists():
            self.root.mkdir(parents=True, exist_ok=True)
            # Clone to a temporary name and rename: a half-finished clone must never look usable.
            tmp = Path(tempfile.mkdtemp(prefix=f".{repo_slug(repo)}-", dir=self.root))
            try:
                run_git(None, "clone", "--mirror", "--quiet", source, str(tmp / "repo.git"))
                (tmp / "repo.git").rename(bare)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        if not self.has_commit(repo, commit):
            try:
                run_git(bare, "fetch", "--quiet", source, commit)
            except GitError as err:
                raise GitError(f"{repo}: commit {commit} not found in {source}: {err}") from err
        return bare

    def files_at(self, repo: str, commit: str) -> list[TreeEntry]:
        """Regular files of the commit (symlinks and submodules are left out: they hold no code to read)."""
        bare = self.ensure(repo, commit)
        out = run_git(bare, "ls-tree", "-r", "-z", "--full-tree", commit)
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
            git_argv(bare, "cat-file", "--batch"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=safe_env(),
        )
        assert proc.stdin is not None and proc.stdout is not None
        try:
            # Feed requests from a thread-free loop: one request, one answer, so pipes never fill up.
            for sha in wanted:
                proc.stdin.write(f"{sha}\n".encode())
                proc.stdin.flush()
                header = proc.stdout.readline().split()
                if len(header) != 3:
                    raise GitError(f"{repo}: cannot read blob {sha}")
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
            data = run_git(bare, "cat-file", "blob", f"{commit}:{path}")
        except GitError:
            return None
        return data.decode("utf-8", errors="replace")

    def checkout(self, repo: str, commit: str, dest: str | Path) -> Path:
        """A git work tree of `commit` at `dest` (a fresh directory) whose repository holds that commit only.

        For tests: the harness's patch commands need a repository (`git apply --3way`, a reset between
        attempts, `git checkout <base> -- <test files>`, which names the commit by its sha, so the commit
        keeps its sha: a shallow repository, its parents cut off). What the tree's `.git` holds is one
        pack of the commit, its trees and blobs, copied out of the mirror: no alternates, remote, refs
        or `FETCH_HEAD` lead back to it, and no reflog is kept. The pack is written with its index
        straight into the new repository, without deltas or compression: copied, not recompressed or
        hashed again, it makes a checkout cost what a shared clone of the mirror costs (measured in
        bench/checkout.py). No hooks run (hooksPath is /dev/null), and the mirror is never written.
        """
        bare = self.ensure(repo, commit)
        target = Path(dest)
        if target.exists() and any(target.iterdir()):
            raise GitError(f"cannot check out {repo} at {target}: not an empty directory")
        git_dir = target / ".git"
        run_git(None, "init", "--quiet", "--template=", str(target))
        with (git_dir / "config").open("a", encoding="utf-8") as config:
            config.write("[core]\n\tlogAllRefUpdates = false\n")  # no reflog: the later value wins
        # `--shallow C` then `C`: the commit and everything its tree reaches, none of its ancestors, written
        # as a pack with its index straight into the new repository.
        run_git(
            bare,
            "-c",
            "pack.window=0",
            "-c",
            "pack.compression=0",
            "pack-objects",
            "--revs",
            "--quiet",
            str(git_dir / "objects" / "pack" / "pack"),
            stdin=f"--shallow {commit}\n{commit}\n".encode(),
        )
        (git_dir / "shallow").write_text(f"{commit}\n", encoding="ascii")
        run_git(
            git_dir,
            "-c",
            "advice.detachedHead=false",
            "checkout",
            "--quiet",
            "--detach",
            commit,
            cwd=target,
        )
        return target

    @contextlib.contextmanager
    def lend_history(self, repo: str, tree: Path) -> Iterator[Path]:
        """Give a `checkout` the mirror's history and tags for the duration of the block, then take it back.

        For installing an environment from the tree: install steps compute the project's version with
        `git describe` (setuptools_scm, versioneer), which needs the tags and the commits between, as the
        harness's image (a clone with the history up to the base commit) has them; a tree with one commit
        gives `0.1.dev1`, below a `minversion` the project's own configuration demands. What is lent
        cannot reach a patch: the install runs the repository's code at its base commit, before any
        patch, and the tree is put back as `checkout` made it (its one commit only) before any test
        runs in it. Of the refs, only the tags are lent: `git describe` considers those reachable from
        the commit, so a later tag changes nothing. Lending costs one `git for-each-ref` and three small
        files.
        """
        git_dir = tree / ".git"
        bare = self.bare_path(repo)
        shallow = (git_dir / "shallow").read_bytes()
        tags = run_git(bare, "for-each-ref", "--format=%(objectname) %(refname)", "refs/tags")
        (git_dir / "objects" / "info").mkdir(parents=True, exist_ok=True)
        (git_dir / "objects" / "info" / "alternates").write_text(f"{bare / 'objects'}\n", encoding="utf-8")
        (git_dir / "packed-refs").write_bytes(tags)
        (git_dir / "shallow").unlink()
        try:
            yield tree
        finally:
            (git_dir / "objects" / "info" / "alternates").unlink(missing_ok=True)
            (git_dir / "packed-refs").unlink(missing_ok=True)
            (git_dir / "shallow").write_bytes(shallow)
