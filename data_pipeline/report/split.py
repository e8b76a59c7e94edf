"""`swerl data split`: a mined output's rows as a training file and a held-out file.

Why not a random split by default: PRs of one repository share files, authors and often the very
functions they fix, so a row held out at random usually has a sibling in training that shows most of
its answer. Held-out rows are chosen so that nothing about them was seen:

- `time` (default): the newest PRs by creation time (training on the past, evaluating on the future,
  as a model trained today meets tomorrow's issues); ties broken by instance id;
- `repo`: whole repositories, the newest-first order of their first PR deciding which (needs rows of
  at least two repositories);
- `random`: rows drawn with `seed`, for comparison with the above.

The choice is a pure function of the rows and the options, so a rerun gives the same files.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from data_pipeline.run.shards import read_table, write_arrow
from swerl.errors import UserError
from swerl.paths import finished_shards

METHODS = ("time", "repo", "random")


def held_out_rows(table: pa.Table, method: str, size: int, seed: int = 0) -> list[int]:
    """Indices of the `size` rows of `table` to hold out (sorted); `repo` holds out whole repositories
    until at least `size` rows are out, so it may hold out more."""
    if not 0 < size < table.num_rows:
        raise UserError(f"the held-out set must leave rows on both sides: {size} of {table.num_rows} rows")
    ids = table.column("instance_id").to_pylist()
    created = [_instant(text) for text in table.column("created_at").to_pylist()]
    newest_first = sorted(range(table.num_rows), key=lambda i: (created[i], ids[i]), reverse=True)
    if method == "time":
        return sorted(newest_first[:size])
    if method == "random":
        return sorted(random.Random(seed).sample(range(table.num_rows), size))
    if method != "repo":
        raise UserError(f"split method {method!r}: expected one of {', '.join(METHODS)}")
    repos = table.column("repo").to_pylist()
    order = list(dict.fromkeys(repos[i] for i in newest_first))
    if len(order) < 2:
        raise UserError(f"--by repo needs rows of two repositories or more; these are all {order[0]}")
    out: list[int] = []
    for repo in order:
        if len(out) >= size:
            break
        out += [i for i in range(table.num_rows) if repos[i] == repo]
    if len(out) == table.num_rows:
        raise UserError(f"--by repo: holding out {size} rows would hold out every repository; ask for fewer")
    return sorted(out)


def _instant(text: str | None) -> float:
    """Seconds since the epoch of an ISO 8601 time: commits keep their author's offset (09:36+02:00 is
    earlier than 04:36-04:00), so their text does not sort by time. A row without a time sorts oldest."""
    if not text:
        return float("-inf")
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UserError(f"created_at {text!r} is not an ISO 8601 time") from None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def finished_rows(out: Path) -> pa.Table:
    """Every row of a finished mining output (the data shards its manifest records, in order)."""
    shards = finished_shards(out)
    if not shards:
        raise UserError(f"{out}: the run kept no row")
    return pa.concat_tables(read_table(shard) for shard in shards)


def write_split(table: pa.Table, dest: Path, method: str, size: int, seed: int = 0) -> tuple[int, int]:
    """Write dest/train.parquet and dest/eval.parquet from `table` (`finished_rows` of an output);
    returns the two row counts."""
    held = held_out_rows(table, method, size, seed)
    chosen = set(held)
    mask = pa.array([i in chosen for i in range(table.num_rows)])
    dest.mkdir(parents=True, exist_ok=True)
    train = write_arrow(dest / "train.parquet", table.filter(pc.invert(mask)), "zstd")
    held_out = write_arrow(dest / "eval.parquet", table.filter(mask), "zstd")
    return train, held_out
