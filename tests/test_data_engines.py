"""The local engine runs each block of consecutive shards on one process (so a process's git readers and
caches serve neighbouring shards), hands the blocks out in turn, and returns what the function returns."""

from __future__ import annotations

import os

from data_pipeline.engines import BLOCK, open_engine


def _pid_and_double(value: int) -> tuple[int, int]:
    return os.getpid(), 2 * value


def test_blocks_of_shards_stay_on_one_process_and_alternate():
    shards = range(3 * BLOCK)
    with open_engine("local", 2) as submit:
        done = [submit(_pid_and_double, shard, shard).result() for shard in shards]
    assert [value for _, value in done] == [2 * shard for shard in shards]
    pids = [pid for pid, _ in done]
    blocks = [pids[start : start + BLOCK] for start in range(0, len(pids), BLOCK)]
    assert all(len(set(block)) == 1 for block in blocks)
    assert blocks[0][0] != blocks[1][0] and blocks[0][0] == blocks[2][0] and os.getpid() not in pids


def test_one_worker_runs_inline():
    with open_engine("local", 1) as submit:
        assert submit(_pid_and_double, 4, 7).result() == (os.getpid(), 8)
