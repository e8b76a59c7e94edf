"""A mining run: collect -> extract (per shard, in parallel) -> dedup -> render (per shard, in parallel),
resumable at every shard.

Layout of the output directory:

    manifest.json              config, source identity, resolved state, finished shards and counts
    collect/shard-NNNNN.parquet  candidates (stage 1); collect/drops-NNNNN.parquet
    extract/shard-NNNNN.parquet    rows that passed filter, decontamination and extraction (instance id,
                                 repository, oracle patch: what dedup needs); extract/drops-NNNNN.parquet
    dedup/drops-NNNNN.parquet    near duplicates removed from each extract shard
    render/drops-NNNNN.parquet   rows whose prompt cannot fit or whose oracle the format cannot express
    data/shard-NNNNN.parquet     final rows: context and prompt of each kept row (only shards that kept
                                 at least one row)

A drops file exists only for a shard that its stage dropped something from (`shards.write_drops`).

Dedup runs before the token budget and the format are checked and before context is chosen, so rows it
drops never get counted, checked or rendered.
The stages overlap: each collect shard is submitted for extract as soon as the plan of workers gives it
one (`schedule.ShardPlan`: at once, or once its round of shards is listed), and each extracted shard is
deduplicated (on the driver) and submitted for render, on the worker that extracted it, as soon as it and
every shard before it are extracted, so the workers never wait for a whole stage to finish.
`data/` is the training set: `datasets.load_dataset("parquet", data_dir=OUT / "data")`.
A killed run started again with the same arguments skips every shard the manifest lists and redoes the
rest; because shards are deterministic and dedup replays finished shards in order, the final rows are
identical to those of an uninterrupted run.
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from data_pipeline.config import MineConfig
from data_pipeline.engines.pools import BLOCK, SAME_PROCESS, Pending, Submit, open_engine
from data_pipeline.engines.spill import SpillMap
from data_pipeline.filter.decontam import identify, identity_note
from data_pipeline.filter.dedup import Deduplicator, Fingerprint
from data_pipeline.run.schedule import ShardPlan
from data_pipeline.run.shards import Manifest, read_table, shard_intact, shard_name, write_drops, write_table
from data_pipeline.run.stages import (
    ExtractedShard,
    ExtractTask,
    RenderTask,
    extract_shard,
    render_shard,
    shard_fingerprints,
)
from data_pipeline.schema import CANDIDATE_SCHEMA, Candidate, drop
from data_pipeline.sources.base import Source

# Test hook: seconds to sleep after each finished build and render shard, so a test can kill a run mid-way.
_PAUSE_ENV = "SWERL_DATA_PAUSE_AFTER_SHARD"


@dataclass
class RunSummary:
    out: Path
    candidates: int = 0
    rows: int = 0
    drops: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0
    # Rows the context ranking model answered for without naming a usable file (see `model_rank.py`).
    model_no_picks: int = 0
    # Why whole repositories were excluded (a clone identified as a benchmark repository).
    notes: list[str] = field(default_factory=list)

    def report(self) -> str:
        lines = [
            f"candidates: {self.candidates}  rows: {self.rows}  ({self.seconds:.1f} s)"
            + (f"  -> {self.out / 'data'}" if self.rows else "")
        ]
        lines += [f"  dropped {reason}: {n}" for reason, n in self.drops.most_common()]
        lines += [f"  {note}" for note in self.notes]
        if not self.rows:
            lines.append(
                "  warning: no row was kept, so no shard was written to data/; the drops above say why (e.g. "
                "--languages, or a SWE-bench repository)"
            )
        if self.model_no_picks:
            lines.append(f"  rows the ranking model named no usable file for: {self.model_no_picks}")
        return "\n".join(lines)


# Entries of each growing index (seen instance ids, near-duplicate index) kept in memory before spilling
# to sqlite under OUT/scratch (a quarter as many rows for the near-duplicate index, ~3 KB per row): tens
# of MB for the seen ids, ~150 MB for the index, whatever the length of the history.
SPILL_LIMIT = 200_000


_STAGES = ("collect", "extract", "dedup", "render")

# Shards, per worker, that may be submitted for extract and not yet rendered. Extracted rows wait for
# their render in the memory of the worker that extracted them (`stages._EXTRACTED`), so this bounds that
# memory; a few blocks keep every worker busy while the driver deduplicates in order.
WINDOW_PER_WORKER = 3 * BLOCK


class _NoBar:
    """What a run without progress bars updates instead of a tqdm bar."""

    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def progress_bar(progress: bool, **options: Any) -> Any:
    """A tqdm bar, or a `_NoBar` without importing tqdm: its import (20 ms, with importlib.metadata)
    would come before the first worker can start, for a bar nobody sees."""
    if not progress:
        return _NoBar()
    from tqdm import tqdm

    return tqdm(**options)


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


def collect(source: Source, manifest: Manifest, config: MineConfig, progress: bool) -> Iterator[int]:
    """Stage 1: write candidate shards; yields the index of each collect shard, in order, as soon as it is
    written (or found recorded), so that its later stages can start while the listing goes on. On resume
    the (deterministic) listing is replayed, and shards already recorded are skipped without being
    rewritten; a finished stage is not listed again."""
    recorded = sorted(manifest.stage("collect")["shards"])
    note = getattr(source, "resume_note", lambda state: None)(manifest.state.get("source", {}))
    if note:
        print(f"swerl: note: {note}", file=sys.stderr)
    if manifest.done("collect"):
        yield from (_index_of(name) for name in recorded)
        return
    state = manifest.state.setdefault("source", {})
    source.prepare(state)
    manifest.save()
    out = manifest.out / "collect"
    seen = SpillMap(_scratch(manifest) / "collect-seen.sqlite", SPILL_LIMIT)
    if getattr(source, "supports_skip", False) and recorded:
        # API sources list PRs in ascending number per repository: instead of asking the API again for
        # what is recorded, continue after the last recorded PR of each repository.
        skip: dict[str, int] = {}
        for name in recorded:
            for record in read_table(out / name, ["repo", "pull_number", "instance_id"]).to_pylist():
                skip[record["repo"]] = max(skip.get(record["repo"], 0), record["pull_number"])
                seen.put(record["instance_id"], 1)
            yield _index_of(name)
        stream = _chunks(source.candidates(state, skip=skip), config.shard_size, seen)  # type: ignore[call-arg]
        first = len(recorded)
    else:
        stream = _chunks(source.candidates(state), config.shard_size, seen)
        first = 0
    with progress_bar(progress, desc="collect", unit=" PRs") as bar:
        for index, (batch, dups) in enumerate(stream, start=first):
            bar.update(len(batch))
            if not manifest.shard_done("collect", index):
                write_table(out / shard_name(index), [c.record() for c in batch], CANDIDATE_SCHEMA)
                write_drops(out / _drops_name(index), dups)
                repos = sorted({c.repo for c in batch})
                info = {"rows": len(batch), "drops": dict(Counter(d["reason"] for d in dups)), "repos": repos}
                manifest.record_shard("collect", index, info)
            yield index
    seen.close()
    extra = {"commits_scanned": source.commits_scanned} if hasattr(source, "commits_scanned") else {}
    extra.update(getattr(source, "faults", {}))  # dumps skipped, bad lines: for the report
    manifest.finish("collect", shards_total=len(manifest.stage("collect")["shards"]), **extra)


def _index_of(name: str) -> int:
    return int(name.removeprefix("shard-").removesuffix(".parquet"))


class _Pipeline:
    """Prepare, dedup and render of each collect shard, started as soon as its input exists.

    Prepare and render run on the engine; dedup, which is sequential by definition (the first row in run
    order wins), runs here on the fingerprints the extract workers computed. Shards move through the
    stages in order: the results of extract are taken in shard order, each is recorded, deduplicated
    and its render submitted, then render results are recorded in shard order. So every stage's
    manifest entries are in order and a shard is recorded only after every earlier one, exactly as in
    a run of one stage after another, and the rows are the same whatever the engine and the timing.
    """

    def __init__(
        self,
        source: Source,
        manifest: Manifest,
        config: MineConfig,
        submit: Submit[Any, Any],
        plan: ShardPlan,
        keep: bool,
        progress: bool,
        on_stage: Callable[[str], None] | None,
    ) -> None:
        self.source = source
        self.manifest = manifest
        self.config = config
        self.submit = submit
        self.plan = plan
        self.window = plan.round_size
        self.keep = keep
        self.on_stage = on_stage
        self.started: set[str] = set()
        self.git_dirs: dict[str, str] = {}
        # Shards released by the plan (with their worker) whose extract is not submitted yet, for room
        # in the window; then the submitted ones, in shard order.
        self.ready: deque[tuple[int, int]] = deque()
        self.extracting: deque[tuple[int, Pending[ExtractedShard] | None]] = deque()
        self.rendering: deque[tuple[int, Pending[dict[str, Any]] | None]] = deque()
        self.deduper = Deduplicator(config.dedup_threshold, _scratch(manifest), SPILL_LIMIT // 4)
        self.pause = float(os.environ.get(_PAUSE_ENV, "0") or 0)
        self.progress = progress
        self.bar = progress_bar(progress, desc="done", unit=" shards")

    def _stage(self, name: str) -> None:
        if name not in self.started:
            self.started.add(name)
            if self.on_stage:
                self.on_stage(name)

    def _git_dirs(self, index: int) -> dict[str, str]:
        repos = self.manifest.stage("collect")["shards"][shard_name(index)]["repos"]
        for repo in repos:
            if repo not in self.git_dirs:
                self.git_dirs[repo] = str(self.source.git_dir(repo))
        return {repo: self.git_dirs[repo] for repo in repos}

    def _identities(self, index: int) -> dict[str, str]:
        """The benchmark repository each repository of the shard is, by its commits (`decontam.identify`:
        one git call per repository and run, recorded in the manifest so a resumed run agrees)."""
        if not self.config.decontaminate:
            return {}
        known = self.manifest.state.setdefault("identities", {})
        found = {}
        for repo, git_dir in self._git_dirs(index).items():
            if repo not in known:
                identity = identify(Path(git_dir))
                known[repo] = None if identity is None else asdict(identity)
                self.manifest.save()
            if known[repo] is not None:
                found[repo] = known[repo]["repo"]
        return found

    def run(self) -> None:
        self._stage("collect")
        for index in collect(self.source, self.manifest, self.config, self.progress):
            self._stage("extract")
            self.plan.listed(index)
            self.ready.extend(self.plan.release())
            self._fill()
            self._advance(block=False)
            # Wait while the window is full, or while a round of released shards waits for room in it:
            # listing further would only hold more of them.
            while self._in_flight() > self.window or len(self.ready) >= self.window:
                self._advance_one()
        self.plan.finish()
        self.ready.extend(self.plan.release())
        while self.ready:
            self._advance_one()
        self._advance(block=True)
        self.deduper.close()
        for stage in ("extract", "dedup", "render"):
            self.manifest.finish(stage)
        self.bar.close()

    def _advance(self, block: bool) -> None:
        """Take every result that is ready (all of them when `block`), in shard order."""
        while self.extracting and (block or _ready(self.extracting[0][1])):
            index, task = self.extracting.popleft()
            if task is None:
                found = shard_fingerprints(
                    self.manifest.out / "extract" / shard_name(index), self.config.dedup_threshold
                )
            else:
                extracted = task.result()
                self._record("extract", index, extracted.info)
                found = extracted.fingerprints
            self._dedup(index, found)
        while self.rendering and (block or _ready(self.rendering[0][1])):
            index, pending = self.rendering.popleft()
            if pending is not None:
                self._record("render", index, pending.result())
            self.bar.update(1)

    def _advance_one(self) -> None:
        """Wait for the oldest shard in flight and take it (and whatever else is ready), then submit
        released shards for the room made."""
        if self.extracting:
            _wait(self.extracting[0][1])
        elif self.rendering:
            _wait(self.rendering[0][1])
        self._advance(block=False)
        self._fill()

    def _in_flight(self) -> int:
        return len(self.extracting) + len(self.rendering)

    def _fill(self) -> None:
        """Submit the extract of released shards, in order, while the window has room."""
        while self.ready and self._in_flight() <= self.window:
            index, worker = self.ready.popleft()
            task = None
            if not self.manifest.shard_done("extract", index):
                name = shard_name(index)
                task = self.submit(
                    extract_shard,
                    ExtractTask(
                        candidates=self.manifest.out / "collect" / name,
                        rows=self.manifest.out / "extract" / name,
                        drops=self.manifest.out / "extract" / _drops_name(index),
                        git_dirs=self._git_dirs(index),
                        config=self.config,
                        identities=self._identities(index),
                        keep=self.keep,
                    ),
                    worker,
                )
            self.extracting.append((index, task))

    def _record(self, stage: str, index: int, info: dict[str, Any]) -> None:
        self.manifest.record_shard(stage, index, info)
        if self.pause:
            time.sleep(self.pause)

    def _dedup(self, index: int, found: list[tuple[str, str, Fingerprint]]) -> None:
        """Near-duplicate removal over one shard's extracted rows, then its render. A shard whose dedup is
        recorded is replayed (the same checks in the same order, so the same drops) to rebuild the
        index. The render is given the dropped ids (not their file to read back)."""
        self._stage("dedup")
        drops = []
        for instance, repo, fingerprint in found:
            why = self.deduper.check_fingerprint(fingerprint)
            if why is not None:
                drops.append(drop(instance, repo, "dedup", "near_duplicate", why))
        if not self.manifest.shard_done("dedup", index):
            write_drops(self.manifest.out / "dedup" / _drops_name(index), drops)
            self.manifest.record_shard(
                "dedup",
                index,
                {"rows": len(found) - len(drops), "drops": dict(Counter(d["reason"] for d in drops))},
            )
        self._stage("render")
        task = None
        if not self.manifest.shard_done("render", index):
            name = shard_name(index)
            task = self.submit(
                render_shard,
                RenderTask(
                    candidates=self.manifest.out / "collect" / name,
                    extracted=self.manifest.out / "extract" / name,
                    dropped=frozenset(d["instance_id"] for d in drops),
                    rows=self.manifest.out / "data" / name,
                    drops=self.manifest.out / "render" / _drops_name(index),
                    git_dirs=self._git_dirs(index),
                    config=self.config,
                    identities=self._identities(index),
                ),
                self.plan.owner[index],  # where its extracted rows are
            )
        self.rendering.append((index, task))


def _ready(task: Pending[Any] | None) -> bool:
    return task is None or task.done()


def _wait(task: Pending[Any] | None) -> None:
    if task is not None:
        task.result()


def _shard_files(manifest: Manifest, stage: str, name: str, info: dict[str, Any]) -> list[tuple[Path, int]]:
    """The files a finished shard of `stage` left, with the rows each must hold."""
    dropped = sum(info.get("drops", {}).values())
    files = [(manifest.out / stage / name.replace("shard-", "drops-"), dropped)] if dropped else []
    if stage == "render":
        return [*files, (manifest.out / "data" / name, info["rows"])] if info["rows"] else files
    if stage in ("collect", "extract"):
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
    for stage in ("collect", "extract", "dedup", "render"):
        for info in manifest.stage(stage)["shards"].values():
            summary.drops.update(info.get("drops", {}))
    summary.candidates = sum(i["rows"] for i in manifest.stage("collect")["shards"].values())
    rendered = manifest.stage("render")["shards"].values()
    summary.rows = sum(i["rows"] for i in rendered)
    summary.model_no_picks = sum(i.get("model_no_picks", 0) for i in rendered)
    identities = manifest.state.get("identities", {})
    collected = manifest.stage("collect")
    for key, what in (("dumps_skipped", "unreadable dumps skipped"), ("bad_json_lines", "lines not JSON")):
        if collected.get(key):
            summary.notes.append(f"{what}: {collected[key]} (see the warnings)")
    mode = manifest.data["config"].get("mine", {}).get("decontaminate_mode", "repository")
    summary.notes += [identity_note(repo, found, mode) for repo, found in sorted(identities.items()) if found]
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
    per-shard extract and render stages (`local` process pool or `ray`) and does not change the rows.
    `on_stage` is called with each stage's name when that stage starts (stages overlap: a shard is
    extracted while later ones are still collected)."""
    start = time.perf_counter()
    run_config = {"source": source.describe(), "mine": config.record()}
    manifest = Manifest.open(out, run_config)
    check_finished(manifest)
    workers = workers or max(1, (os.cpu_count() or 1))
    # Rounds of shards need the listing to be quick (a local clone, or a listing recorded by an earlier
    # run) and processes that keep what they read (`schedule.py`).
    quick = engine == "local" and (manifest.done("collect") or getattr(source, "lists_quickly", False))
    plan = ShardPlan(workers, WINDOW_PER_WORKER * workers, BLOCK, quick)
    with open_engine(engine, workers) as submit:
        keep = SAME_PROCESS.get(engine, False)
        _Pipeline(source, manifest, config, submit, plan, keep, progress, on_stage).run()
    summary = summarize(manifest)
    summary.seconds = time.perf_counter() - start
    return summary
