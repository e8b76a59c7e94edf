"""Per-(repository, commit) search indexes, built from blobs and cached on disk.

SWE-bench has hundreds of instances per repository at nearby commits, and most files are identical
between them. So term statistics are stored per *blob* (one store per repository) and a commit's index
is just its path -> blob table: indexing a new commit of a known repository only reads the blobs that
changed. Both live under the cache directory; the blob store is pickled, so the cache directory must be
one this user owns (it is never downloaded).

BM25 itself is `swerl.retrieval.bm25` (the mining pipeline's ranking of unmodified files), reused so that
both places tokenize code identically.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from swerl.git import repo_slug
from swerl.git.clones import RepoCache
from swerl.path_kinds import is_vendored_path
from swerl.retrieval.bm25 import doc_stats

SOURCE_SUFFIXES = (".py", ".pyx", ".pyi")
MAX_INDEXED_BYTES = 1 << 20
"""Files above this size (generated tables, vendored bundles) are listed but not indexed."""
_STORE_VERSION = 3
_DEF = re.compile(r"(?m)^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+([A-Za-z_]\w*)")
# A command-line option written as a string literal: how argparse, optparse, click and pytest's
# addoption declare them.
_OPTION_LITERAL = re.compile(r"""["'](--[a-z][a-z0-9]*(?:-[a-z0-9]+)*)["']""")


@dataclass(frozen=True)
class BlobStats:
    """What ranking needs from one file's content: BM25 term counts, length, the names it defines and the
    command-line options it spells out."""

    counts: Counter[str]
    length: int
    symbols: tuple[str, ...]
    options: tuple[str, ...] = ()


def blob_stats(text: str) -> BlobStats:
    counts, length = doc_stats(text)
    symbols = tuple(dict.fromkeys(_DEF.findall(text)))
    return BlobStats(counts, length, symbols, tuple(dict.fromkeys(_OPTION_LITERAL.findall(text))))


def is_source(path: str) -> bool:
    return path.endswith(SOURCE_SUFFIXES)


AUXILIARY_DIRS = frozenset({"doc", "docs", "examples", "example", "benchmarks", "bench", "scripts", "tools"})
METADATA_FILES = frozenset(
    {"setup.py", "conftest.py", "__pkginfo__.py", "_version.py", "version.py", "noxfile.py"}
)


def is_peripheral_path(path: str) -> bool:
    """Files a fix rarely lands in although they match an issue's words: vendored copies of other
    projects (`requests/packages/urllib3`, `_vendor/`: the core's `is_vendored_path`, with `packages/`
    inside a package since only Python is ranked here), documentation and examples, packaging metadata.
    """
    parts = path.split("/")
    dirs, name = parts[:-1], parts[-1]
    if is_vendored_path(path, nested_packages=True):
        return True
    return (bool(dirs) and dirs[0] in AUXILIARY_DIRS) or name in METADATA_FILES


@dataclass
class RepoIndex:
    """One commit's files with statistics for its source files, and lookups the ranker needs."""

    repo: str
    commit: str
    blobs: dict[str, str]
    stats: dict[str, BlobStats]
    _suffixes: dict[str, list[str]] = field(default_factory=dict, repr=False)
    _defs: dict[str, list[str]] = field(default_factory=dict, repr=False)
    _options: dict[str, list[str]] = field(default_factory=dict, repr=False)

    @property
    def paths(self) -> list[str]:
        return list(self.blobs)

    def docs(self) -> dict[str, tuple[Counter[str], int]]:
        """BM25 documents of the source files (content terms; path terms are scored by the ranker)."""
        return {path: (st.counts, st.length) for path, st in self.stats.items()}

    def by_suffix(self, mention: str) -> list[str]:
        """Files whose path ends with the longest matching tail of `mention` (absolute paths welcome)."""
        if not self._suffixes:
            for path in self.blobs:
                parts = path.split("/")
                for i in range(len(parts)):
                    self._suffixes.setdefault("/".join(parts[i:]), []).append(path)
        parts = [p for p in mention.strip("/").split("/") if p not in ("", ".")]
        for i in range(len(parts)):
            found = self._suffixes.get("/".join(parts[i:]))
            if found:
                return found
        return []

    def by_module(self, dotted: str) -> list[str]:
        """Files a dotted name can refer to: `a.b.c` -> a/b/c.py, a/b/c/__init__.py, else a/b.py (c is
        an attribute), searched as path tails so a `src/` layout works too.

        A bare top-level name (`import pytest`, `pydicom.Dataset` read as `pydicom`) refers to nothing:
        every example imports the package, and its `__init__.py` is rarely where the fix goes."""
        parts = dotted.split(".")
        for stop in range(len(parts), 1, -1):
            stem = "/".join(parts[:stop])
            for candidate in (f"{stem}.py", f"{stem}/__init__.py"):
                found = [p for p in self._lookup_tail(candidate) if is_source(p)]
                if found:
                    return found
        return []

    def _lookup_tail(self, tail: str) -> list[str]:
        if not self._suffixes:
            self.by_suffix("")
        return self._suffixes.get(tail, [])

    def defining(self, name: str) -> list[str]:
        """Source files that define a function or class called `name`."""
        if not self._defs:
            for path, st in self.stats.items():
                for symbol in st.symbols:
                    self._defs.setdefault(symbol, []).append(path)
        return self._defs.get(name, [])

    def spelling_option(self, option: str) -> list[str]:
        """Source files that hold `option` (`--fixtures`) as a string literal: where it is declared, or
        in tests, passed."""
        if not self._options:
            for path, st in self.stats.items():
                for opt in st.options:
                    self._options.setdefault(opt, []).append(path)
        return self._options.get(option, [])


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


class IndexCache:
    """Builds and caches `RepoIndex`es. `root=None` keeps everything in memory only."""

    def __init__(self, repos: RepoCache, root: str | Path | None = None) -> None:
        self.repos = repos
        self.root = Path(root) if root is not None else None
        self._stores: dict[str, dict[str, BlobStats]] = {}
        self._indexes: dict[tuple[str, str], RepoIndex] = {}
        self.blobs_indexed = 0
        """How many blobs this cache had to read and tokenize (the benchmark reports reuse with it)."""

    def _store_path(self, repo: str) -> Path | None:
        return None if self.root is None else self.root / repo_slug(repo) / "blobs.pkl"

    def _tree_path(self, repo: str, commit: str) -> Path | None:
        return None if self.root is None else self.root / repo_slug(repo) / f"{commit}.json"

    def _store(self, repo: str) -> dict[str, BlobStats]:
        if repo not in self._stores:
            store: dict[str, BlobStats] = {}
            path = self._store_path(repo)
            if path is not None and path.exists():
                with path.open("rb") as f:
                    loaded = pickle.load(f)
                if loaded.get("version") == _STORE_VERSION:
                    store = loaded["blobs"]
            self._stores[repo] = store
        return self._stores[repo]

    def get(self, repo: str, commit: str) -> RepoIndex:
        key = (repo, commit)
        if key in self._indexes:
            return self._indexes[key]
        tree_path = self._tree_path(repo, commit)
        if tree_path is not None and tree_path.exists():
            blobs = json.loads(tree_path.read_text(encoding="utf-8"))
        else:
            blobs = {entry.path: entry.blob for entry in self.repos.files_at(repo, commit)}
        store = self._store(repo)
        wanted = {blob for path, blob in blobs.items() if is_source(path) and blob not in store}
        if wanted:
            for blob, data in self.repos.read_blobs(repo, sorted(wanted)):
                if len(data) <= MAX_INDEXED_BYTES:
                    store[blob] = blob_stats(data.decode("utf-8", errors="replace"))
                    self.blobs_indexed += 1
            store_path = self._store_path(repo)
            if store_path is not None:
                _atomic_write(store_path, pickle.dumps({"version": _STORE_VERSION, "blobs": store}))
        if tree_path is not None and not tree_path.exists():
            _atomic_write(tree_path, json.dumps(blobs).encode("utf-8"))
        stats = {path: store[blob] for path, blob in blobs.items() if is_source(path) and blob in store}
        index = RepoIndex(repo, commit, blobs, stats)
        self._indexes[key] = index
        return index
