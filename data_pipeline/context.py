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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from data_pipeline import bm25
from data_pipeline.config import ContextConfig, FilterConfig
from data_pipeline.extract import Dropped
from data_pipeline.filters import file_role
from data_pipeline.gitstore import ObjectReader
from data_pipeline.imports import ModuleIndex, imported_modules, module_names
from data_pipeline.tokens import TokenCounter

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
    files: list[tuple[str, str]]
    extra: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)


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

    def _blob_facts(self, path: str, sha: str) -> BlobFacts | None:
        if sha in self._facts:
            self._facts.move_to_end(sha)
            return self._facts[sha]
        data = self.reader.blob(sha)
        facts: BlobFacts | None = None
        if len(data) <= self.filters.max_file_bytes and b"\0" not in data:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                text = None
            if text is not None:
                counts, length = bm25.doc_stats(text)
                imports = frozenset(imported_modules(path, text)) if path.endswith(".py") else frozenset()
                facts = BlobFacts(counts, length, imports, self.count(text) + _FILE_OVERHEAD)
        self._facts[sha] = facts
        if len(self._facts) > self._cache_size:
            self._facts.popitem(last=False)
        return facts

    def _ranked_extras(
        self, base_commit: str, problem: str, modified: dict[str, str], new_paths: list[str]
    ) -> list[tuple[str, str, str, int]]:
        """(path, blob sha, reason, tokens) of unmodified files, most relevant first."""
        suffixes = {PurePosixPath(p).suffix for p in [*modified, *new_paths]}
        pool: dict[str, str] = {}
        for entry in self.reader.list_files(base_commit):
            if len(pool) >= self.config.max_candidate_files:
                break
            if entry.path in modified or PurePosixPath(entry.path).suffix not in suffixes:
                continue
            if file_role(entry.path) in _CONTEXT_ROLES:
                pool[entry.path] = entry.sha
        facts = {path: f for path, sha in pool.items() if (f := self._blob_facts(path, sha)) is not None}
        index = ModuleIndex([*facts, *modified, *new_paths])
        targets = set(modified) | set(new_paths)
        imports: set[str] = set()
        for path, text in modified.items():
            if path.endswith(".py"):
                imports |= index.resolve(imported_modules(path, text))
        names_of_targets = {n for p in targets for n in module_names(p) if p in index.resolve([n])}
        imported_by = {p for p, f in facts.items() if f.imports & names_of_targets}
        dirs = {str(PurePosixPath(p).parent) for p in targets}
        scores = dict(bm25.rank(problem, {p: (f.terms, f.length) for p, f in facts.items()}))
        ranked = []
        for path, f in facts.items():
            if path in imports or path in imported_by:
                tier, reason = 0, "imports" if path in imports else "imported_by"
            elif str(PurePosixPath(path).parent) in dirs:
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
        overhead_tokens: int,
        measure: Callable[[list[tuple[str, str]]], int],
    ) -> ContextResult:
        """Modified files plus extras within `max_prompt_tokens`, shuffled by the instance id.

        `overhead_tokens` is the prompt without any file (system prompt, issue, instructions); `measure`
        counts the tokens of the prompt rendered with the given files. Raises
        `Dropped("context_too_large")` when the modified files alone do not fit.
        """
        budget = self.config.max_prompt_tokens - overhead_tokens
        used = sum(self.count(text) + _FILE_OVERHEAD for text in modified.values())
        if used > budget:
            raise Dropped("context_too_large", f"{used + overhead_tokens} tokens")
        files = list(modified.items())
        result = ContextResult(files=files, reasons=dict.fromkeys(modified, "modified"))
        for path, sha, reason, tokens in self._ranked_extras(base_commit, problem, modified, new_paths):
            if len(result.extra) >= self.config.max_extra_files:
                break
            if used + tokens > budget:
                continue
            used += tokens
            files.append((path, self.reader.blob(sha).decode("utf-8")))
            result.extra.append(path)
            result.reasons[path] = reason
        # The per-file overhead is an estimate; the rendered prompt is the truth. Drop the least relevant
        # extras until it fits (the modified files alone were checked above, up to that estimate).
        while measure(files) > self.config.max_prompt_tokens and result.extra:
            files.pop()
            result.reasons.pop(result.extra.pop())
        if measure(files) > self.config.max_prompt_tokens:
            raise Dropped("context_too_large", f"{measure(files)} tokens")
        rng = random.Random(f"{self.config.seed}:{instance}")
        rng.shuffle(files)
        return result
