"""A mining run: collect -> prepare (per shard, in parallel) -> dedup -> render (per shard, in parallel),
resumable at every shard.

Layout of the output directory:

    manifest.json              config, source identity, resolved state, finished shards and counts
    collect/shard-NNNNN.parquet  candidates (stage 1); collect/drops-NNNNN.parquet
    build/shard-NNNNN.parquet    prepared rows: after filter, decontamination, extraction and the checks
                                 that need no context (prompt fit, expressibility); build/drops-NNNNN.parquet
    dedup/drops-NNNNN.parquet    near duplicates removed from each build shard
    data/shard-NNNNN.parquet     final rows: context and prompt of each kept row (only shards that kept
                                 at least one row)

Dedup runs before context is chosen, so rows it drops never get context built or a prompt rendered.
`data/` is the training set: `datasets.load_dataset("parquet", data_dir=OUT / "data")`.
A killed run started again with the same arguments skips every shard the manifest lists and redoes the
rest; because shards are deterministic and dedup replays finished shards in order, the final rows are
identical to those of an uninterrupted run.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from tqdm import tqdm

from data_pipeline.build import BuildTask, RenderTask, prepare_shard, render_shard
from data_pipeline.config import MineConfig
from data_pipeline.dedup import Deduplicator
from data_pipeline.engines import run_ordered
from data_pipeline.schema import CANDIDATE_SCHEMA, DROP_SCHEMA, Candidate, drop
from data_pipeline.shards import Manifest, shard_intact, shard_name, write_table
from data_pipeline.sources.base import Source
from data_pipeline.spill import SpillMap

# Test hook: seconds to sleep after each finished build and render shard, so a test can kill a run mid-way.
_PAUSE_ENV = "SWERL_DATA_PAUSE_AFTER_SHARD"


@dataclass
class RunSummary:
    out: Path
    candidates: int = 0
    rows: int = 0
    drops: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0

    def report(self) -> str:
        lines = [
            f"candidates: {self.candidates}  rows: {self.rows}  ({self.seconds:.1f} s)"
            f"  -> {self.out / 'data'}"
        ]
        lines += [f"  dropped {reason}: {n}" for reason, n in self.drops.most_common()]
        return "\n".join(lines)


# Entries of each growing index (seen instance ids, near-duplicate index) kept in memory before spilling
# to sqlite under OUT/scratch (a quarter as many rows for the near-duplicate index, ~3 KB per row): tens
# of MB for the seen ids, ~150 MB for the index, whatever the length of the history.
SPILL_LIMIT = 200_000


_STAGES = ("collect", "build", "dedup", "render")


def _scratch(manifest: Manifest) -> Path:
    """Scratch files of a stage (rebuilt on resume, never read by anything else)."""
    return manifest.out / "scratch"


def _drops_name(index: int) -> str:
    return shard_name(index).replace("shard-", "drops-")


def _chunks(
    candidates: Iterator[Candidate], size: int, seen: SpillMap
) -> Iterator[tuple[list[Candidate], list[dict[str, str]]]]:
    """Shards of `size` candidates each, plus the duplicates dropped while filling each shard. `seen`
    holds the instance ids met so far, spilling to disk past its limit: a history of any length fits."""
    batch: list[Candidate] = []
    dups: list[dict[str, str]] = []
    for candidate in candidates:
        if candidate.instance_id in seen:
            dups.append(
                drop(
                    candidate.instance_id,
                    candidate.repo,
                    "collect",
                    "duplicate_instance",
                    candidate.merge_commit,
                )
            )
            continue
        seen.put(candidate.instance_id, 1)
        batch.append(candidate)
        if len(batch) == size:
            yield batch, dups
            batch, dups = [], []
    if batch or dups:
        yield batch, dups


def collect(source: Source, manifest: Manifest, config: MineConfig, progress: bool) -> None:
    """Stage 1: write candidate shards. On resume the (deterministic) listing is replayed, and shards
    already recorded are skipped without being rewritten."""
    if manifest.done("collect"):
        return
    state = manifest.state.setdefault("source", {})
    source.prepare(state)
    manifest.save()
    out = manifest.out / "collect"
    recorded = sorted(manifest.stage("collect")["shards"])
    seen = SpillMap(_scratch(manifest) / "collect-seen.sqlite", SPILL_LIMIT)
    if getattr(source, "supports_skip", False) and recorded:
        # API sources list PRs in ascending number per repository: instead of asking the API again for
        # what is recorded, continue after the last recorded PR of each repository.
        skip: dict[str, int] = {}
        for name in recorded:
            for record in pq.read_table(
                out / name, columns=["repo", "pull_number", "instance_id"]
            ).to_pylist():
                skip[record["repo"]] = max(skip.get(record["repo"], 0), record["pull_number"])
                seen.put(record["instance_id"], 1)
        stream = _chunks(source.candidates(state, skip=skip), config.shard_size, seen)  # type: ignore[call-arg]
        first = len(recorded)
    else:
        stream = _chunks(source.candidates(state), config.shard_size, seen)
        first = 0
    with tqdm(desc="collect", unit=" PRs", disable=not progress) as bar:
        for index, (batch, dups) in enumerate(stream, start=first):
            bar.update(len(batch))
            if manifest.shard_done("collect", index):
                continue
            write_table(out / shard_name(index), [c.record() for c in batch], CANDIDATE_SCHEMA)
            write_table(out / _drops_name(index), dups, DROP_SCHEMA)
            repos = sorted({c.repo for c in batch})
            info = {"rows": len(batch), "drops": dict(Counter(d["reason"] for d in dups)), "repos": repos}
            manifest.record_shard("collect", index, info)
    seen.close()
    extra = {"commits_scanned": source.commits_scanned} if hasattr(source, "commits_scanned") else {}
    manifest.finish("collect", shards_total=len(manifest.stage("collect")["shards"]), **extra)


def build(
    source: Source,
    manifest: Manifest,
    config: MineConfig,
    workers: int,
    progress: bool,
    engine: str = "local",
) -> None:
    """Filter, decontaminate, extract and check every collect shard not yet built, on `engine` (see
    `engines`)."""
    shards = sorted(manifest.stage("collect")["shards"])
    todo = [name for name in shards if name not in manifest.stage("build")["shards"]]
    git_dirs: dict[str, str] = {}
    tasks = []
    for name in todo:
        for repo in manifest.stage("collect")["shards"][name]["repos"]:
            if repo not in git_dirs:
                git_dirs[repo] = str(source.git_dir(repo))
        index = int(name.removeprefix("shard-").removesuffix(".parquet"))
        repos = manifest.stage("collect")["shards"][name]["repos"]
        tasks.append(
            (
                index,
                BuildTask(
                    candidates=manifest.out / "collect" / name,
                    rows=manifest.out / "build" / name,
                    drops=manifest.out / "build" / _drops_name(index),
                    git_dirs={repo: git_dirs[repo] for repo in repos},
                    config=config,
                ),
            )
        )
    pause = float(os.environ.get(_PAUSE_ENV, "0") or 0)
    bar = tqdm(
        total=len(shards), initial=len(shards) - len(todo), desc="build", unit=" shards", disable=not progress
    )

    def record(index: int, info: dict[str, Any]) -> None:
        manifest.record_shard("build", index, info)
        bar.update(1)
        if pause:
            time.sleep(pause)

    # In order, so the manifest never lists a shard before the ones before it are recorded.
    results = run_ordered(prepare_shard, [task for _, task in tasks], engine, workers)
    for (index, _), info in zip(tasks, results, strict=True):
        record(index, info)
    bar.close()
    manifest.finish("build")


def dedup(manifest: Manifest, config: MineConfig, progress: bool) -> None:
    """Near-duplicate removal over the prepared rows, in shard order. Finished shards are replayed (the
    same checks in the same order) to rebuild the index; only the three columns the check needs are
    read."""
    deduper = Deduplicator(config.dedup_threshold, _scratch(manifest), SPILL_LIMIT // 4)
    shards = sorted(manifest.stage("build")["shards"])
    for name in tqdm(shards, desc="dedup", unit=" shards", disable=not progress):
        index = int(name.removeprefix("shard-").removesuffix(".parquet"))
        checked = pq.read_table(
            manifest.out / "build" / name, columns=["instance_id", "repo", "oracle_patch"]
        ).to_pylist()
        if manifest.shard_done("dedup", index):
            for row in checked:
                deduper.check(row["repo"], row["oracle_patch"])
            continue
        drops = []
        for row in checked:
            why = deduper.check(row["repo"], row["oracle_patch"])
            if why is not None:
                drops.append(drop(row["instance_id"], row["repo"], "dedup", "near_duplicate", why))
        write_table(manifest.out / "dedup" / _drops_name(index), drops, DROP_SCHEMA)
        manifest.record_shard(
            "dedup",
            index,
            {"rows": len(checked) - len(drops), "drops": dict(Counter(d["reason"] for d in drops))},
        )
    deduper.close()
    manifest.finish("dedup")


def render(
    source: Source, manifest: Manifest, config: MineConfig, workers: int, progress: bool, engine: str
) -> None:
    """Context and prompt of the rows dedup kept, per shard, on `engine`: writes `data/`."""
    shards = sorted(manifest.stage("dedup")["shards"])
    todo = [name for name in shards if name not in manifest.stage("render")["shards"]]
    git_dirs: dict[str, str] = {}
    tasks = []
    for name in todo:
        index = int(name.removeprefix("shard-").removesuffix(".parquet"))
        repos = manifest.stage("collect")["shards"][name]["repos"]
        for repo in repos:
            if repo not in git_dirs:
                git_dirs[repo] = str(source.git_dir(repo))
        task = RenderTask(
            prepared=manifest.out / "build" / name,
            dropped=manifest.out / "dedup" / _drops_name(index),
            rows=manifest.out / "data" / name,
            git_dirs={repo: git_dirs[repo] for repo in repos},
            config=config,
        )
        tasks.append((index, task))
    pause = float(os.environ.get(_PAUSE_ENV, "0") or 0)
    bar = tqdm(
        total=len(shards),
        initial=len(shards) - len(todo),
        desc="render",
        unit=" shards",
        disable=not progress,
    )
    for (index, _), info in zip(
        tasks, run_ordered(render_shard, [task for _, task in tasks], engine, workers), strict=True
    ):
        manifest.record_shard("render", index, info)
        bar.update(1)
        if pause:
            time.sleep(pause)
    bar.close()
    manifest.finish("render")


def _shard_files(manifest: Manifest, stage: str, name: str, info: dict[str, Any]) -> list[tuple[Path, int]]:
    """The files a finished shard of `stage` left, with the rows each must hold."""
    if stage == "render":
        return [(manifest.out / "data" / name, info["rows"])] if info["rows"] else []
    files = [(manifest.out / stage / name.replace("shard-", "drops-"), sum(info.get("drops", {}).values()))]
    if stage in ("collect", "build"):
        files.append((manifest.out / stage / name, info["rows"]))
    return files


def check_finished(manifest: Manifest) -> list[str]:
    """Unrecord every finished shard whose files a crash lost or damaged; returns `stage/shard` of each.

    Stages are pure functions of their inputs, so a shard produced again is the same shard. Dedup replays
    finished shards in order, so redoing one shard's dedup leaves the others' results valid."""
    damaged = []
    for stage in _STAGES:
        for name, info in list(manifest.stage(stage)["shards"].items()):
            if not all(shard_intact(path, rows) for path, rows in _shard_files(manifest, stage, name, info)):
                manifest.forget_shard(stage, name)
                damaged.append(f"{stage}/{name}")
    if damaged:
        manifest.save(durable=True)
    return damaged


def summarize(manifest: Manifest) -> RunSummary:
    summary = RunSummary(manifest.out)
    for stage in ("collect", "build", "dedup"):
        for info in manifest.stage(stage)["shards"].values():
            summary.drops.update(info.get("drops", {}))
    summary.candidates = sum(i["rows"] for i in manifest.stage("collect")["shards"].values())
    summary.rows = sum(i["rows"] for i in manifest.stage("render")["shards"].values())
    return summary


def mine(
    out: Path,
    source: Source,
    config: MineConfig,
    *,
    workers: int | None = None,
    progress: bool = True,
    engine: str = "local",
    on_stage: Callable[[str], None] | None = None,
) -> RunSummary:
    """Run (or resume) every stage into `out`; returns counts for the closing report. The engine runs the
    per-shard build stage (`local` process pool or `ray`) and does not change the rows."""
    start = time.perf_counter()
    run_config = {"source": source.describe(), "mine": config.record()}
    manifest = Manifest.open(out, run_config)
    check_finished(manifest)
    workers = workers or max(1, (os.cpu_count() or 1))
    for name, step in (
        ("collect", lambda: collect(source, manifest, config, progress)),
        ("build", lambda: build(source, manifest, config, workers, progress, engine)),
        ("dedup", lambda: dedup(manifest, config, progress)),
        ("render", lambda: render(source, manifest, config, workers, progress, engine)),
    ):
        if on_stage:
            on_stage(name)
        step()
    summary = summarize(manifest)
    summary.seconds = time.perf_counter() - start
    return summary
