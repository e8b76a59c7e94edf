"""`swerl reward score`: score a JSONL or Parquet file of answers, streaming, on all cores.

The output is written to a temporary file next to the target and renamed into place only when every row
is written, so an interrupted run never leaves a truncated file that looks complete. A whole-file problem
(no rows, not Parquet, missing columns, no row that could be scored) is a `UserError` and writes nothing:
a file of null rewards with exit status 0 would pass for a result. pyarrow is imported only for Parquet,
so scoring a JSONL file starts without it.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from swerl.errors import UserError
from swerl.reward.batch import BAD_ROW, REQUIRED_FIELDS, map_rows, score_jsonl_line, score_rows
from swerl.reward.similarity import RewardConfig

if TYPE_CHECKING:
    import pyarrow as pa

PARQUET_SUFFIXES = (".parquet", ".pq")
JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")
PARQUET_BATCH_ROWS = 1024
SMALL_INPUT_ROWS = 256
"""Below this many rows the default is one process: starting a pool costs more than it saves."""


@dataclass
class ScoreSummary:
    """What a scoring run did, for the command's closing report."""

    rows: int = 0
    reward_sum: float = 0.0
    scored: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0
    first_bad: str | None = None

    def add(self, reward: float | None, info: dict[str, Any]) -> None:
        self.rows += 1
        if reward is not None:
            self.scored += 1
            self.reward_sum += reward
        if "error" in info:
            self.errors[info["error"]] += 1
            if info["error"] == BAD_ROW and self.first_bad is None:
                self.first_bad = f"row {self.rows}: {info.get('message', '')}"

    def check_usable(self, src: Path) -> None:
        """Refuse a result that only looks like one: no rows, or not one row that could be scored."""
        if self.rows == 0:
            raise UserError(f"{src}: no rows to score")
        if self.errors[BAD_ROW] == self.rows:
            raise UserError(
                f"{src}: none of its {self.rows} rows could be scored (first: {self.first_bad}); each row "
                f"needs {', '.join(REQUIRED_FIELDS)}"
            )

    def report(self) -> str:
        mean = self.reward_sum / self.scored if self.scored else float("nan")
        lines = [
            f"rows: {self.rows}  scored: {self.scored}  mean reward: {mean:.4f}  "
            f"({self.rows / max(self.seconds, 1e-9):.0f} rows/s)"
        ]
        lines += [f"  {kind}: {count}" for kind, count in self.errors.most_common()]
        return "\n".join(lines)


def file_format(path: Path) -> str:
    """'parquet' or 'jsonl' from the file name; anything else is an error the user can fix."""
    name = path.name.lower()
    if name.endswith(PARQUET_SUFFIXES):
        return "parquet"
    if name.endswith(JSONL_SUFFIXES):
        return "jsonl"
    raise UserError(f"{path}: unknown format; use a .jsonl or .parquet file name")


def _count_lines(path: Path) -> int:
    with path.open("rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))


def _default_workers_for(rows: int, workers: int | None) -> int | None:
    """An explicit worker count wins; otherwise small inputs stay in this process."""
    return 1 if workers is None and rows < SMALL_INPUT_ROWS else workers


def _jsonl_lines(path: Path) -> Iterator[str]:
    with path.open(encoding="utf-8", errors="surrogateescape") as f:
        yield from (line for line in f if line.strip())


def _score_jsonl(src: Path, tmp: Path, config: RewardConfig, workers: int | None, bar: tqdm) -> ScoreSummary:
    summary = ScoreSummary()
    bar.total = _count_lines(src)
    workers = _default_workers_for(bar.total, workers)
    with tmp.open("w", encoding="utf-8", errors="surrogateescape") as out:
        for line, (reward, info) in map_rows(score_jsonl_line, _jsonl_lines(src), config, workers=workers):
            out.write(line)
            summary.add(reward, info)
            bar.update()
    bar.total = bar.n  # the total counted line breaks, blank lines too: the bar ends full, not at 98/100
    return summary


def _with_reward(batch: pa.RecordBatch, scored: list[tuple[float | None, dict[str, Any]]]) -> pa.Table:
    import pyarrow as pa

    table = pa.Table.from_batches([batch]).drop_columns(
        [c for c in ("reward", "reward_info") if c in batch.schema.names]
    )
    table = table.append_column("reward", pa.array([r for r, _ in scored], type=pa.float64()))
    infos = [json.dumps(info, ensure_ascii=False) for _, info in scored]
    return table.append_column("reward_info", pa.array(infos, type=pa.string()))


def _score_parquet(
    src: Path, tmp: Path, config: RewardConfig, workers: int | None, bar: tqdm
) -> ScoreSummary:
    import pyarrow as pa
    import pyarrow.parquet as pq

    summary = ScoreSummary()
    try:
        source = pq.ParquetFile(src)
    except (pa.ArrowInvalid, OSError) as err:
        raise UserError(f"{src}: not a readable Parquet file ({err})") from None
    missing = [name for name in REQUIRED_FIELDS if name not in source.schema_arrow.names]
    if missing:
        raise UserError(
            f"{src}: no column {', '.join(missing)} (it has {', '.join(source.schema_arrow.names) or 'none'})"
        )
    bar.total = source.metadata.num_rows
    workers = _default_workers_for(bar.total, workers)
    batches: deque[pa.RecordBatch] = deque()

    def rows() -> Iterator[dict[str, Any]]:
        for batch in source.iter_batches(batch_size=PARQUET_BATCH_ROWS):
            batches.append(batch)
            yield from batch.to_pylist()

    writer: pq.ParquetWriter | None = None
    done: list[tuple[float | None, dict[str, Any]]] = []
    try:
        for reward, info in score_rows(rows(), config, workers=workers):
            done.append((reward, info))
            summary.add(reward, info)
            bar.update()
            if len(done) == batches[0].num_rows:
                table = _with_reward(batches.popleft(), done)
                writer = writer or pq.ParquetWriter(tmp, table.schema)
                writer.write_table(table)
                done = []
    finally:
        if writer is not None:
            writer.close()
    return summary


def score_file(
    src: Path,
    dst: Path,
    config: RewardConfig = RewardConfig(),
    *,
    workers: int | None = None,
    progress: bool = True,
) -> ScoreSummary:
    """Score every row of `src` into `dst` (formats from the file names; they may differ only if equal)."""
    kind = file_format(src)
    if file_format(dst) != kind:
        raise UserError(f"{dst}: output format must match the input ({kind})")
    if not src.is_file():
        raise UserError(f"{src}: no such file")
    if dst.is_dir():
        raise UserError(f"{dst} is a directory; give a file name")
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.tmp-{os.getpid()}")
    start = time.perf_counter()
    try:
        with tqdm(desc="scoring", unit="row", disable=not progress) as bar:
            score = _score_parquet if kind == "parquet" else _score_jsonl
            summary = score(src, tmp, config, workers, bar)
        summary.check_usable(src)
        os.replace(tmp, dst)
    finally:
        tmp.unlink(missing_ok=True)
    summary.seconds = time.perf_counter() - start
    return summary
