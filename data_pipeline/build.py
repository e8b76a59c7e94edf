"""Per-shard stages: `prepare_shard` (filter, decontaminate, extract, the fit and expressibility checks)
before dedup, and `render_shard` (context, render) after it, for the rows dedup kept only.

A shard is the unit of work, of parallelism and of resumption: each function reads its input shards and
writes its output shards, and is a pure function of them, the repositories' objects and the config.
Running it twice (after a kill) gives the same files. They are top-level functions of plain arguments so
a process pool (or Ray) can run them anywhere the clones are.

Every reason to drop a row that is known before its context is chosen is checked in `prepare_shard`:
the modified files alone decide whether a prompt can fit (`context.check_fits`) and whether the oracle
is expressible (`render.check_expressible`). So near duplicates, which are most of the rows dropped on
histories with backports and re-landed changes, never get context built or a prompt rendered.
"""

from __future__ import annotations

import atexit
import os
from collections import Counter, OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pyarrow.parquet as pq

from data_pipeline.commits import PatchReader
from data_pipeline.config import MineConfig
from data_pipeline.context import ContextBuilder, check_fits
from data_pipeline.decontam import Decontaminator
from data_pipeline.dedup import Fingerprint, fingerprint
from data_pipeline.extract import Dropped, Extracted, extract
from data_pipeline.filters import candidate_drop_reason
from data_pipeline.gitstore import ObjectReader
from data_pipeline.render import build_row, check_expressible
from data_pipeline.schema import (
    CANDIDATE_SCHEMA,
    DROP_SCHEMA,
    PREPARED_SCHEMA,
    ROW_SCHEMA,
    Candidate,
    drop,
)
from data_pipeline.shards import read_rows, write_table
from data_pipeline.tokens import token_counter

_EXTRACT_STAGE_REASONS = {"context_too_large": "context", "not_expressible": "render"}
_CANDIDATE_FIELDS = tuple(CANDIDATE_SCHEMA.names)


@dataclass(frozen=True)
class BuildTask:
    """Everything a worker needs: paths and config only (picklable, no open handles, no secrets)."""

    candidates: Path
    rows: Path
    drops: Path
    git_dirs: dict[str, str]
    config: MineConfig


@dataclass(frozen=True)
class RenderTask:
    """Prepared rows, the ids dedup dropped from them, where the final rows go."""

    prepared: Path
    dropped: Path
    rows: Path
    git_dirs: dict[str, str]
    config: MineConfig


# Git processes (object readers, patch readers) kept open across the shards a process runs, so that
# git's delta base cache and the reader's blob and tree caches stay warm from one shard to the next (a
# cold `git cat-file` or `git diff-tree` re-inflates every delta chain it meets). Objects are
# immutable, so what a cache holds is never stale; a few repositories at most, keyed by process id too
# so that a forked worker never shares its parent's pipe.
_Pipe = TypeVar("_Pipe", ObjectReader, PatchReader)
_PIPES: OrderedDict[tuple[int, str, str], ObjectReader | PatchReader] = OrderedDict()
_PIPES_MAX = 8


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


def _prepared_record(candidate: Candidate, result: Extracted) -> dict[str, Any]:
    return {
        **candidate.record(),
        "merge_commit": result.merge_commit,
        "base_commit": result.base_commit,
        "base": [{"path": p, "content": c} for p, c in result.base.items()],
        "new": [{"path": p, "content": c} for p, c in result.new.items()],
        "oracle_patch": result.oracle_patch,
        "test_patch": result.test_patch,
        "changed_test_files": result.changed_test_files,
        "excluded_files": result.excluded_files,
        "lines_changed": result.lines_changed,
    }


def _from_prepared(record: dict[str, Any]) -> tuple[Candidate, Extracted]:
    candidate = Candidate(**{name: record[name] for name in _CANDIDATE_FIELDS})
    extracted = Extracted(
        base_commit=record["base_commit"],
        merge_commit=record["merge_commit"],
        base={f["path"]: f["content"] for f in record["base"]},
        new={f["path"]: f["content"] for f in record["new"]},
        oracle_patch=record["oracle_patch"],
        test_patch=record["test_patch"],
        changed_test_files=record["changed_test_files"],
        excluded_files=record["excluded_files"],
        lines_changed=record["lines_changed"],
    )
    return candidate, extracted


@dataclass(frozen=True)
class Prepared:
    """What `prepare_shard` hands back: the manifest's record of the shard, and (instance id, repo,
    dedup fingerprint) of each prepared row in shard order, for the driver's sequential dedup pass."""

    info: dict[str, Any]
    fingerprints: list[tuple[str, str, Fingerprint]]


def shard_fingerprints(path: Path, threshold: float) -> list[tuple[str, str, Fingerprint]]:
    """`Prepared.fingerprints` of a build shard written by an earlier run (replayed on resume); only the
    three columns they depend on are read."""
    rows = pq.read_table(path, columns=["instance_id", "repo", "oracle_patch"]).to_pylist()
    return [
        (row["instance_id"], row["repo"], fingerprint(row["repo"], row["oracle_patch"], threshold))
        for row in rows
    ]


def prepare_shard(task: BuildTask) -> Prepared:
    """Filter, decontaminate, extract and check one shard."""
    config = task.config
    count = token_counter(config.tokenizer)
    decon = Decontaminator.build(
        config.decontaminate, config.decontamination_ids, config.decontamination_repos
    )
    candidates = [Candidate(**record) for record in read_rows(task.candidates)]
    outcome: list[dict[str, Any] | None] = [None] * len(candidates)
    drops: list[tuple[int, dict[str, str]]] = []
    by_repo: dict[str, list[int]] = {}
    for i, candidate in enumerate(candidates):
        reason = candidate_drop_reason(candidate, config.filters)
        contaminated = decon.reason(candidate.instance_id, candidate.repo)
        if reason is not None:
            drops.append((i, drop(candidate.instance_id, candidate.repo, "filter", reason)))
        elif contaminated is not None:
            drops.append(
                (
                    i,
                    drop(
                        candidate.instance_id, candidate.repo, "decontaminate", "contaminated", contaminated
                    ),
                )
            )
        else:
            by_repo.setdefault(candidate.repo, []).append(i)
    for repo, indices in by_repo.items():
        reader = _pipe(ObjectReader, task.git_dirs[repo])
        patches = _pipe(PatchReader, task.git_dirs[repo])
        group = [candidates[i] for i in indices]
        for i, (candidate, result) in zip(
            indices, extract(reader, patches, group, config.filters), strict=True
        ):
            try:
                if isinstance(result, Dropped):
                    raise result
                check_fits(
                    config.context, count, candidate.instance_id, candidate.problem_statement, result.base
                )
                check_expressible(result)
                outcome[i] = _prepared_record(candidate, result)
            except Dropped as dropped:
                stage = _EXTRACT_STAGE_REASONS.get(dropped.reason, "extract")
                drops.append((i, drop(candidate.instance_id, repo, stage, dropped.reason, dropped.detail)))
    rows = [row for row in outcome if row is not None]
    drops.sort(key=lambda item: item[0])
    write_table(task.rows, rows, PREPARED_SCHEMA)
    write_table(task.drops, [d for _, d in drops], DROP_SCHEMA)
    threshold = config.dedup_threshold
    return Prepared(
        {"rows": len(rows), "drops": dict(Counter(d["reason"] for _, d in drops))},
        [
            (row["instance_id"], row["repo"], fingerprint(row["repo"], row["oracle_patch"], threshold))
            for row in rows
        ],
    )


def render_shard(task: RenderTask) -> dict[str, Any]:
    """Context and prompt of every prepared row that dedup kept; returns {"rows": n}. Writes no file when
    no row is kept (`data/` holds only non-empty shards: readers such as `datasets` reject 0-row files).
    """
    config = task.config
    count = token_counter(config.tokenizer)
    dropped = set(pq.read_table(task.dropped, columns=["instance_id"]).column(0).to_pylist())
    kept = [_from_prepared(r) for r in read_rows(task.prepared) if r["instance_id"] not in dropped]
    by_repo: dict[str, list[int]] = {}
    for i, (candidate, _) in enumerate(kept):
        by_repo.setdefault(candidate.repo, []).append(i)
    rows: list[dict[str, Any] | None] = [None] * len(kept)
    for repo, indices in by_repo.items():
        reader = _pipe(ObjectReader, task.git_dirs[repo])
        builder = ContextBuilder(reader, config.context, config.filters, count)
        builder.prefetch((kept[i][1].base_commit, kept[i][1].new) for i in indices)
        for i in indices:
            candidate, result = kept[i]
            try:
                context = builder.build(
                    candidate.instance_id,
                    result.base_commit,
                    candidate.problem_statement,
                    result.base,
                    [p for p in result.new if p not in result.base],
                )
            except Dropped as err:  # `check_fits` decides this before dedup; reaching here is a bug
                raise RuntimeError(f"{candidate.instance_id}: {err.reason} after prepare") from err
            rows[i] = build_row(candidate, result, context, count)
    if kept:
        write_table(task.rows, rows, ROW_SCHEMA)  # type: ignore[arg-type]
    else:
        task.rows.unlink(missing_ok=True)
    return {"rows": len(kept)}
