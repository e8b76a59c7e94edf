"""Where the per-shard stage functions run: this machine's cores, or a Ray cluster.

A stage function (`build.prepare_shard`, `build.render_shard`) is a top-level function of a picklable
task holding paths and config only, and it is a pure function of its input. So any engine that can call
a function on another process can run it: the results are the same rows whichever runs them. Tasks are
submitted one at a time as the driver produces them (a shard is prepared while later shards are still
being collected, and rendered as soon as dedup has passed over it), and the driver collects the results
in shard order, so the manifest lists shards in order and a resumed run sees the same manifest.

- `local` (default): inline for one worker, else a process pool over `workers` processes.
- `ray` (optional extra, `pip install swerl[ray]`): one Ray task per shard. `ray.init()` joins the
  cluster named by `RAY_ADDRESS` when set, else starts a local instance with `workers` CPUs. On a
  cluster, the clone cache and the output directory must be on storage every node sees at the same path.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")

ENGINES = ("local", "ray")


class Pending(Protocol[R]):
    """A submitted task: `done()` never blocks, `result()` waits for it."""

    def done(self) -> bool: ...

    def result(self) -> R: ...


Submit = Callable[[Callable[[T], R], T], Pending[R]]


@contextmanager
def open_engine(engine: str, workers: int) -> Iterator[Submit[Any, Any]]:
    """A `submit(fn, task)` for the engine, valid inside the `with` block (which shuts the engine down)."""
    if engine == "local":
        if workers <= 1:
            yield _inline
        else:
            with ProcessPoolExecutor(max_workers=workers) as pool:
                yield pool.submit
    elif engine == "ray":
        with _ray(workers) as submit:
            yield submit
    else:
        raise ValueError(f"unknown engine {engine!r}; expected one of {', '.join(ENGINES)}")


def _inline(fn: Callable[[T], R], task: T) -> Pending[R]:
    """Runs the task at once in this process: one worker gains nothing from another process."""
    future: Future[R] = Future()
    future.set_result(fn(task))
    return future


class _RayPending:
    def __init__(self, ref: Any) -> None:
        self._ref = ref

    def done(self) -> bool:
        import ray

        ready, _ = ray.wait([self._ref], timeout=0)
        return bool(ready)

    def result(self) -> Any:
        import ray

        return ray.get(self._ref)


@contextmanager
def _ray(workers: int) -> Iterator[Submit[Any, Any]]:
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
    remotes: dict[Callable[..., Any], Any] = {}

    def submit(fn: Callable[[T], R], task: T) -> Pending[R]:
        if fn not in remotes:
            remotes[fn] = ray.remote(fn)
        return _RayPending(remotes[fn].remote(task))

    try:
        yield submit
    finally:
        if started:
            ray.shutdown()
