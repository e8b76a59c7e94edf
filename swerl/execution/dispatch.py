"""A batch of test runs: each distinct one once, on this machine's threads or as Ray tasks, and a run that
failed for a reason that is not the patch's tried again, then left without a verdict.

Two callers ask this of a batch of patches: the execution reward (`swerl.reward.execution`: graded runs
of RLEF episodes and GRPO groups) and Agentless's repair in turns (each answer run on the tests a
deployment has: regression tests and model-written reproduction tests). In both, patches that are the
same change (`normalized_patch`) run once and share the outcome; the distinct runs go `workers` at a time
to threads (each run is a sandboxed process, so threads suffice) or, with the `ray` engine, each to a
Ray task that asks for one CPU and no GPU, so a cluster's CPU nodes run the tests and the training GPUs
never do. A run that fails for the infrastructure's sake (an environment that does not build, a sandbox
that does not start, a Ray worker or node lost) is tried `retries` more times and then has no verdict:
the caller leaves it out (of a group's advantage, of the feedback), never scores it as a failure.

Ray is imported only for its engine (`pip install 'swerl[ray]'`): `ray.init()` joins the cluster
`RAY_ADDRESS` names, else starts a local instance of `workers` CPUs. A task carries its own copy of the
backend, so each node keeps mirrors and environments under the same cache path (shared storage, or one
cache per node that each fills once).
"""

from __future__ import annotations

import concurrent.futures
import functools
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from swerl.errors import UserError
from swerl.execution.base import ExecutionBackend, TestRun
from swerl.execution.instances import Instance
from swerl.ray_cluster import connect

Engine = Literal["threads", "ray"]
ENGINES: tuple[str, ...] = ("threads", "ray")

J = TypeVar("J")
R = TypeVar("R")


def normalized_patch(patch: str) -> str:
    """What makes two patches the same change: their file sections without git's `index` lines and
    trailing blanks (a model rarely writes the same hash line twice)."""
    lines = [line for line in patch.splitlines() if not line.startswith("index ")]
    return "\n".join(line.rstrip() for line in lines).strip()


def once_each(jobs: Sequence[J], key: Callable[[J], Hashable], run: Callable[[list[J]], list[R]]) -> list[R]:
    """The outcome of each job, in order, with `run` called on the first job of each `key` only: the
    jobs of one key share that job's outcome (the same object: copy it before changing it)."""
    first: dict[Hashable, J] = {}
    for job in jobs:
        first.setdefault(key(job), job)
    outcomes = dict(zip(first, run(list(first.values())), strict=True))
    return [outcomes[key(job)] for job in jobs]


@dataclass(frozen=True)
class Dispatch:
    """Where a batch's distinct runs go (the module docstring): `engine`, `workers` at a time, and how
    many times a run lost to the infrastructure is started again (`retries`)."""

    engine: Engine = "threads"
    workers: int = 1
    retries: int = 1

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise UserError(f"unknown execution engine {self.engine!r}; use {', '.join(ENGINES)}")

    def map(
        self,
        jobs: Sequence[J],
        local: Callable[[J], R],
        remote: Callable[[J], Callable[[], R]],
        lost: Callable[[str], R],
    ) -> list[R]:
        """`local(job)` for each job on `workers` threads; with the Ray engine, the picklable call
        `remote(job)` (made on the driver, in job order) runs as a Ray task instead, all submitted at
        once. A task that Ray itself lost (its worker or node died) is started again `retries` times
        rather than Ray's default of 3, then is `lost(what Ray said)`: never an outcome of the job."""
        if self.engine == "threads":
            with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, self.workers)) as pool:
                return list(pool.map(local, jobs))
        ray, _ = connect(self.workers, "the ray execution engine")
        task = _ray_task(ray).options(max_retries=max(0, self.retries))
        refs = [task.remote(remote(job)) for job in jobs]
        out = []
        for ref in refs:
            try:
                out.append(ray.get(ref))
            except Exception as err:  # RayTaskError, WorkerCrashedError, NodeDiedError, ...
                out.append(lost(f"{type(err).__name__}: {(str(err).splitlines() or [''])[0][:300]}"))
        return out


@functools.cache
def _ray_task(ray: Any) -> Any:
    """`_call` as a Ray remote function: one CPU, no GPU (a test run is one sandboxed process)."""
    return ray.remote(num_cpus=1, num_gpus=0)(_call)


def _call(work: Callable[[], R]) -> R:
    return work()


# ----------------------------------------------------------------------------------- runs on named tests
@dataclass(frozen=True)
class TestJob:
    """A patch run on tests named here, not graded on a row's: a deployment's own tests (Agentless's
    regression tests and reproduction tests). `extra` patches go on after `patch` (the files of
    model-written reproduction tests)."""

    __test__ = False  # not a pytest test class, despite the name

    instance: Instance
    patch: str
    tests: tuple[str, ...]
    extra: tuple[str, ...] = ()

    def key(self) -> tuple[Hashable, ...]:
        """What the run's outcome depends on: the repository state, the tests, the change."""
        where = (self.instance.instance_id, self.instance.repo, self.instance.base_commit)
        return (*where, self.tests, self.extra, normalized_patch(self.patch))


def run_job(backend: ExecutionBackend, job: TestJob, retries: int) -> TestRun | None:
    """`job`'s run; None when the backend raised `1 + retries` times (an environment, a clone or a
    sandbox that failed: no verdict on the patch)."""
    for _ in range(1 + max(0, retries)):
        try:
            return backend.run_tests(job.instance, job.tests, [job.patch, *job.extra])
        except Exception:  # not the patch's fault: tried again, then no verdict
            continue
    return None


def run_jobs(
    backend: ExecutionBackend, jobs: Sequence[TestJob], dispatch: Dispatch | None = None
) -> list[TestRun | None]:
    """Each job's run (`backend.run_tests`: its tests on a fresh base tree with its patch, then its extra
    patches), each distinct job once (`TestJob.key`), where `dispatch` says (default: one thread). None:
    no verdict (the backend raised every time, or Ray lost the task every time)."""
    where = dispatch or Dispatch()

    def run(distinct: list[TestJob]) -> list[TestRun | None]:
        return where.map(
            distinct,
            lambda job: run_job(backend, job, where.retries),
            lambda job: functools.partial(run_job, backend, job, where.retries),
            lambda _: None,
        )

    return once_each(jobs, TestJob.key, run)
