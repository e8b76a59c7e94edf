"""The local engine runs each task on the worker process it is given (so a process's git readers and
caches serve the shards a plan gives it), and returns what the function returns."""

from __future__ import annotations

import os

from data_pipeline.engines.pools import open_engine


def _pid_and_double(value: int) -> tuple[int, int]:
    return os.getpid(), 2 * value


def test_tasks_run_on_the_worker_they_are_given():
    workers = [0, 0, 1, 1, 0, 1, 2, 3]
    with open_engine("local", 2) as submit:
        done = [submit(_pid_and_double, i, worker).result() for i, worker in enumerate(workers)]
    assert [value for _, value in done] == [2 * i for i in range(len(workers))]
    pid_of = {}
    for (pid, _), worker in zip(done, workers, strict=True):
        assert pid_of.setdefault(worker % 2, pid) == pid  # worker 2 is worker 0 again, 3 is 1
    assert pid_of[0] != pid_of[1] and os.getpid() not in pid_of.values()


def _frozen(_: object) -> int:
    import gc

    return gc.get_freeze_count()


def test_workers_fork_with_what_the_driver_held_out_of_the_collectors_sight():
    """What the driver held when the workers forked is frozen for them (their collections skip it) and
    given back to the driver's collector when the engine closes."""
    import gc

    assert gc.get_freeze_count() == 0
    with open_engine("local", 2) as submit:
        assert submit(_frozen, None, 1).result() > 1000
    assert gc.get_freeze_count() == 0


def test_the_engine_closes_with_no_pool_thread_left_for_the_interpreters_exit():
    """Each pool's thread that waits for its processes has ended when the engine closes: left running
    into the interpreter's exit, one that closes its wake-up pipe while Python 3.11's exit handler
    writes to it makes `swerl data mine` print `Exception ignored ... Bad file descriptor` (seen after
    a run that kept no row, which ends right after its pools). Also with a pool that got no task."""
    import threading
    from concurrent.futures.process import _ExecutorManagerThread

    for tasks in ([0, 1], [0]):
        with open_engine("local", 2) as submit:
            assert [submit(_pid_and_double, 1, worker).result()[1] for worker in tasks] == [2] * len(tasks)
        left = [t for t in threading.enumerate() if isinstance(t, _ExecutorManagerThread) and t.is_alive()]
        assert left == []


def test_one_worker_runs_inline():
    with open_engine("local", 1) as submit:
        assert submit(_pid_and_double, 4, 7).result() == (os.getpid(), 8)


class _Deferred:
    """A task that runs only when its result is asked for: the driver sees every task as still running
    until it waits for one, the slowest engine there can be."""

    def __init__(self, fn, task, log: list[str]) -> None:
        self.fn, self.task, self.log, self.value, self.ran = fn, task, log, None, False

    def done(self) -> bool:
        return self.ran

    def result(self):
        if not self.ran:
            self.value, self.ran = self.fn(self.task), True
            self.log.append(self.fn.__name__)
        return self.value


def test_shards_between_extract_and_render_stay_within_the_window(tmp_path, monkeypatch):
    """Extracted rows wait for their render in worker memory, so the driver must not run ahead: with an
    engine that never finishes on its own, at most `WINDOW_PER_WORKER * workers` shards are submitted
    and not yet rendered; the rows are those of a plain run."""
    from contextlib import contextmanager

    import pyarrow.parquet as pq

    from data_pipeline.config import MineConfig
    from data_pipeline.run import runner
    from data_pipeline.sources.local import LocalSource
    from data_pipeline.synthetic import HistoryBuilder, random_fix

    builder = HistoryBuilder(seed=5)
    for _ in range(30):
        random_fix(builder)
    builder.write(tmp_path / "repo")
    config = MineConfig(shard_size=1)
    log: list[str] = []
    submitted = {"extract_shard": 0}
    in_flight = []

    @contextmanager
    def deferred_engine(engine, workers):
        def submit(fn, task, shard):
            if fn.__name__ == "extract_shard":
                submitted["extract_shard"] += 1
            in_flight.append(submitted["extract_shard"] - log.count("render_shard"))
            return _Deferred(fn, task, log)

        yield submit

    monkeypatch.setattr(runner, "open_engine", deferred_engine)
    source = LocalSource(tmp_path / "repo", tmp_path / "cache", repo="acme/tool")
    summary = runner.mine(tmp_path / "a", source, config, workers=1, progress=False)
    monkeypatch.undo()
    plain = runner.mine(tmp_path / "b", source, config, workers=1, progress=False)
    assert submitted["extract_shard"] >= 25 and summary.rows == plain.rows > 0
    assert max(in_flight) == runner.WINDOW_PER_WORKER + 1  # the one submitted before the driver waits
    for name in sorted(p.name for p in (tmp_path / "b" / "data").glob("*.parquet")):
        assert pq.read_table(tmp_path / "a" / "data" / name).equals(
            pq.read_table(tmp_path / "b" / "data" / name)
        )
