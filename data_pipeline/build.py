"""Stages 2-5 for one shard of candidates: filter, extract, context, render.

A shard is the unit of work, of parallelism and of resumption: `build_shard` reads a collect shard and
writes a rows shard and a drops shard, and is a pure function of its input, the repositories' objects and
the config. Running it twice (after a kill) gives the same files. It is a top-level function of plain
arguments so a process pool (or Ray) can run it anywhere the clones are.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from data_pipeline.config import MineConfig
from data_pipeline.context import ContextBuilder
from data_pipeline.decontam import Decontaminator
from data_pipeline.extract import Dropped, Extracted, extract
from data_pipeline.filters import candidate_drop_reason
from data_pipeline.gitstore import ObjectReader
from data_pipeline.render import build_row
from data_pipeline.schema import DROP_SCHEMA, ROW_SCHEMA, Candidate, drop
from data_pipeline.shards import read_rows, write_table
from data_pipeline.tokens import token_counter

_EXTRACT_STAGE_REASONS = {"context_too_large": "context", "not_expressible": "render"}


@dataclass(frozen=True)
class BuildTask:
    """Everything a worker needs: paths and config only (picklable, no open handles, no secrets)."""

    candidates: Path
    rows: Path
    drops: Path
    git_dirs: dict[str, str]
    config: MineConfig


def build_shard(task: BuildTask) -> dict[str, Any]:
    """Build one shard; returns {"rows": n, "drops": {reason: n}} for the manifest."""
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
        git_dir = Path(task.git_dirs[repo])
        with ObjectReader(git_dir) as reader:
            builder = ContextBuilder(reader, config.context, config.filters, count)
            group = [candidates[i] for i in indices]
            extracted = list(extract(git_dir, reader, group, config.filters))
            builder.prefetch(
                (result.base_commit, result.new) for _, result in extracted if isinstance(result, Extracted)
            )
            for i, (candidate, result) in zip(indices, extracted, strict=True):
                try:
                    if isinstance(result, Dropped):
                        raise result
                    context = builder.build(
                        candidate.instance_id,
                        result.base_commit,
                        candidate.problem_statement,
                        result.base,
                        [p for p in result.new if p not in result.base],
                    )
                    outcome[i] = build_row(candidate, result, context, count)
                except Dropped as dropped:
                    stage = _EXTRACT_STAGE_REASONS.get(dropped.reason, "extract")
                    drops.append(
                        (i, drop(candidate.instance_id, repo, stage, dropped.reason, dropped.detail))
                    )
    rows = [row for row in outcome if row is not None]
    drops.sort(key=lambda item: item[0])
    write_table(task.rows, rows, ROW_SCHEMA)
    write_table(task.drops, [d for _, d in drops], DROP_SCHEMA)
    return {"rows": len(rows), "drops": dict(Counter(d["reason"] for _, d in drops))}
