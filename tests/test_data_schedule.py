"""`ShardPlan`: long stretches of consecutive shards per worker, the workers' shares even, each shard
released once and only when its worker is known."""

from __future__ import annotations

import itertools
import random

import pytest

from data_pipeline.run.schedule import ShardPlan


def _run(plan: ShardPlan, total: int, rng: random.Random) -> list[tuple[int, int]]:
    """List `total` shards one by one, releasing at random moments (as the driver does between its
    waits), and return every (shard, worker) in the order released."""
    out = []
    for index in range(total):
        plan.listed(index)
        if rng.random() < 0.5:
            out += plan.release()
    plan.finish()
    out += plan.release()
    return out


@pytest.mark.parametrize("total", [1, 2, 5, 23, 24, 25, 30, 47, 48, 100, 241])
@pytest.mark.parametrize("workers", [2, 3])
def test_rounds_give_each_worker_one_stretch_and_even_shares(total, workers):
    round_size = 12 * workers
    plan = ShardPlan(workers, round_size, block=4, quick_listing=True)
    released = _run(plan, total, random.Random(total * workers))
    assert [shard for shard, _ in released] == list(range(total))  # each once, in order
    owner = dict(released)
    for start in range(0, total, round_size):
        stretch = [owner[s] for s in range(start, min(start + round_size, total))]
        # One stretch per worker in each round: the owner changes at most workers - 1 times.
        assert sum(a != b for a, b in itertools.pairwise(stretch)) <= workers - 1
        counts = [stretch.count(w) for w in range(workers)]
        assert max(counts) - min(c for c in counts if c) <= 1 or len(stretch) < workers
    # The worker that ends a round begins the next: no switch at round boundaries.
    for boundary in range(round_size, total, round_size):
        assert owner[boundary - 1] == owner[boundary]


def test_the_first_worker_starts_before_its_round_is_listed():
    plan = ShardPlan(2, 24, block=4, quick_listing=True)
    for index in range(5):
        plan.listed(index)
    assert plan.release() == [(0, 0), (1, 0), (2, 0)]  # 5 listed: the first worker's share is 3 or more
    for index in range(5, 24):
        plan.listed(index)
    rest = plan.release()
    assert [s for s, _ in rest] == list(range(3, 24))
    assert {s for s, w in rest if w == 0} == set(range(3, 12)) and {s for s, w in rest if w == 1} == set(
        range(12, 24)
    )
    first = ShardPlan(2, 24, block=4, quick_listing=True)
    first.listed(0)
    assert first.release() == [(0, 0)]  # the first shard listed starts at once
    first.finish()
    assert first.release() == []
    assert plan.release() == [] and set(plan.owner) == set(range(24))  # every shard released, once


def test_slow_listings_hand_out_blocks_in_turn_at_once():
    plan = ShardPlan(2, 24, block=4, quick_listing=False)
    out = []
    for index in range(10):
        plan.listed(index)
        out += plan.release()
    assert out == [(i, (i // 4) % 2) for i in range(10)]
    one = ShardPlan(1, 12, block=4, quick_listing=True)  # one worker: nothing to plan
    one.listed(0)
    assert one.release() == [(0, 0)]


def test_shards_must_be_listed_in_order():
    plan = ShardPlan(2, 24, block=4, quick_listing=True)
    plan.listed(0)
    with pytest.raises(ValueError):
        plan.listed(2)
