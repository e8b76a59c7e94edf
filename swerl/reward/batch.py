"""Score many rows on all cores without ever losing one.

A row holds `output` (the model answer), `code_context` and `oracle_new_content` (path -> content). Bad rows
(missing field, wrong type, undecodable JSON) get `reward = None` and an error in `reward_info` instead of
stopping the batch: a million-row scoring job must not die on row 731,002.
"""

from __future__ import annotations

import json
import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, TypeVar

from swerl.reward.similarity import RewardConfig, similarity_reward

BAD_ROW = "bad_row"
REQUIRED_FIELDS = ("output", "code_context", "oracle_new_content")
ScoredRow = tuple[float | None, dict[str, Any]]
T = TypeVar("T")


class BadRowError(ValueError):
    """A row that cannot be scored because of its shape, not because of the model's answer."""


def coerce_contents(value: Any, name: str) -> dict[str, str]:
    """Accept path -> content as a dict, a JSON object string, a Parquet map (list of pairs) or a list of
    `{"path": ..., "content": ...}` records, the shapes these columns take across JSONL, Parquet and HF
    datasets."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as err:
            raise BadRowError(f"{name}: not a JSON object ({err.msg})") from None
    if isinstance(value, Mapping):
        items = list(value.items())
    elif isinstance(value, list):
        items = []
        for item in value:
            if isinstance(item, Mapping) and set(item) >= {"path", "content"}:
                items.append((item["path"], item["content"]))
            elif isinstance(item, list | tuple) and len(item) == 2:
                items.append((item[0], item[1]))
            else:
                raise BadRowError(f"{name}: list items must be {{path, content}} records or pairs")
    else:
        raise BadRowError(f"{name}: expected path -> content mapping, got {type(value).__name__}")
    for path, content in items:
        if not isinstance(path, str) or not isinstance(content, str):
            raise BadRowError(f"{name}: paths and contents must be strings")
    return dict(items)


def score_row(row: Any, config: RewardConfig = RewardConfig()) -> ScoredRow:
    """Reward and JSON-ready info for one row; never raises for bad input."""
    try:
        if not isinstance(row, Mapping):
            raise BadRowError(f"row must be an object, got {type(row).__name__}")
        missing = [k for k in REQUIRED_FIELDS if row.get(k) is None]
        if missing:
            raise BadRowError(f"missing field(s): {', '.join(missing)}")
        if not isinstance(row["output"], str):
            raise BadRowError(f"output: expected a string, got {type(row['output']).__name__}")
        context = coerce_contents(row["code_context"], "code_context")
        oracle = coerce_contents(row["oracle_new_content"], "oracle_new_content")
    except BadRowError as err:
        return None, {"error": BAD_ROW, "message": str(err)}
    result = similarity_reward(row["output"], context, oracle, config=config)
    return result.reward, result.info()


def score_jsonl_line(line: str, config: RewardConfig = RewardConfig()) -> tuple[str, ScoredRow]:
    """One JSONL line in; the same row with `reward` and `reward_info` added, and the score, out.

    Decoding and encoding happen here, in the worker, so a multi-core batch parallelises them too. A line
    that is not valid JSON (or not an object) is kept verbatim under `_raw`; so is a line that is not valid
    UTF-8 (read with surrogateescape, so its bytes are written back unchanged), rather than scoring text
    in which a byte was silently replaced.
    """
    scored: ScoredRow
    try:
        line.encode("utf-8")
    except UnicodeEncodeError as err:
        byte = ord(line[err.start]) - 0xDC00
        row: Any = {"_raw": line.rstrip("\n")}
        message = f"not valid UTF-8 (byte 0x{byte:02x} at character {err.start})"
        scored = (None, {"error": BAD_ROW, "message": message})
        row["reward"], row["reward_info"] = scored
        return json.dumps(row, ensure_ascii=False) + "\n", scored
    try:
        row = json.loads(line)
    except json.JSONDecodeError as err:
        row = {"_raw": line.rstrip("\n")}
        scored = (None, {"error": BAD_ROW, "message": f"not valid JSON: {err.msg}"})
    else:
        scored = score_row(row, config)
        if not isinstance(row, dict):
            row = {"_raw": row}
    row["reward"], row["reward_info"] = scored
    return json.dumps(row, ensure_ascii=False) + "\n", scored


def _apply_chunk(fn: Callable[[Any, RewardConfig], T], items: list[Any], config: RewardConfig) -> list[T]:
    return [fn(item, config) for item in items]


def _chunks(rows: Iterable[Any], size: int) -> Iterator[list[Any]]:
    chunk: list[Any] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def default_workers() -> int:
    """The cores this process may use (respects CPU affinity, unlike os.cpu_count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def score_rows(
    rows: Iterable[Any],
    config: RewardConfig = RewardConfig(),
    *,
    workers: int | None = None,
    chunk_size: int = 64,
) -> Iterator[ScoredRow]:
    """Score row mappings in input order on `workers` processes (default: all usable cores)."""
    return map_rows(score_row, rows, config, workers=workers, chunk_size=chunk_size)


def map_rows(
    fn: Callable[[Any, RewardConfig], T],
    items: Iterable[Any],
    config: RewardConfig,
    *,
    workers: int | None = None,
    chunk_size: int = 64,
) -> Iterator[T]:
    """`fn(item, config)` for every item, in input order, streaming: ~2 chunks per worker in memory.

    With one worker everything runs in this process (no start-up cost, easy to debug); otherwise a
    forkserver pool is used, which is safe to start from a process that already holds threads (tqdm,
    pyarrow, torch) where plain fork is not. Nothing of swerl is preloaded into the forkserver: it is
    started with `-c`, so its sys.path begins with the current folder (Python 3.11 ignores the parent's
    sys.path there), and a `swerl/` folder there, such as a clone seen from its parent, would shadow an
    editable install for every worker; each worker imports swerl itself (~40 ms) after taking the
    parent's sys.path.
    """
    workers = default_workers() if workers is None else max(1, workers)
    if workers == 1:
        for chunk in _chunks(items, chunk_size):
            yield from _apply_chunk(fn, chunk, config)
        return
    context = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        pending: deque[Future[list[T]]] = deque()
        for chunk in _chunks(items, chunk_size):
            pending.append(pool.submit(_apply_chunk, fn, chunk, config))
            if len(pending) >= 2 * workers:
                yield from pending.popleft().result()
        while pending:
            yield from pending.popleft().result()
