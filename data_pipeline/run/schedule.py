"""Which worker process prepares (and then renders) each shard of a local run.

A worker keeps its git processes and caches from shard to shard: the blobs and trees it read, the
facts of the files it indexed, and in git the delta chains it inflated. The next shard in history order
needs most of them again, a shard far away needs them afresh. So each worker should run long stretches
of consecutive shards, and the workers should still finish together.

When the listing is quick (a local clone: thousands of commits a second), shards are planned in rounds
of `round_size` (the window of shards a run keeps in flight): once a round is listed, it is cut into one
stretch per worker, and the worker that ended the last round starts the next one where it left off. A
round is known in a fraction of a second, and the first worker of each round need not wait for it: the
first `listed / workers` shards of a round (rounded up) are its share however the round ends. On the mining
benchmark this took the run from 3.30x to 3.15x `git log -p` against blocks of 4 shards handed out in
turn (two workers, one round of 24 shards: one stretch each instead of three blocks each).

When the listing is slow (the GitHub API, GH Archive), waiting for a round would keep workers idle, so
blocks of `block` shards are handed out in turn as they are listed.

Only speed depends on the plan: a shard's rows are the same on any worker.
"""

from __future__ import annotations

from bisect import bisect_right


class ShardPlan:
    """Assigns shards (listed in index order) to workers; `release` gives those that can start now."""

    def __init__(self, workers: int, round_size: int, block: int, quick_listing: bool) -> None:
        self.workers = workers
        self.round_size = max(round_size, workers)
        self.block = block
        self.rounds = quick_listing and workers > 1
        self.owner: dict[int, int] = {}
        self._listed = 0  # shards listed so far: indices 0 .. _listed - 1
        self._done = False  # the listing has ended
        self._released = 0  # every shard below this one has been released
        # The round being planned: where it starts and the workers in the order of its stretches.
        self._round_start = 0
        self._order = list(range(workers))

    def listed(self, index: int) -> None:
        """Shard `index` (the next in order) has been listed."""
        if index != self._listed:
            raise ValueError(f"shard {index} listed out of order (expected {self._listed})")
        self._listed += 1

    def finish(self) -> None:
        """No more shards will be listed."""
        self._done = True

    def release(self) -> list[tuple[int, int]]:
        """(shard, worker) of each listed shard that can start now, in shard order; each only once."""
        if self.rounds:
            out = self._release_rounds()
        else:
            out = [(i, (i // self.block) % self.workers) for i in range(self._released, self._listed)]
            self._released = self._listed
        self.owner.update(out)
        return out

    def _release_rounds(self) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        while True:
            start = self._round_start
            listed = self._listed - start
            if listed <= 0:
                return out
            if listed >= self.round_size or self._done:
                # The round is known: one stretch per worker, the first continuing the last round's end.
                size = min(listed, self.round_size)
                # Stretch i covers offsets bounds[i] .. bounds[i + 1] - 1: sizes differ by one at most.
                bounds = [-(-i * size // self.workers) for i in range(self.workers + 1)]
                for shard in range(max(self._released, start), start + size):
                    out.append((shard, self._order[bisect_right(bounds, shard - start) - 1]))
                self._released = start + size
                last = self._order[bisect_right(bounds, size - 1) - 1]  # the round's last shard's worker
                self._order = [last, *(w for w in self._order if w != last)]
                self._round_start = start + size
                continue
            # Still being listed: the first worker's stretch is at least ceil(listed / workers) shards
            # (stretches round up from the first, see `bounds`), so those can start now.
            safe = start - (-listed // self.workers)
            out += [(shard, self._order[0]) for shard in range(max(self._released, start), safe)]
            self._released = max(self._released, safe)
            return out
