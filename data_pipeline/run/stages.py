"""The per-shard work of a run: `extract_shard` (stage 2, filter and decontaminate; stage 3, extract)
before dedup, and `render_shard` (stage 5, context; stage 6, render, with its fit and expressibility
checks) after it, for the rows dedup kept only.

A shard is the unit of work, of parallelism and of resumption: each function reads its input shards and
writes its output shards, and is a pure function of them, the repositories' objects and the config.
Running it twice (after a kill) gives the same files. They are top-level functions of plain arguments so
a process pool (or Ray) can run them anywhere the clones are.

Filters and extraction come before near-duplicate removal (stage 4), the token budget and
expressibility after it. So near duplicates, which are most of the rows dropped on histories with
backports and re-landed changes, are never counted, checked against the format or given context.

What `extract_shard` read for a shard (contents of the modified files) stays in the memory of its
process until that shard's render, which the local engine runs on the same process: the extract shard
on disk holds only what dedup needs (instance id, repository, oracle patch). A render that finds
nothing in its process (a resumed run, the Ray engine, whose tasks go anywhere and which keeps nothing,
a shard pushed out of the bounded cache) extracts the shard again from its candidates: extraction is a
pure function of the candidates and the repository, so the rows are the same either way.
"""

from __future__ import annotations

import atexit
import os
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from data_pipeline.config import MineConfig
from data_pipeline.context.builder import ContextBuilder
from data_pipeline.context.model_rank import ModelRanker
from data_pipeline.context.tokens import token_counter
from data_pipeline.extract.commits import PatchReader
from data_pipeline.extract.contents import Dropped, Extracted, extract
from data_pipeline.filter.decontam import Decontaminator
from data_pipeline.filter.dedup import Fingerprint, fingerprints
from data_pipeline.filter.rules import candidate_drop_reason
from data_pipeline.render.rows import build_row, check_expressible
from data_pipeline.run.shards import DATA_COMPRESSION, read_rows, write_drops, write_table
from data_pipeline.schema import (
    EXTRACTED_SCHEMA,
    ROW_SCHEMA,
    Candidate,
    drop,
)
from swerl.git.objects import ObjectReader

# The stage each drop reason is recorded under, when it is not the stage that raised it.
_STAGE_OF_REASON = {"context_too_large": "context", "not_expressible": "render"}


@dataclass(frozen=True)
class ExtractTask:
    """Everything a worker needs: paths and config only (picklable, no open handles, no secrets)."""

    candidates: Path
    rows: Path
    drops: Path
    git_dirs: dict[str, str]
    config: MineConfig
    # Mined repository -> the benchmark repository its commits show it to be (`decontam.identify`).
    identities: dict[str, str] = field(default_factory=dict)
    # Leave the extracted rows in this process for the shard's render: only where the engine runs both
    # stages of a shard on one process (`engines.SAME_PROCESS`); elsewhere they would only hold memory.
    keep: bool = True


@dataclass(frozen=True)
class RenderTask:
    """The shard's candidates (to extract them again when the extracted rows are not in this process),
    the extract shard whose rows to render, the instance ids dedup dropped from it, where the final rows
    and drops go."""

    candidates: Path
    extracted: Path
    dropped: frozenset[str]
    rows: Path
    drops: Path
    git_dirs: dict[str, str]
    config: MineConfig
    identities: dict[str, str] = field(default_factory=dict)


# Git processes (object readers, patch readers) kept open across the shards a process runs, so that
# git's delta base cache and the reader's blob and tree caches stay warm from one shard to the next (a
# cold `git cat-file` or `git diff-tree` re-inflates every delta chain it meets). Objects are
# immutable, so what a cache holds is never stale; a few repositories at most, keyed by process id too
# so that a forked worker never shares its parent's pipe.
_Pipe = TypeVar("_Pipe", ObjectReader, PatchReader)
_PIPES: OrderedDict[tuple[int, str, str], ObjectReader | PatchReader] = OrderedDict()
_PIPES_MAX = 8

# Extracted rows of the shards this process extracted and has not rendered yet, by extract shard path.
# The driver keeps at most a few blocks of shards per worker between extract and render
# (`runner.WINDOW_PER_WORKER`), so this rarely evicts; an evicted shard is extracted again by its render.
# Bounded by shards and by the characters of file text held (numpy/numpy: up to ~100 MiB in 11 shards;
# a repository of large files could hold far more in as many shards), the newest shard always kept.
_EXTRACTED: OrderedDict[str, tuple[int, list[tuple[Candidate, Extracted]]]] = OrderedDict()
_EXTRACTED_MAX = 32
_EXTRACTED_CHARS = 64 << 20


def _text_size(rows: list[tuple[Candidate, Extracted]]) -> int:
    return sum(len(text) for _, r in rows for side in (r.base, r.new) for text in side.values())


def _keep_extracted(key: str, rows: list[tuple[Candidate, Extracted]]) -> None:
    _EXTRACTED[key] = (_text_size(rows), rows)
    held = sum(size for size, _ in _EXTRACTED.values())
    while len(_EXTRACTED) > 1 and (len(_EXTRACTED) > _EXTRACTED_MAX or held > _EXTRACTED_CHARS):
        _, (size, _) = _EXTRACTED.popitem(last=False)
        held -= size


def _pipe(kind: type[_Pipe], git_dir: str) -> _Pipe:
    key = (os.getpid(), kind.__name__, git_dir)
    pipe = _PIPES.get(key)
    if not isinstance(pipe, kind) or not pipe.alive():
        pipe = kind(Path(git_dir))
        _PIPES[key] = pipe
        if len(_PIPES) > _PIPES_MAX:
            (pid, *_), oldest = _PIPES.popitem(last=False)
            if pid == os.getpid():
                oldest.close()
    _PIPES.move_to_end(key)
    return pipe


@atexit.register
def _close_pipes() -> None:
    for (pid, *_), pipe in list(_PIPES.items()):
        if pid == os.getpid():
            pipe.close()
    _PIPES.clear()


@dataclass(frozen=True)
class ExtractedShard:
    """What `extract_shard` hands back: the manifest's record of the shard (rows, drops, CPU seconds),
    and (instance id, repo, dedup fingerprint) of each extracted row in shard order, for the driver's
    sequential dedup pass."""

    info: dict[str, Any]
    fingerprints: list[tuple[str, str, Fingerprint]]


def shard_fingerprints(path: Path, threshold: float) -> list[tuple[str, str, Fingerprint]]:
    """`ExtractedShard.fingerprints` of an extract shard written by an earlier run (replayed on resume)."""
    return _fingerprinted(read_rows(path), threshold)


def _fingerprinted(records: list[dict[str, Any]], threshold: float) -> list[tuple[str, str, Fingerprint]]:
    """(instance id, repo, dedup fingerprint) of each record of an extract shard, as extract writes it and
    as a resumed run reads it back: one shard at a time (`dedup.fingerprints`)."""
    keys = fingerprints([(record["repo"], record["oracle_patch"]) for record in records], threshold)
    return [(record["instance_id"], record["repo"], key) for record, key in zip(records, keys, strict=True)]


def _filter(
    candidates: list[Candidate], config: MineConfig, identities: dict[str, str]
) -> tuple[list[dict[str, str] | None], dict[str, list[int]]]:
    """Stage 2 on one shard: each candidate's filter or decontamination drop (None where it passes),
    and the indices of those that pass, by repository."""
    decon = Decontaminator.build(
        config.decontaminate,
        config.decontamination_ids,
        config.decontamination_repos,
        config.decontaminate_mode,
        identities,
    )
    drops: list[dict[str, str] | None] = [None] * len(candidates)
    passed: dict[str, list[int]] = {}
    for i, candidate in enumerate(candidates):
        reason = candidate_drop_reason(candidate, config.filters)
        contaminated = decon.reason(candidate.instance_id, candidate.repo, candidate.pull_number)
        if reason is not None:
            drops[i] = drop(candidate.instance_id, candidate.repo, "filter", reason)
        elif contaminated is not None:
            drops[i] = drop(
                candidate.instance_id, candidate.repo, "decontaminate", "contaminated", contaminated
            )
        else:
            passed.setdefault(candidate.repo, []).append(i)
    return drops, passed


def _filter_and_extract(
    candidates_path: Path, git_dirs: dict[str, str], config: MineConfig, identities: dict[str, str]
) -> tuple[list[tuple[Candidate, Extracted]], list[dict[str, str]]]:
    """Stages 2 and 3 on one shard: the extracted rows and the drops of both, in shard order."""
    candidates = [Candidate(**record) for record in read_rows(candidates_path)]
    drops, passed = _filter(candidates, config, identities)
    outcome: list[tuple[Candidate, Extracted] | dict[str, str] | None] = list(drops)
    for repo, indices in passed.items():
        reader = _pipe(ObjectReader, git_dirs[repo])
        patches = _pipe(PatchReader, git_dirs[repo])
        group = [candidates[i] for i in indices]
        for i, (candidate, result) in zip(
            indices, extract(reader, patches, group, config.filters), strict=True
        ):
            if isinstance(result, Dropped):
                outcome[i] = drop(candidate.instance_id, repo, "extract", result.reason, result.detail)
            else:
                outcome[i] = (candidate, result)
    rows = [item for item in outcome if isinstance(item, tuple)]
    dropped = [item for item in outcome if isinstance(item, dict)]
    return rows, dropped


def extract_shard(task: ExtractTask) -> ExtractedShard:
    """Stages 2 and 3 on one shard (filter, decontaminate, extract), written to the extract shard; the
    rows stay in this process for the render when `task.keep`."""
    started = time.process_time()
    rows, drops = _filter_and_extract(task.candidates, task.git_dirs, task.config, task.identities)
    if task.keep:
        _keep_extracted(str(task.rows), rows)
    records = [
        {"instance_id": c.instance_id, "repo": c.repo, "oracle_patch": r.oracle_patch} for c, r in rows
    ]
    write_table(task.rows, records, EXTRACTED_SCHEMA)
    write_drops(task.drops, drops)
    found = _fingerprinted(records, task.config.dedup_threshold)
    info = {"rows": len(rows), "drops": dict(Counter(d["reason"] for d in drops))}
    return ExtractedShard({**info, "cpu_s": _cpu_since(started)}, found)


def render_shard(task: RenderTask) -> dict[str, Any]:
    """Fit and expressibility checks, context and prompt of every extracted row that dedup kept; returns
    the manifest's record ({"rows": n, "drops": {reason: n}, "cpu_s": seconds}, plus "model_no_picks":
    n, the rows whose ranking model answer named no usable file, when a ranking model is configured).
    Writes no data file when no row is kept (`data/` holds only non-empty shards: readers such as
    `datasets` reject 0-row files)."""
    started = time.process_time()
    config = task.config
    count = token_counter(config.tokenizer)
    extracted = _EXTRACTED.pop(str(task.extracted), (0, None))[1]
    if extracted is None:
        extracted, _ = _filter_and_extract(task.candidates, task.git_dirs, config, task.identities)
    kept = [(c, r) for c, r in extracted if c.instance_id not in task.dropped]
    outcome: list[dict[str, Any] | None] = [None] * len(kept)
    drops: list[tuple[int, dict[str, str]]] = []
    by_repo: dict[str, list[int]] = {}
    for i, (candidate, result) in enumerate(kept):
        try:
            check_expressible(result)
        except Dropped as err:
            drops.append((i, _render_drop(candidate, err)))
            continue
        by_repo.setdefault(candidate.repo, []).append(i)
    builders: dict[str, ContextBuilder] = {}
    for repo, indices in by_repo.items():
        reader = _pipe(ObjectReader, task.git_dirs[repo])
        builders[repo] = ContextBuilder(reader, config.context, config.filters, count)
        builders[repo].prefetch(kept[i][1].base_commit for i in indices)
    ranker = ModelRanker.from_config(config.context)
    picks = _model_picks(ranker, builders, kept, by_repo) if ranker is not None else {}
    for repo, indices in by_repo.items():
        for i in indices:
            candidate, result = kept[i]
            try:
                context = builders[repo].build(
                    candidate.instance_id,
                    result.base_commit,
                    candidate.problem_statement,
                    result.base,
                    _new_paths(result),
                    picks.get(candidate.instance_id, ()),
                )
            except Dropped as err:
                drops.append((i, _render_drop(candidate, err)))
                continue
            outcome[i] = build_row(candidate, result, context, count)
    rows = [row for row in outcome if row is not None]
    drops.sort(key=lambda item: item[0])
    if rows:
        write_table(task.rows, rows, ROW_SCHEMA, DATA_COMPRESSION)
    else:
        task.rows.unlink(missing_ok=True)
    write_drops(task.drops, [d for _, d in drops])
    info: dict[str, Any] = {"rows": len(rows), "drops": dict(Counter(d["reason"] for _, d in drops))}
    if ranker is not None:
        info["model_no_picks"] = sum(1 for found in picks.values() if not found)
    info["cpu_s"] = _cpu_since(started)
    return info


def _cpu_since(started: float) -> float:
    """CPU seconds this process spent on a shard (its git readers' own CPU not included), recorded in the
    manifest so that `swerl data stats` can say where a run's time went."""
    return round(time.process_time() - started, 4)


def _new_paths(result: Extracted) -> list[str]:
    """Paths the PR adds (not in the base)."""
    return [p for p in result.new if p not in result.base]


def _render_drop(candidate: Candidate, err: Dropped) -> dict[str, str]:
    stage = _STAGE_OF_REASON.get(err.reason, "render")
    return drop(candidate.instance_id, candidate.repo, stage, err.reason, err.detail)


def _model_picks(
    ranker: ModelRanker,
    builders: dict[str, ContextBuilder],
    kept: list[tuple[Candidate, Extracted]],
    by_repo: dict[str, list[int]],
) -> dict[str, list[str]]:
    """instance id -> the files the ranking model picked, for every row about to get context: one batch
    of requests for the whole shard, so a slow server serves several rows at once."""
    asked: list[str] = []
    requests = []
    for repo, indices in by_repo.items():
        for i in indices:
            candidate, result = kept[i]
            request = builders[repo].rank_request(
                result.base_commit, candidate.problem_statement, result.base, _new_paths(result)
            )
            if request is not None:
                asked.append(candidate.instance_id)
                requests.append(request)
    return dict(zip(asked, ranker.rank_many(requests), strict=True))
