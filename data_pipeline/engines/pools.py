"""Where the per-shard stage functions run: this machine's cores, or a Ray cluster.

A stage function (`stages.extract_shard`, `stages.render_shard`) is a top-level function of a picklable
task holding paths and config only, and it is a pure function of its input. So any engine that can call
a function on another process can run it: the results are the same rows whichever runs them. Tasks are
submitted one at a time as the driver produces them (a shard is extracted while later shards are still
being collected, and rendered as soon as dedup has passed over it), and the driver collects the results
in shard order, so the manifest lists shards in order and a resumed run sees the same manifest.

- `local` (default): inline for one worker, else `workers` processes; the run says which process
  prepares each shard (`schedule.ShardPlan`: long stretches of consecutive shards per process, the
  processes equally loaded) and renders it on the same one. A process keeps its git readers and caches
  across the shards it runs, and consecutive shards share most of what they read (the base of a PR's
  file is usually the merged file of a PR just before it), so a process that runs a stretch of
  consecutive shards reads from git and indexes a fraction of what one running every other shard
  does. Because a shard's render runs where its extract ran, it finds the extracted rows in that
  process's memory (`stages._EXTRACTED`) instead of extracting them again.
- `ray` (optional extra, `pip install swerl[ray]`): one Ray task per shard. `ray.init()` joins the
  cluster named by `RAY_ADDRESS` when set, else starts a local instance with `workers` CPUs. On a
  cluster, the clone cache and the output directory must be on storage every node sees at the same path.
  A render task extracts its shard again (same rows, more work: the price of letting Ray place tasks
  freely), so extract does not keep the rows there (`SAME_PROCESS`).
"""

from __future__ import annotations

import gc
import os
import signal
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import ExitStack, contextmanager
from typing import Any, Protocol, TypeVar

from swerl.ray_cluster import connect

T = TypeVar("T")
R = TypeVar("R")

ENGINES = ("local", "ray")
# Whether an engine runs the extract and the render of a shard on the same process, so that the render
# finds the rows extracted there in that process's memory.
SAME_PROCESS = {"local": True, "ray": False}


class Pending(Protocol[R]):
    """A submitted task: `done()` never blocks, `result()` waits for it."""

    def done(self) -> bool: ...

    def result(self) -> R: ...


def die_with_parent(parent: int) -> None:
    """Worker initializer: end this process when the process that started it (`parent`) ends, even by
    `kill -9`, which gives the parent no chance to stop its workers. A worker would otherwise wait on
    its task queue forever, and its git readers with it (they end when their input closes, that is when
    the worker ends). Linux only (prctl PR_SET_PDEATHSIG); elsewhere a no-op.

    Ctrl-C reaches every process of the terminal's group; a worker ignores it, and the parent, which
    gets it too, ends the workers itself (`open_engine`): a worker interrupted half-way through a task
    would print a traceback and leave the pool waiting for a result that never comes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent ended before the request took effect
        os._exit(1)


def worker_pool(workers: int) -> ProcessPoolExecutor:
    """A process pool whose workers end with this process (`die_with_parent`)."""
    return ProcessPoolExecutor(max_workers=workers, initializer=die_with_parent, initargs=(os.getpid(),))


# `submit(fn, task, worker)`: run `fn(task)` on worker process `worker` (`schedule.ShardPlan` decides
# which, so that a worker runs neighbouring shards; an engine that places tasks itself ignores it). It
# never changes what `fn` returns.
Submit = Callable[[Callable[[T], R], T, int], Pending[R]]

# Consecutive shards handed to a worker at a time when the listing is slow (`schedule.py`).
BLOCK = 4


@contextmanager
def open_engine(engine: str, workers: int) -> Iterator[Submit[Any, Any]]:
    """A `submit(fn, task)` for the engine, valid inside the `with` block (which shuts the engine down)."""
    if engine == "local":
        if workers <= 1:
            yield _inline
        else:
            with ExitStack() as stack:
                # The workers fork from this process: what it holds now (the modules, mostly) is put out
                # of the garbage collector's sight first, so that no worker's full collection walks it
                # (or copies the pages it touches to do so); it is given back when the engine closes.
                gc.freeze()
                stack.callback(gc.unfreeze)
                pools = [stack.enter_context(worker_pool(1)) for _ in range(workers)]
                # Runs first on the way out: every worker is told to finish at once, and they exit side
                # by side instead of one after the other (an exit takes tens of ms, mostly the kernel
                # freeing the process's memory). Every task's result has been taken by then.
                stack.callback(_shut_down, pools)

                def submit(fn: Callable[[T], R], task: T, worker: int) -> Pending[R]:
                    return pools[worker % workers].submit(fn, task)

                try:
                    yield submit
                except BaseException:
                    _kill_workers(pools)
                    raise
    elif engine == "ray":
        with _ray(workers) as submit:
            yield submit
    else:
        raise ValueError(f"unknown engine {engine!r}; expected one of {', '.join(ENGINES)}")


def _shut_down(pools: list[ProcessPoolExecutor]) -> None:
    """Tell every pool to finish at once, then wait until each pool's thread that waits for its processes
    has ended. Left running, those threads meet the interpreter's exit: Python 3.11's exit handler for
    process pools wakes each one through a pipe that the thread closes without the lock the handler
    would need, and a thread closing it at that moment makes the exit print `Exception ignored ... Bad
    file descriptor` (a run that kept no row ends right after its pools, so its threads are still
    ending then). No public handle on that thread: the pool's own attribute, read before `shutdown`
    drops it."""
    threads = [pool._executor_manager_thread for pool in pools]
    for pool in pools:
        pool.shutdown(wait=False)
    for thread in threads:
        if thread is not None:
            thread.join()


def _kill_workers(pools: list[ProcessPoolExecutor]) -> None:
    """End every worker now, busy or not, on the way out of a failed or interrupted run. Waiting for their
    tasks would take up to a shard's time (tens of seconds), and the interpreter's exit waits for them
    too, so a second Ctrl-C would find it stuck there. Nothing is lost: a shard's files are written
    under a temporary name and renamed when whole, and the next run does again what was not recorded."""
    for pool in pools:
        for process in list((pool._processes or {}).values()):  # no public handle on a pool's processes
            process.kill()
        pool.shutdown(wait=False, cancel_futures=True)


def _inline(fn: Callable[[T], R], task: T, worker: int) -> Pending[R]:
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
    ray, started = connect(workers, "--engine ray")
    remotes: dict[Callable[..., Any], Any] = {}

    def submit(fn: Callable[[T], R], task: T, worker: int) -> Pending[R]:
        if fn not in remotes:
            remotes[fn] = ray.remote(fn)
        return _RayPending(remotes[fn].remote(task))

    try:
        yield submit
    finally:
        if started:
            ray.shutdown()
