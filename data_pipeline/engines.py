"""Where the per-shard stage functions run: this machine's cores, or a Ray cluster.

A stage function (`build.build_shard`) is a top-level function of a picklable task holding paths and
config only, and it is a pure function of its input. So any engine that can call a function on another
process can run it: the results are the same rows whichever runs them. Results are handed back in task
order, so the runner records shards in order and a resumed run sees the same manifest.

- `local` (default): inline for one worker or one task, else a process pool over `workers` processes.
- `ray` (optional extra, `pip install swerl[ray]`): one Ray task per shard. `ray.init()` joins the
  cluster named by `RAY_ADDRESS` when set, else starts a local instance with `workers` CPUs. On a
  cluster, the clone cache and the output directory must be on storage every node sees at the same path.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

ENGINES = ("local", "ray")


def run_ordered(fn: Callable[[T], R], tasks: Sequence[T], engine: str, workers: int) -> Iterator[R]:
    """`fn(task)` for every task, yielded in task order as each becomes available."""
    if engine == "local":
        yield from _local(fn, tasks, workers)
    elif engine == "ray":
        yield from _ray(fn, tasks, workers)
    else:
        raise ValueError(f"unknown engine {engine!r}; expected one of {', '.join(ENGINES)}")


def _local(fn: Callable[[T], R], tasks: Sequence[T], workers: int) -> Iterator[R]:
    if workers <= 1 or len(tasks) <= 1:
        for task in tasks:
            yield fn(task)
        return
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(fn, task) for task in tasks]
        for future in futures:
            yield future.result()


def _ray(fn: Callable[[T], R], tasks: Sequence[T], workers: int) -> Iterator[R]:
    try:
        import ray
    except ImportError:
        raise ValueError("--engine ray needs Ray: pip install 'swerl[ray]'") from None
    started = not ray.is_initialized()
    if started:
        address = os.environ.get("RAY_ADDRESS") or None
        options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if address is None:
            options["num_cpus"] = max(1, workers)
        ray.init(address=address, **options)
    try:
        remote = ray.remote(fn)
        # Submitted all at once (Ray schedules them over the cluster) and collected in order.
        refs = [remote.remote(task) for task in tasks]
        for ref in refs:
            yield ray.get(ref)
    finally:
        if started:
            ray.shutdown()
