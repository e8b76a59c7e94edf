"""Stage 4: the files a prompt shows: every modified file plus relevant unmodified ones, shuffled.

If only modified files were shown, a policy would learn to edit everything it sees. So the prompt also
shows unmodified files a developer would open: files the modified ones import or are imported by, files
in the same package, and files that BM25 ranks high against the issue text, in that order of preference,
as long as the token budget allows. The final order is a shuffle seeded by the instance id (reproducible,
independent of PYTHONHASHSEED). Unmodified files are read at the base commit through the object reader;
per-blob facts (term counts, imports, token count) are cached by blob sha, since most files are the same
blob from one PR to the next.
"""

from __future__ import annotations

import random
from collections import Counter, OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import PurePosixPath

from data_pipeline import bm25
from data_pipeline.config import ContextConfig, FilterConfig
from data_pipeline.extract import Dropped
from data_pipeline.filters import file_role
from data_pipeline.gitstore import GitError, ObjectReader
from data_pipeline.imports import ModuleIndex, imported_modules, module_names
from data_pipeline.tokens import TokenCounter, count_composed
from swerl.edit_format import SYSTEM_PROMPT, build_messages, render_repair_prompt

_CONTEXT_ROLES = frozenset({"source", "test"})
# Per-file overhead of the rendered block (`### path`, two fences, blank line), in estimated tokens.
_FILE_OVERHEAD = 8


@dataclass(frozen=True)
class BlobFacts:
    terms: Counter[str]
    length: int
    imports: frozenset[str]
    tokens: int


@dataclass
class ContextResult:
    """The files to show in prompt order, why each is there, and the rendered prompt with its count."""

    files: list[tuple[str, str]]
    extra: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)
    messages: list[dict[str, str]] = field(default_factory=list)
    prompt_tokens: int = 0


class ContextBuilder:
    """Chooses and orders context files for the PRs of one repository."""

    def __init__(
        self,
        reader: ObjectReader,
        config: ContextConfig,
        filters: FilterConfig,
        count: TokenCounter,
        cache_size: int = 20_000,
    ) -> None:
        self.reader = reader
        self.config = config
        self.filters = filters
        self.count = count
        self._facts: OrderedDict[str, BlobFacts | None] = OrderedDict()
        self._cache_size = cache_size

    def _pool(self, base_commit: str, suffixes: set[str], modified: Iterable[str] = ()) -> dict[str, str]:
        """path -> blob sha of the unmodified source and test files with one of `suffixes`, up to
        `max_candidate_files` in tree order: the files a prompt may show besides the modified ones."""
        pool: dict[str, str] = {}
        for entry in self.reader.list_files(base_commit):
            if len(pool) >= self.config.max_candidate_files:
                break
            if entry.path in modified or _split(entry.path)[1] not in suffixes:
                continue
            if file_role(entry.path) in _CONTEXT_ROLES:
                pool[entry.path] = entry.sha
        return pool

    def prefetch(self, work: Iterable[tuple[str, Iterable[str]]]) -> None:
        """Read, in a few pipelined batches, the trees and the not yet indexed blobs that the context of
        many PRs will need; `work` is (base commit, changed paths) per PR. Costs one round trip per tree
        level and one for the blobs, instead of several per PR."""
        work = [(commit, list(paths)) for commit, paths in work]
        self.reader.prefetch_trees(commit for commit, _ in work)
        unseen: dict[str, str] = {}
        for commit, paths in work:
            try:
                pool = self._pool(commit, {_split(p)[1] for p in paths})
            except GitError:
                continue  # reported by the PR's own build
            unseen.update((sha, path) for path, sha in pool.items() if sha not in self._facts)
        if unseen:
            self._facts_of({path: sha for sha, path in unseen.items()})

    def _facts_of(self, pool: dict[str, str]) -> dict[str, BlobFacts]:
        """Facts of each pooled file that is readable text; blobs not seen before are read in one batch."""
        unseen = [sha for sha in pool.values() if sha not in self._facts]
        data = self.reader.blobs(unseen) if unseen else {}
        out: dict[str, BlobFacts] = {}
        for path, sha in pool.items():
            if sha in self._facts:
                self._facts.move_to_end(sha)
                facts = self._facts[sha]
            else:
                facts = self._compute_facts(path, data[sha])
                self._facts[sha] = facts
                if len(self._facts) > self._cache_size:
                    self._facts.popitem(last=False)
            if facts is not None:
                out[path] = facts
        return out

    def _compute_facts(self, path: str, data: bytes) -> BlobFacts | None:
        if len(data) > self.filters.max_file_bytes or b"\0" in data:
            return None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return None
        counts, length = bm25.doc_stats(text)
        imports = _imports(path, text) if path.endswith(".py") else frozenset()
        return BlobFacts(counts, length, imports, self.count(text) + _FILE_OVERHEAD)

    def _ranked_extras(
        self, base_commit: str, problem: str, modified: dict[str, str], new_paths: list[str]
    ) -> list[tuple[str, str, str, int]]:
        """(path, blob sha, reason, tokens) of unmodified files, most relevant first."""
        pool = self._pool(base_commit, {_split(p)[1] for p in [*modified, *new_paths]}, modified)
        facts = self._facts_of(pool)
        index = ModuleIndex([*facts, *modified, *new_paths])
        targets = set(modified) | set(new_paths)
        imports: set[str] = set()
        for path, text in modified.items():
            if path.endswith(".py"):
                imports |= index.resolve(_imports(path, text))
        names_of_targets = {n for p in targets for n in module_names(p) if p in index.resolve([n])}
        imported_by = {p for p, f in facts.items() if f.imports & names_of_targets}
        dirs = {_split(p)[0] for p in targets}
        scores = dict(bm25.rank(problem, {p: (f.terms, f.length) for p, f in facts.items()}))
        ranked = []
        for path, f in facts.items():
            if path in imports or path in imported_by:
                tier, reason = 0, "imports" if path in imports else "imported_by"
            elif _split(path)[0] in dirs:
                tier, reason = 1, "same_package"
            elif scores.get(path, 0.0) > 0:
                tier, reason = 2, "bm25"
            else:
                continue
            ranked.append((tier, -scores.get(path, 0.0), path, reason, f.tokens))
        ranked.sort()
        return [(path, pool[path], reason, tokens) for _, _, path, reason, tokens in ranked]

    def build(
        self,
        instance: str,
        base_commit: str,
        problem: str,
        modified: dict[str, str],
        new_paths: list[str],
    ) -> ContextResult:
        """Modified files plus extras within `max_prompt_tokens`, shuffled by the instance id, rendered.

        Raises `Dropped("context_too_large")` when the modified files alone do not fit. Extras are
        chosen greedily by relevance with an estimate of each file's share of the prompt; the rendered
        prompt is then counted exactly, and the least relevant extras are dropped while it is too long.
        The prompt is rendered once in the usual case, in its final (shuffled) order, and returned with
        its count so that the row does not render or count it again.
        """
        overhead = self.count(SYSTEM_PROMPT) + self.count(render_repair_prompt(problem, []))
        budget = self.config.max_prompt_tokens - overhead
        used = sum(self.count(text) + _FILE_OVERHEAD for text in modified.values())
        if used > budget:
            raise Dropped("context_too_large", f"{used + overhead} tokens")
        files = list(modified.items())
        result = ContextResult(files=files, reasons=dict.fromkeys(modified, "modified"))
        chosen: list[tuple[str, str]] = []
        for path, sha, reason, tokens in self._ranked_extras(base_commit, problem, modified, new_paths):
            if len(chosen) >= self.config.max_extra_files:
                break
            if used + tokens > budget:
                continue
            used += tokens
            chosen.append((path, sha))
            result.reasons[path] = reason
        contents = self.reader.blobs(sha for _, sha in chosen)
        for path, sha in chosen:
            files.append((path, contents[sha].decode("utf-8")))
            result.extra.append(path)
        # The per-file overhead is an estimate; the rendered prompt is the truth. Drop the least relevant
        # extras until it fits (the modified files alone were checked above, up to that estimate).
        while True:
            shown = list(files)
            random.Random(f"{self.config.seed}:{instance}").shuffle(shown)
            messages = build_messages(problem, shown)
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


@lru_cache(maxsize=65_536)
def _split(path: str) -> tuple[str, str]:
    """(parent directory, suffix) as `PurePosixPath` gives them; memoised, paths repeat from PR to PR."""
    pure = PurePosixPath(path)
    return str(pure.parent), pure.suffix


@lru_cache(maxsize=4096)
def _imports(path: str, text: str) -> frozenset[str]:
    """Modules a Python file imports; memoised because a modified file is often shown to several PRs."""
    return frozenset(imported_modules(path, text))
