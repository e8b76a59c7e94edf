"""File localization: a model-free ranking, a model's ranking over a compact tree, and their merge.

The model-free ranking is BM25 over file contents plus boosts for what the issue names outright (paths,
stack frames, modules, defined names, command-line options) and a demotion of test files (fixes land in
source files), with the issue's title scored on its own as well, over the files' contents and over their
paths. It
needs no model, so localization stays useful with a weak or untrained policy. The model sees only a
compact tree and the issue, which is cheap, and its picks are fused with the model-free list by
reciprocal rank, so either source can pull a file up without the other's consent.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agentless.localize.elements import element_bm25
from agentless.localize.index import RepoIndex, is_peripheral_path, is_source
from agentless.localize.signals import IssueSignals, extract_signals, issue_title
from swerl.path_kinds import is_test_path
from swerl.retrieval.answers import paths_in_answer
from swerl.retrieval.bm25 import bm25_scores, doc_stats, terms


@dataclass(frozen=True)
class RankWeights:
    """How much each piece of evidence adds to a file's score (BM25 is normalized to [0, 1])."""

    bm25: float = 1.0
    title: float = 1.0
    """BM25 of the issue's first line alone (its title), normalized like the whole text's: the title says
    what is wrong in a few words, which a long body of logs and examples dilutes."""
    title_path: float = 0.5
    """BM25 of the title over the files' paths (directory and file names split into terms, without the
    extension), normalized the same way: a title names the broken feature in a few words, and projects
    name their packages and modules after features. Chosen on a tuning set (docs/benchmarks.md)."""
    file_stem: float = 0.6
    directory: float = 0.1
    path_mention: float = 3.0
    frame: float = 2.0
    deepest_frame: float = 1.0
    module: float = 1.5
    symbol: float = 1.0
    symbol_cap: float = 2.5
    max_symbol_files: int = 6
    option: float = 1.0
    test_factor: float = 0.3
    peripheral_factor: float = 0.3
    init_factor: float = 0.6
    element: float = 0.5
    """Second stage (`rerank_by_elements`): a file's best function or class, by BM25, adds up to this
    fraction of the top file's score."""
    element_files: int = 20
    """How many of the first files the second stage reads and splits into functions and classes."""
    dense: float = 0.0
    """`add_dense`: a file's similarity to the issue under a static embedding model adds up to this
    fraction of the top file's score (0: off; it needs an optional package)."""


@dataclass(frozen=True)
class RankedFile:
    path: str
    score: float
    reasons: dict[str, float]


def _spread(scores: dict[str, dict[str, float]], paths: Sequence[str], reason: str, amount: float) -> None:
    """Add `amount` split evenly over `paths` (an ambiguous mention says less about each candidate)."""
    sources = [p for p in paths if is_source(p)]
    for path in sources:
        current = scores[path].get(reason, 0.0)
        scores[path][reason] = max(current, amount / len(sources))


def _demotion(path: str, w: RankWeights) -> float:
    """The factor on a file's evidence for where it lies: fixes seldom land in tests, vendored code,
    docs or packaging metadata, and an `__init__.py` re-exports (so matches) every name of its package."""
    if is_test_path(path):
        return w.test_factor
    if is_peripheral_path(path):
        return w.peripheral_factor
    if path.endswith("/__init__.py"):
        return w.init_factor
    return 1.0


def _add_bm25(
    reasons: dict[str, dict[str, float]],
    paths: Sequence[str],
    docs: Sequence[tuple[Counter[str], int]],
    query: str,
    reason: str,
    weight: float,
) -> None:
    """BM25 of `query` over the files' documents as `reason`, normalized so the best file gets `weight`."""
    raw = bm25_scores(query, docs)
    best = max(raw, default=0.0)
    if best > 0:
        for path, value in zip(paths, raw, strict=True):
            if value > 0:
                reasons[path][reason] = weight * value / best


def rank_files(
    index: RepoIndex,
    issue: str,
    *,
    signals: IssueSignals | None = None,
    weights: RankWeights | None = None,
    top: int = 50,
) -> list[RankedFile]:
    """Source files of `index` ranked for `issue`, best first (ties by path, so runs are reproducible)."""
    w = weights or RankWeights()
    sig = signals or extract_signals(issue)
    reasons: dict[str, dict[str, float]] = defaultdict(dict)
    docs = index.docs()
    paths = list(docs)
    documents = [docs[p] for p in paths]
    _add_bm25(reasons, paths, documents, issue, "bm25", w.bm25)
    title = issue_title(issue)
    if title and w.title > 0:
        _add_bm25(reasons, paths, documents, title, "title", w.title)
    if title and w.title_path > 0:
        path_docs = [doc_stats(path.rsplit(".", 1)[0].replace("/", " ")) for path in paths]
        _add_bm25(reasons, paths, path_docs, title, "title_path", w.title_path)
    issue_terms = set(terms(issue))
    for path in paths:
        *dirs, name = path.split("/")
        stem_terms = set(terms(name.rsplit(".", 1)[0]))
        if stem_terms and stem_terms <= issue_terms and name != "__init__.py":
            reasons[path]["file_stem"] = w.file_stem
        dir_hits = sum(1 for d in dirs if set(terms(d)) & issue_terms)
        if dir_hits:
            reasons[path]["directory"] = w.directory * min(dir_hits, 3)
    for mention in sig.paths:
        _spread(reasons, index.by_suffix(mention), "path_mention", w.path_mention)
    resolved_frames = [(f, index.by_suffix(f.path)) for f in sig.frames]
    resolved_frames = [(f, found) for f, found in resolved_frames if any(is_source(p) for p in found)]
    for _, found in resolved_frames:
        _spread(reasons, found, "frame", w.frame)
    if resolved_frames:
        _spread(reasons, resolved_frames[-1][1], "deepest_frame", w.deepest_frame)
    for dotted in sig.modules:
        _spread(reasons, index.by_module(dotted), "module", w.module)
    symbol_scores: dict[str, float] = defaultdict(float)
    for name, count in sig.identifiers.items():
        if len(name) < 3:
            continue
        defining = index.defining(name)
        if 0 < len(defining) <= w.max_symbol_files:
            for path in defining:
                symbol_scores[path] += w.symbol * min(1.0, count / 2) / len(defining)
    for path, value in symbol_scores.items():
        reasons[path]["symbol"] = min(value, w.symbol_cap)
    for option in sig.options:
        # Tests pass options as literals too; the file that declares one is the one that handles it.
        declaring = [p for p in index.spelling_option(option) if not is_test_path(p)]
        if 0 < len(declaring) <= w.max_symbol_files:
            _spread(reasons, declaring, "option", w.option)
    ranked = []
    for path, parts in reasons.items():
        score = sum(parts.values()) * _demotion(path, w)
        if score > 0:
            ranked.append(RankedFile(path, score, dict(parts)))
    ranked.sort(key=lambda r: (-r.score, r.path))
    return ranked[:top]


def rerank_by_elements(
    ranked: Sequence[RankedFile],
    sources: Mapping[str, str],
    issue: str,
    *,
    weights: RankWeights | None = None,
) -> list[RankedFile]:
    """The first `element_files` files of `ranked` re-ordered by their score plus their best element's
    BM25 (as Agentless narrows files, then functions); the rest keep their places.

    Whole-file BM25 dilutes a short function that matches the issue well in a long module that matches
    it thinly everywhere; scoring each function or class on its own finds it. Splitting only the top
    files keeps this cheap (20 files per issue rather than every file of every commit). The bonus is
    relative to the top file's score, because first-stage scores range from about 1 (words only) to
    about 10 (a traceback and names), and a fixed bonus would overturn weak rankings and never strong
    ones. `sources` maps paths to their text; a file missing from it, or that does not parse, gets no
    bonus.
    """
    w = weights or RankWeights()
    head = list(ranked[: w.element_files])
    if not head or w.element <= 0:
        return list(ranked)
    best: dict[str, float] = {}
    for path, _, score in element_bm25(sources, issue, [r.path for r in head]):
        best[path] = max(best.get(path, 0.0), score)
    scale = w.element * head[0].score
    boosted = []
    for r in head:
        bonus = scale * best.get(r.path, 0.0)
        reasons = {**r.reasons, "element": bonus} if bonus > 0 else dict(r.reasons)
        boosted.append(RankedFile(r.path, r.score + bonus, reasons))
    boosted.sort(key=lambda r: (-r.score, r.path))
    return boosted + list(ranked[w.element_files :])


def add_dense(
    ranked: Sequence[RankedFile],
    similarity: Mapping[str, float],
    *,
    weights: RankWeights | None = None,
    top: int = 50,
) -> list[RankedFile]:
    """`ranked` with a bonus for files similar to the issue (`dense.dense_scores`), re-sorted.

    Cosine similarities of a static model are high for every file (about 0.3 to 0.8), so what counts is
    how far a file stands above the typical one: (similarity - median) / (max - median), negative
    values cut to 0. Like the element bonus it is relative to the top file's score, so a traceback's
    certainty is not overturned and a words-only ranking can be; a file the first stage did not rank
    at all can enter. The bonus is demoted for tests, vendored code and `__init__.py` as the file's other
    evidence is. Pass the whole first-stage ranking (`rank_files(..., top=len(index.stats))`), so that a
    file's own score is kept however low it ranked before the bonus.
    """
    w = weights or RankWeights()
    if w.dense <= 0 or not similarity:
        return list(ranked)[:top]
    values = sorted(similarity.values())
    median, best = values[len(values) // 2], values[-1]
    scale = w.dense * (ranked[0].score if ranked else 1.0)
    by_path = {r.path: r for r in ranked}
    out = []
    for path in by_path.keys() | similarity.keys():
        first = by_path.get(path, RankedFile(path, 0.0, {}))
        relative = (
            max(0.0, (similarity.get(path, median) - median) / (best - median)) if best > median else 0.0
        )
        bonus = scale * relative * _demotion(path, w)
        if first.score + bonus > 0:
            reasons = {**first.reasons, "dense": round(bonus, 4)} if bonus > 0 else dict(first.reasons)
            out.append(RankedFile(path, first.score + bonus, reasons))
    out.sort(key=lambda r: (-r.score, r.path))
    return out[:top]


def compact_tree(paths: Sequence[str], *, max_chars: int = 20_000, include_tests: bool = False) -> str:
    """An indented tree of the source files, small enough for a prompt.

    Test files go first when it is too long (fixes rarely land there), then the deepest levels, and a
    final line says how much was left out, so the model knows the listing is partial.
    """
    kept = sorted(p for p in paths if is_source(p) and (include_tests or not is_test_path(p)))
    depth_limit = max((p.count("/") for p in kept), default=0)
    while True:
        shown = [p for p in kept if p.count("/") <= depth_limit]
        lines: list[str] = []
        seen_dirs: set[str] = set()
        for path in shown:
            parts = path.split("/")
            for depth in range(len(parts) - 1):
                directory = "/".join(parts[: depth + 1])
                if directory not in seen_dirs:
                    seen_dirs.add(directory)
                    lines.append("  " * depth + parts[depth] + "/")
            lines.append("  " * (len(parts) - 1) + parts[-1])
        text = "\n".join(lines)
        if len(text) <= max_chars or depth_limit == 0:
            break
        depth_limit -= 1
    left_out = sum(1 for p in paths if is_source(p)) - len(shown)
    if left_out > 0:
        text += f"\n({left_out} files not shown)"
    return text[:max_chars]


_FILE_PROMPT = """\
Below is an issue reported on a software repository, and the layout of the repository's source files.

<issue>
{issue}
</issue>

<repository>
{tree}
</repository>

Which files would have to change to resolve the issue? Name at most {k} files, the most likely first, \
one full path per line, exactly as in the layout above, inside a single ``` block. Write nothing else."""


def file_ranking_messages(issue: str, tree: str, *, k: int = 5) -> list[dict[str, str]]:
    """The chat messages asking a model to pick files from the tree."""
    content = _FILE_PROMPT.format(issue=issue.strip(), tree=tree, k=k)
    return [{"role": "user", "content": content}]


def parse_file_ranking(text: str, index: RepoIndex, *, k: int = 5) -> list[str]:
    """Repository files named in the model's answer, in order; unknown or ambiguous names are dropped.
    A name may be a unique suffix of a path (models often drop the leading directories)."""
    found: list[str] = []
    for candidate in paths_in_answer(text):
        match = [candidate] if candidate in index.blobs else index.by_suffix(candidate)
        if len(match) == 1 and is_source(match[0]) and match[0] not in found:
            found.append(match[0])
        if len(found) >= k:
            break
    return found


def merge_rankings(
    model_free: Sequence[str], model: Sequence[str], *, model_weight: float = 1.0, k: int = 10
) -> list[str]:
    """Reciprocal-rank fusion (score = sum of weight / (k + rank)); ties keep the model-free order."""
    score: dict[str, float] = defaultdict(float)
    for rank, path in enumerate(model_free):
        score[path] += 1.0 / (k + rank + 1)
    for rank, path in enumerate(model):
        score[path] += model_weight / (k + rank + 1)
    order = {path: i for i, path in enumerate(list(model_free) + [p for p in model if p not in model_free])}
    return sorted(score, key=lambda p: (-score[p], order[p]))
