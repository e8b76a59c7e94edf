"""Stage 5, context: the files a prompt shows: every modified file plus relevant unmodified ones, shuffled.

If only modified files were shown, a policy would learn to edit everything it sees. So the prompt also
shows unmodified files a developer would open: files the modified ones import or are imported by, files
in the same package, and files that BM25 ranks high against the issue text, in that order of preference,
as long as the token budget allows. When a ranking model is configured (`model_rank.py`), the files it
names come before all of these, in its order. The final order is a shuffle seeded by the instance id
(reproducible, independent of PYTHONHASHSEED). Unmodified files are read at the base commit through the
object reader; per-blob facts (term counts, imports, token count) are cached by blob sha, since most
files are the same blob from one PR to the next.
"""

from __future__ import annotations

import random
from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import chain
from pathlib import PurePosixPath
from typing import TypeVar

import numpy as np

from data_pipeline.config import ContextConfig, FilterConfig
from data_pipeline.context.imports import ModuleIndex, imported_modules, module_names
from data_pipeline.context.model_rank import RankRequest
from data_pipeline.context.pool import PoolListing
from data_pipeline.context.tokens import TokenCounter, count_composed, estimate_tokens, estimate_uncached
from data_pipeline.extract.contents import Dropped
from data_pipeline.extract.edges import EDGES, Delta, LineEdges, apply_deltas
from data_pipeline.filter.rules import file_role
from swerl.edit_format import build_messages, render_repair_prompt, system_prompt_for
from swerl.git import GitError
from swerl.git.objects import ObjectReader
from swerl.retrieval import bm25

_CONTEXT_ROLES = frozenset({"source", "test"})
_V = TypeVar("_V")
# Per-file overhead of the rendered block (`### path`, two fences, blank line), in estimated tokens.
_FILE_OVERHEAD = 8


@dataclass(frozen=True)
class BlobFacts:
    terms: Counter[str]
    length: int
    imports: frozenset[str]
    tokens: int
    # When derived from another version of the file (`_derive_facts`): that version's blob sha, and the
    # terms the changed lines hold, a superset of those whose counts differ between the two. A BM25
    # index that holds that version updates just those (`PoolIndex._index`). Not part of the facts.
    derived_from: str | None = field(default=None, compare=False)
    changed_terms: frozenset[str] = field(default=frozenset(), compare=False)


@dataclass
class ContextResult:
    """The files to show in prompt order, why each is there, and the rendered prompt with its count."""

    files: list[tuple[str, str]]
    extra: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)
    messages: list[dict[str, str]] = field(default_factory=list)
    prompt_tokens: int = 0


# What the version store holds of a path: (blob sha, line counts, number of lines, length in characters,
# facts) of its last version indexed.
Version = tuple[str, Counter[str], int, int, BlobFacts]


class VersionStore:
    """The lines and facts of the last indexed version of each (repository, path), bounded by the size of
    those versions in characters (least recently used out first); see `ContextBuilder._derive_facts`.

    Shared by every builder of a process: a derived fact is exact whichever earlier version it starts
    from, so what a worker ran before changes how fast it is, never what it computes."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit = limit_bytes
        self._items: OrderedDict[tuple[str, str], Version] = OrderedDict()
        self._bytes = 0

    def get(self, key: tuple[str, str]) -> Version | None:
        """The version last stored under `key`."""
        found = self._items.get(key)
        if found is not None:
            self._items.move_to_end(key)
        return found

    def take(self, key: tuple[str, str]) -> Version | None:
        """The version last stored under `key`, out of the store: the caller may then move its line
        counts in place to the next version (and put that), instead of copying them."""
        found = self._items.pop(key, None)
        if found is not None:
            self._bytes -= found[3]
        return found

    def put(self, key: tuple[str, str], version: Version) -> None:
        previous = self._items.pop(key, None)
        if previous is not None:
            self._bytes -= previous[3]
        self._items[key] = version
        self._bytes += version[3]
        while self._bytes > self.limit and self._items:
            _, dropped = self._items.popitem(last=False)
            self._bytes -= dropped[3]


# Per process; ~3x the bytes of the text it holds (line counts plus term counts).
_VERSIONS = VersionStore(32 << 20)


class PoolIndex:
    """The unmodified files one repository's contexts choose from (a pool: the files with the changed
    files' suffixes), kept in step with the pool of each PR in turn, with the indexes that rank them
    without visiting every file: BM25 postings (`bm25.Index`), the files importing each module, the
    files of each directory.

    Neighbouring PRs' pools are the same files but for the few that PRs in between changed (and the
    PR's own modified files, which a pool leaves out), so `follow` takes in the changes between the two
    base commits' trees only (`PoolListing`); ranking a PR then costs what its query terms and its
    modules' importers and directories hold, not the size of the repository. What it holds is exactly
    the pool of the last PR followed: ranking from it gives what ranking the pool's files one by one
    gives (the order is settled by a sort on a total key).
    """

    def __init__(self) -> None:
        self._clear()

    def _clear(self) -> None:
        self.shas: dict[str, str] = {}  # every pool file held, readable or not
        self.facts: dict[str, BlobFacts] = {}  # the readable ones
        self.tokens: dict[str, int] = {}  # their token counts (`facts[path].tokens`), for array passes
        self.bm25 = bm25.Index()
        self._importers: dict[str, set[str]] = {}
        self._by_dir: dict[str, set[str]] = {}
        self.modules = ModuleIndex()  # the module names of the readable files (`facts`)
        self.listing = PoolListing()  # every file of the pool's kind at the commit last followed

    def follow(
        self,
        reader: ObjectReader,
        commit: str,
        kinds: frozenset[str],
        cap: int,
        modified: Iterable[str],
        facts_of: Callable[[list[tuple[str, str]]], dict[tuple[str, str], BlobFacts | None]],
    ) -> tuple[Mapping[str, str], dict[str, str]]:
        """Make the index hold the pool of a PR whose base is `commit` and which modifies `modified`
        (what `ContextBuilder._pool` lists, and those modified files it meets before the cap), from the
        changes since the commit it held before; `facts_of` gives the facts of the files new to it or
        changed. Returns the pool (a view of what the index holds, less the modified files) and the blob
        shas of the modified files held, which the ranking leaves out instead of removing and adding
        them back at every PR."""
        listing = self.listing
        key, keep = _pool_kind(kinds)
        changes = reader.changed_files(listing.commit, commit, key, keep)
        try:
            touched = listing.apply(commit, changes)
            edge = listing.held_edge(cap, modified)
            moved = touched.union(listing.between(listing.edge, edge))
            listing.edge = edge
            files = listing.files
            held = {path: files[path] for path in moved if listing.is_held(path, edge)}
            for path in [path for path in moved if path in self.shas and path not in held]:
                del self.shas[path]
                self._unindex(path)
            changed = [(path, sha) for path, sha in held.items() if self.shas.get(path) != sha]
            if changed:
                found = facts_of(changed)  # reads blobs: may fail (a missing object)
                for path, sha in changed:
                    previous = self.shas.get(path)
                    self.shas[path] = sha
                    self._index(path, found[(path, sha)], previous)
        except BaseException:
            # Half followed, the index would hold files of two commits, and the next PR's changes would
            # not mend it: start afresh instead (the next PR lists its pool whole).
            self._clear()
            raise
        left_out = {path: self.shas[path] for path in modified if path in self.shas}
        return _Without(self.shas, left_out), left_out

    def _index(self, path: str, facts: BlobFacts | None, previous: str | None) -> None:
        """Index `facts` as `path`'s, replacing those of version `previous` (the sha it had), if any."""
        old = self.facts.get(path)
        if facts is None:
            if old is not None:
                self._unindex(path)
            return
        old_imports = old.imports if old is not None else frozenset()
        for name in old_imports - facts.imports:
            _discard(self._importers, name, path)
        for name in facts.imports - old_imports:
            self._importers.setdefault(name, set()).add(path)
        if old is None:
            self._by_dir.setdefault(_split(path)[0], set()).add(path)
            self.modules.add(path)
        self.facts[path] = facts
        self.tokens[path] = facts.tokens
        hint = facts.changed_terms if old is not None and facts.derived_from == previous else None
        self.bm25.put(path, facts.terms, facts.length, changed=hint)

    def _unindex(self, path: str) -> None:
        old = self.facts.pop(path, None)
        if old is not None:
            del self.tokens[path]
            self.bm25.remove(path)
            for name in old.imports:
                _discard(self._importers, name, path)
            _discard(self._by_dir, _split(path)[0], path)
            self.modules.remove(path)

    def importing(self, names: set[str]) -> set[str]:
        """The files that import any of the modules `names`."""
        return set().union(*(self._importers.get(name, ()) for name in names))

    def in_dirs(self, dirs: set[str]) -> set[str]:
        """The files directly in any of `dirs`."""
        return set().union(*(self._by_dir.get(folder, ()) for folder in dirs))


class _Without(Mapping[str, str]):
    """A mapping less some of its keys, without copying it: a PR's pool is the pool index's files less
    the PR's modified ones, and copying thousands of entries per PR is what following the pool by tree
    diffs saves."""

    def __init__(self, items: dict[str, str], left_out: dict[str, str]) -> None:
        self._items = items
        self._left_out = left_out

    def __getitem__(self, key: str) -> str:
        if key in self._left_out:
            raise KeyError(key)
        return self._items[key]

    def __contains__(self, key: object) -> bool:
        return key in self._items and key not in self._left_out

    def __iter__(self) -> Iterator[str]:
        return (key for key in self._items if key not in self._left_out)

    def __len__(self) -> int:
        return len(self._items) - sum(1 for key in self._left_out if key in self._items)


class _BySuffix(Mapping[str, _V]):
    """Mappings of paths, one per file suffix, as one: a path is looked up in its suffix's only (the
    pools and facts of a PR's pool indexes, one per suffix of its changed files)."""

    def __init__(self, parts: dict[str, Mapping[str, _V]]) -> None:
        self._parts = parts

    def __getitem__(self, path: str) -> _V:
        part = self._parts.get(_split(path)[1])
        if part is None:
            raise KeyError(path)
        return part[path]

    def __contains__(self, path: object) -> bool:
        part = self._parts.get(_split(path)[1]) if isinstance(path, str) else None
        return part is not None and path in part

    def __iter__(self) -> Iterator[str]:
        return chain.from_iterable(self._parts.values())

    def __len__(self) -> int:
        return sum(map(len, self._parts.values()))


@lru_cache(maxsize=256)
def _pool_kind(kinds: frozenset[str]) -> tuple[Hashable, Callable[[str], bool]]:
    """The listing key and predicate of the pool of files with one of the suffixes `kinds`."""
    return ("context", kinds), lambda path: _split(path)[1] in kinds and file_role(path) in _CONTEXT_ROLES


def _discard(index: dict[str, set[str]], key: str, path: str) -> None:
    paths = index.get(key)
    if paths is not None:
        paths.discard(path)
        if not paths:
            del index[key]


# Per process, one per (repository, suffix, token counter, size limit) most recently ranked; each
# holds the facts of its pool (at most `max_candidate_files` files), so these bound the memory the
# context stage holds, whatever the length of the history.
_POOL_INDEXES: OrderedDict[tuple[str, str, TokenCounter, int], PoolIndex] = OrderedDict()
_POOL_INDEXES_MAX = 6


class ContextBuilder:
    """Chooses and orders context files for the PRs of one repository."""

    def __init__(
        self,
        reader: ObjectReader,
        config: ContextConfig,
        filters: FilterConfig,
        count: TokenCounter,
        cache_size: int = 20_000,
        versions: VersionStore | None = None,
        edges: LineEdges | None = None,
    ) -> None:
        self.reader = reader
        self.config = config
        self.filters = filters
        self.count = count
        self._facts: OrderedDict[tuple[str, str], BlobFacts | None] = OrderedDict()
        self._cache_size = cache_size
        self._versions = versions if versions is not None else _VERSIONS
        self._edges = edges if edges is not None else EDGES
        self._repo = str(reader.git_dir)
        # The version store's facts hold estimated token counts and passed this size limit: another
        # limit is another scope, and another counter does not use the store at all.
        self._scope = f"{self._repo}\0{filters.max_file_bytes}"

    def _pool(
        self,
        base_commit: str,
        suffixes: set[str],
        modified: Iterable[str] = (),
        modified_shas: dict[str, str] | None = None,
    ) -> dict[str, str]:
        """path -> blob sha of the unmodified source and test files with one of `suffixes`, up to
        `max_candidate_files` of each suffix in tree order: the files a prompt may show besides the
        modified ones. The blob shas of the modified files met before a suffix's cap go to
        `modified_shas`. (The reference listing: `PoolIndex.follow` holds the same files per suffix.)"""
        modified = set(modified)
        cap = self.config.max_candidate_files
        pool: dict[str, str] = {}
        for suffix in sorted(suffixes):
            taken = 0
            for path, sha in self.reader.matching_files(base_commit, *_pool_kind(frozenset({suffix}))):
                if taken >= cap:
                    break
                if path in modified:
                    if modified_shas is not None:
                        modified_shas[path] = sha
                    continue
                pool[path] = sha
                taken += 1
        return pool

    def prefetch(self, commits: Iterable[str]) -> None:
        """Read the trees of many PRs' base commits in a few pipelined batches (one round trip per tree
        level instead of several per PR). The blobs whose facts a PR's ranking needs are read when it
        follows the pool index: a few per PR, most of them already in the reader's cache (extraction
        rebuilt them)."""
        self.reader.prefetch_trees(commits)

    def rank_request(
        self, base_commit: str, problem: str, modified: Iterable[str], new_paths: list[str]
    ) -> RankRequest | None:
        """What to ask a ranking model about a PR: its issue, the unmodified files its context may show
        (the pool of `build`) and its changed paths; None when the base commit cannot be read (the PR's
        own `build` reports that)."""
        changed = [*modified, *new_paths]
        try:
            pool = self._pool(base_commit, {_split(p)[1] for p in changed}, set(changed))
        except GitError:
            return None
        return RankRequest(problem, tuple(pool), tuple(changed))

    def _index(self, files: list[tuple[str, str]]) -> None:
        """Compute and cache the facts of each (path, blob sha) not cached yet: from the version store
        when it holds that very blob, else from the blob, read in one batch with the others. Facts are
        cached by path and blob (imports depend on the path), so they never depend on which PRs a worker
        met first."""
        todo: list[tuple[str, str]] = []
        for path, sha in files:
            if (path, sha) in self._facts:
                continue
            known = self._versions.get((self._scope, path)) if self.count is estimate_tokens else None
            if known is not None and known[0] == sha:
                self._remember(path, sha, known[4])
            else:
                todo.append((path, sha))
        if not todo:
            return
        data = self.reader.blobs(sha for _, sha in todo)
        for path, sha in todo:
            if (path, sha) not in self._facts:
                self._remember(path, sha, self._compute_facts(path, sha, data[sha]))

    def _remember(self, path: str, sha: str, facts: BlobFacts | None) -> None:
        self._facts[(path, sha)] = facts
        if len(self._facts) > self._cache_size:
            self._facts.popitem(last=False)

    def _facts_for(self, files: list[tuple[str, str]]) -> dict[tuple[str, str], BlobFacts | None]:
        """Facts of each (path, blob sha), None for one that is not readable text."""
        self._index(files)
        return {key: self._facts[key] for key in files}

    def _pool_index(self, suffix: str) -> PoolIndex:
        # Everything a file's facts depend on besides its blob: another counter or size limit (another
        # run in this process) gets an index of its own.
        key = (self._repo, suffix, self.count, self.filters.max_file_bytes)
        index = _POOL_INDEXES.get(key)
        if index is None:
            index = _POOL_INDEXES[key] = PoolIndex()
            while len(_POOL_INDEXES) > _POOL_INDEXES_MAX:
                _POOL_INDEXES.popitem(last=False)
        _POOL_INDEXES.move_to_end(key)
        return index

    def _compute_facts(self, path: str, sha: str, data: bytes) -> BlobFacts | None:
        if len(data) > self.filters.max_file_bytes or b"\0" in data:
            return None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return None
        if self.count is not estimate_tokens:
            return self._scan_facts(path, text, self.count(text))
        # The last version indexed, if any, taken out of the store: its line counts may become this
        # version's (`_count_lines`), and this version is put in its place.
        known = self._versions.take((self._scope, path))
        lines, total, changes, known = self._count_lines(path, sha, text, known)
        facts = self._derive_facts(path, text, lines, total, known, changes)
        if facts is None:
            facts = self._scan_facts(path, text, estimate_tokens(text))
        self._versions.put((self._scope, path), (sha, lines, total, len(text), facts))
        return facts

    def _count_lines(
        self, path: str, sha: str, text: str, known: Version | None
    ) -> tuple[Counter[str], int, Delta | None, Version | None]:
        """`Counter(text.split("\n"))` of version `sha` of `path` and its total; the lines removed and
        added since `known`, the last version indexed, when extraction recorded them (`edges.py`); and
        the version the facts may be derived from (`known`, or None).

        With the records, the counts are `known`'s, moved in place by the changed lines only, not taken
        from the text. When the records turn out not to fit (they always should), the counts come from
        the text, and `known`'s, moved part of the way, are good for nothing: None is returned for it."""
        if known is not None:
            deltas = self._edges.chain(self._repo, path, known[0], sha)
            if deltas:
                removed = [line for gone, _ in deltas for line in gone]
                added = [line for _, new in deltas for line in new]
                total = known[2] - len(removed) + len(added)
                # A cheap check that the records fit this text: its length is the stored version's, less
                # each removed line and its newline, plus each added one and its newline (O(changes),
                # where counting the text's newlines took more than the rest of its facts).
                length = known[3] + sum(map(len, added)) - sum(map(len, removed)) + len(added) - len(removed)
                if length == len(text):
                    if apply_deltas(known[1], deltas):
                        return known[1], total, (removed, added), known
                    known = None
        lines = Counter(text.split("\n"))
        return lines, lines.total(), None, known

    @staticmethod
    def _scan_facts(path: str, text: str, tokens: int) -> BlobFacts:
        counts, length = bm25.doc_stats(text)
        imports = _imports(path, text) if path.endswith(".py") else frozenset()
        return BlobFacts(counts, length, imports, tokens + _FILE_OVERHEAD)

    def _derive_facts(
        self,
        path: str,
        text: str,
        lines: Counter[str],
        total: int,
        known: Version | None,
        changes: Delta | None,
    ) -> BlobFacts | None:
        """The facts of a new version of `path` from those of `known`, the last version indexed, and the
        lines that differ between the two (`changes`, when known: removed and added lines, a line may be
        in both), or None when no version is known or most lines differ.

        Exact, because every fact is a sum over lines: a BM25 term, an import statement and a piece of
        the token estimate never span a newline. Term counts and length move by the counts of the
        removed and added lines; the estimate of `"\n".join(lines)` is the sum of its lines' estimates
        plus one per newline; imports are rescanned only when a differing line mentions `import`.
        """
        if known is None:
            return None
        _, old_lines, old_total, _, old = known
        if changes is not None:
            removed, added = changes
            if 2 * (len(removed) + len(added)) > len(lines):
                return None
        else:
            # The (line, count) pairs of either version only: a set operation in C, not a loop over lines.
            removed, added = [], []
            for line in {line for line, _ in old_lines.items() ^ lines.items()}:
                delta = lines.get(line, 0) - old_lines.get(line, 0)
                (added if delta > 0 else removed).extend([line] * abs(delta))
                if 2 * (len(removed) + len(added)) > len(lines):
                    return None
        n_removed, n_added = len(removed), len(added)
        gone, new = "\n".join(removed), "\n".join(added)
        counts = old.terms.copy()
        change, moved = bm25.term_delta(gone, new)
        for term, n in change.items():
            if n:
                left = counts.get(term, 0) + n
                if left > 0:
                    counts[term] = left
                else:
                    counts.pop(term, None)
        length = old.length + moved
        imports = old.imports
        if path.endswith(".py") and ("import" in gone or "import" in new):
            imports = _imports(path, text)
        # Estimate of a join = sum of the parts' estimates + (parts - 1) newlines.
        body = old.tokens - _FILE_OVERHEAD - (old_total - 1)
        body += estimate_uncached(new) - max(n_added - 1, 0) - estimate_uncached(gone) + max(n_removed - 1, 0)
        changed = frozenset(term for term, n in change.items() if n)
        return BlobFacts(counts, length, imports, body + (total - 1) + _FILE_OVERHEAD, known[0], changed)

    def _ranked_tiers(
        self,
        base_commit: str,
        problem: str,
        modified: dict[str, str],
        new_paths: list[str],
        model_picks: Sequence[str] = (),
    ) -> tuple[list[tuple[str, str, str, int]], dict[str, float], Mapping[str, str], dict[str, int]]:
        """The unmodified files a prompt may show, most relevant first, in two parts: (path, blob sha,
        reason, tokens) of the readable `model_picks` in their order and of the linked tiers, then the
        BM25-only tier (most of a large pool) as path -> score, unordered (`_best_first` orders as much
        of it as `build` reads), with the pool and the token count of each of its readable files."""
        # One pool index per suffix of the changed files, ranked as one (a PR that changes `.py` and
        # `.yml` files uses the `.py` index every other PR uses, not one of its own). Each holds its
        # pool and the modified files it meets before the cap too, which the pool of the next PR, with
        # other modified files, holds again: the ranking leaves them out instead (`shas`), so they are
        # not removed and added back at every PR.
        indexes: dict[str, PoolIndex] = {}
        pools: dict[str, Mapping[str, str]] = {}
        shas: dict[str, str] = {}
        for suffix in sorted({_split(p)[1] for p in [*modified, *new_paths]}):
            indexes[suffix] = self._pool_index(suffix)
            pools[suffix], held = indexes[suffix].follow(
                self.reader,
                base_commit,
                frozenset({suffix}),
                self.config.max_candidate_files,
                modified,
                self._facts_for,
            )
            shas.update(held)
        pool = _BySuffix(pools)
        facts = _BySuffix({suffix: index.facts for suffix, index in indexes.items()})
        # Module names resolve among the pool's readable files and the PR's own files.
        modules = indexes[".py"].modules if ".py" in indexes else ModuleIndex()
        also = [path for path in (*modified, *new_paths) if path not in facts]
        targets = set(modified) | set(new_paths)
        imports: set[str] = set()
        for path, text in modified.items():
            if path.endswith(".py"):
                # The index holds the base version's facts (same path, same blob: the same imports as
                # scanning `text`) unless the file is not one a pool holds.
                known = facts.get(path) if path in shas else None
                imports |= modules.resolve(known.imports if known is not None else _imports(path, text), also)
        names_of_targets = {n for p in targets for n in module_names(p) if p in modules.resolve([n], also)}
        imported_by = set().union(*(index.importing(names_of_targets) for index in indexes.values()))
        imported_by -= shas.keys()
        dirs = {_split(p)[0] for p in targets}
        scores = bm25.joint_scores([(index.bm25, shas) for index in indexes.values()], problem)
        # The model's picks in its order, then the files an import links or that share a directory
        # (few), then the files that share a term with the issue (most of a large pool, often): ranked by
        # (tier, -score, path), the last tier sorted in C and its entries made only as far as `build`
        # reads them. Any other file (no link, another directory, no common term) is never shown.
        picked = {path: facts[path] for path in model_picks if path in pool and path in facts}
        in_dirs = set().union(*(index.in_dirs(dirs) for index in indexes.values()))
        near = {path for path in imports | imported_by | in_dirs if path in pool} - picked.keys()
        ranked = []
        for path in near:
            if path in facts:
                reason = "imports" if path in imports else "imported_by" if path in imported_by else ""
                tier, reason = (0, reason) if reason else (1, "same_package")
                ranked.append((tier, -scores.get(path, 0.0), path, reason, facts[path].tokens))
        ranked.sort()
        far = scores  # what is left of it: the files of no tier above
        for path in chain(near, picked):
            far.pop(path, None)
        head = [(path, pool[path], "model", f.tokens) for path, f in picked.items()]
        head += [(path, pool[path], reason, tokens) for _, _, path, reason, tokens in ranked]
        # The token counts of the tier's files, in one mapping (a copy only for a PR of several suffixes).
        tokens: dict[str, int] = {}
        for index in indexes.values():
            tokens = index.tokens if not tokens else {**tokens, **index.tokens}
        return head, far, pool, tokens

    def build(
        self,
        instance: str,
        base_commit: str,
        problem: str,
        modified: dict[str, str],
        new_paths: list[str],
        model_picks: Sequence[str] = (),
    ) -> ContextResult:
        """Modified files plus extras within `max_prompt_tokens`, shuffled by the instance id, rendered.
        `model_picks` are the unmodified files a ranking model named for this PR, most relevant first.

        Raises `Dropped("context_too_large")` when the modified files alone do not fit. Extras are
        chosen greedily by relevance with an estimate of each file's share of the prompt; the rendered
        prompt is then counted exactly, and the least relevant extras are dropped while it is too long.
        The prompt is rendered once in the usual case, in its final (shuffled) order, and returned with
        its count so that the row does not render or count it again.
        """
        style = self.config.prompt_style
        overhead = prompt_overhead(self.count, problem, style)
        budget = self.config.max_prompt_tokens - overhead
        used = sum(self.count(text) + _FILE_OVERHEAD for text in modified.values())
        if used > budget:
            raise Dropped("context_too_large", f"{used + overhead} tokens")
        files = list(modified.items())
        result = ContextResult(files=files, reasons=dict.fromkeys(modified, "modified"))
        chosen: list[tuple[str, str]] = []
        head, far, pool, tokens = self._ranked_tiers(base_commit, problem, modified, new_paths, model_picks)
        # Every tier, in order: each file that still fits, until `max_extra_files` are chosen. The
        # BM25-only tier is ordered a part at a time, as far as the choice goes: the files that fit
        # are usually near its top, and no file fits a room below the per-file overhead.
        room, slots = budget - used, self.config.max_extra_files
        sizes = np.fromiter((size for *_, size in head), dtype=np.int64, count=len(head))
        for at in _fitting(sizes, room, slots):
            path, sha, reason, size = head[at]
            chosen.append((path, sha))
            result.reasons[path] = reason
            room, slots = room - size, slots - 1
        first = True
        while far and slots and room >= _FILE_OVERHEAD:
            if first:  # the top of the tier: usually enough
                part = next(_best_first(far))
            else:
                # The rest, less what does not fit the room left now (it never fits later), in one pass
                # of array operations: a large pool's tier is mostly passed over once the room is small.
                keys = list(far)
                values = np.fromiter(far.values(), dtype=np.float64, count=len(keys))
                sizes = np.fromiter(map(tokens.__getitem__, keys), dtype=np.int64, count=len(keys))
                kept = np.flatnonzero((values < min(far[path] for path in part)) & (sizes <= room))
                far = {keys[at]: far[keys[at]] for at in kept.tolist()}
                part = [path for rest in _best_first(far) for path in rest]
            sizes = np.fromiter(map(tokens.__getitem__, part), dtype=np.int64, count=len(part))
            for at in _fitting(sizes, room, slots):
                chosen.append((part[at], pool[part[at]]))
                result.reasons[part[at]] = "bm25"
                room, slots = room - int(sizes[at]), slots - 1
            if not first:
                break
            first = False
        contents = self.reader.blobs(sha for _, sha in chosen)
        for path, sha in chosen:
            files.append((path, contents[sha].decode("utf-8")))
            result.extra.append(path)
        # The per-file overhead is an estimate; the rendered prompt is the truth. Drop the least relevant
        # extras until it fits (the modified files alone were checked above, up to that estimate).
        while True:
            shown = list(files)
            random.Random(f"{self.config.seed}:{instance}").shuffle(shown)
            messages = build_messages(problem, shown, style=style)
            tokens = self.count(messages[0]["content"]) + count_composed(
                self.count, messages[1]["content"], [text for _, text in shown]
            )
            if tokens <= self.config.max_prompt_tokens or not result.extra:
                break
            files.pop()
            result.reasons.pop(result.extra.pop())
        if tokens > self.config.max_prompt_tokens:
            raise Dropped("context_too_large", f"{tokens} tokens")
        result.files = shown
        result.messages = messages
        result.prompt_tokens = tokens
        return result


def _fitting(sizes: np.ndarray, room: int, slots: int) -> list[int]:
    """Indices of `sizes` taken in order, each that still fits in what `room` has left, at most `slots`:
    how `build` chooses extras. One array comparison per file taken, not a comparison and a branch in
    Python per file passed over (the sizes themselves are gathered in one `np.fromiter` pass): the
    BM25-only tier is most of a large pool, and mostly passed over once the budget is nearly spent."""
    taken: list[int] = []
    start = 0
    while len(taken) < slots:
        fits = np.flatnonzero(sizes[start:] <= room)
        if not fits.size:
            break
        at = start + int(fits[0])
        taken.append(at)
        room -= int(sizes[at])
        start = at + 1
    return taken


def _best_first(scores: dict[str, float], first: int = 64) -> Iterator[list[str]]:
    """The keys of `scores` by score descending, ties by key, in parts that double in size: a caller
    that reads the first few sorts a few (a threshold found by `np.partition`), not the whole tier.
    Every key scoring the threshold is in the same part, so parts joined are one total order."""
    keys = list(scores)
    values = np.fromiter(scores.values(), dtype=np.float64, count=len(keys))
    left = np.arange(len(keys))
    size = first
    while left.size:
        if left.size > size:
            threshold = np.partition(values[left], left.size - size)[left.size - size]
            top = values[left] >= threshold
            part, left = left[top], left[~top]
        else:
            part, left = left, left[:0]
        yield sorted((keys[i] for i in part.tolist()), key=lambda key: (-scores[key], key))
        size *= 2


def prompt_overhead(count: TokenCounter, problem: str, style: str) -> int:
    """Tokens of the prompt before any file is added (system prompt, issue, instructions)."""
    return count(system_prompt_for(style)) + count(render_repair_prompt(problem, [], style=style))


@lru_cache(maxsize=65_536)
def _split(path: str) -> tuple[str, str]:
    """(parent directory, suffix) as `PurePosixPath` gives them; memoised, paths repeat from PR to PR."""
    pure = PurePosixPath(path)
    return str(pure.parent), pure.suffix


# `_imports` memo: (path, length and hash of the text) -> modules, least recently used out first. Not
# keyed by the text itself: a memo holding whole files held hundreds of MiB of them on numpy/numpy. Two
# versions of one path of the same length whose 64-bit hashes collide would share an entry; a string's
# hash is computed once and kept by it, where a cryptographic digest cost several times more.
_IMPORTS: OrderedDict[tuple[str, int, int], frozenset[str]] = OrderedDict()
_IMPORTS_MAX = 4096


def _imports(path: str, text: str) -> frozenset[str]:
    """Modules a Python file imports; memoised because a modified file is often shown to several PRs."""
    key = (path, len(text), hash(text))
    found = _IMPORTS.get(key)
    if found is None:
        found = _IMPORTS[key] = frozenset(imported_modules(path, text))
        if len(_IMPORTS) > _IMPORTS_MAX:
            _IMPORTS.popitem(last=False)
    else:
        _IMPORTS.move_to_end(key)
    return found
