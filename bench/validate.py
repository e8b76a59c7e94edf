"""`swerl data validate`'s cost per row against its floor, the bare pytest runs it makes.

For each instance of a validated output (its `test.parquet`), once to warm (the environment built,
the mirror fetched; timed and counted apart), then `--rounds` interleaved rounds of both, the order
alternating:

- **validate**: `validate_row`, the whole judgement of the row as `swerl data validate` makes it
  (per side and repeat: a fresh checkout, the harness's patch commands, the tests in bubblewrap, the
  report parsed; then the lists judged);
- **bare**: the same pytest command on the same trees (before: test patch; after: gold patch, test
  files reset, test patch), started directly with no sandbox, only the pytest processes timed.

Medians over rounds; the goal is at most 1.3x. The environments this process builds are counted (the
first run's and the timed rounds' apart): a run over rows whose environments are built builds none.

    python bench/validate.py --dataset runs/validated/test.parquet --cache-dir runs/agentless-cache
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from data_pipeline.validate.runner import BackendOptions, RowTask, validate_row
from swerl.execution.base import test_files
from swerl.execution.envs import EnvManager, is_ready
from swerl.execution.harness import patch_files, patch_test_files
from swerl.execution.instances import Instance, load_instances
from swerl.execution.local import PYTEST_ARGS, LocalBackend, _shims, _test_env, apply_patch, reset_files

BUILT: list[Path] = []
"""Environments this process found not ready and built (other processes sharing the cache don't count)."""


def _counting(build: Callable[..., None]) -> Callable[..., None]:
    def counted(self: EnvManager, env: Path, *args: Any, **kwargs: Any) -> None:
        if not is_ready(env):
            BUILT.append(env)
        build(self, env, *args, **kwargs)

    return counted


EnvManager._build = _counting(EnvManager._build)  # type: ignore[method-assign]


def bare_seconds(backend: LocalBackend, instance: Instance, repeats: int) -> float:
    """The pytest processes validation starts for this row, run directly on trees prepared as it prepares
    them, summed over both sides and `repeats`."""
    command = shlex.join(["python", *PYTEST_ARGS, *test_files(patch_test_files(instance.test_patch))])
    total = 0.0
    for patches in ((), (instance.patch,)):
        for _ in range(repeats):
            with backend._fresh_tree(instance) as (env, tree, scratch):
                for i, patch in enumerate(patches):
                    assert apply_patch(tree, patch, scratch / f"{i}.diff")[0]
                reset_files(tree, instance.base_commit, patch_files(instance.test_patch))
                assert apply_patch(tree, instance.test_patch, scratch / "test.diff")[0]
                # A temporary directory of its own, as the sandbox's private /tmp: pytest would otherwise
                # prune other jobs' leftovers in the shared /tmp/pytest-of-USER.
                (scratch / "tmp").mkdir()
                test_env = _test_env(tree, _shims(scratch / "bin", env.python), env)
                test_env["TMPDIR"] = str(scratch / "tmp")
                start = time.perf_counter()
                subprocess.run(
                    ["bash", "-c", command], cwd=tree, env=test_env, capture_output=True, check=False
                )
                total += time.perf_counter() - start
    return total


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", required=True, help="a `swerl data validate` output's test.parquet")
    parser.add_argument("--cache-dir", type=Path, default=Path("runs/agentless-cache"))
    parser.add_argument("--instance-ids", nargs="+")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=2, help="runs per side, as validate's --repeats")
    args = parser.parse_args()
    options = BackendOptions(cache_dir=args.cache_dir.resolve(), offline=True)
    backend = options.backend()
    print("| instance | first run s (builds) | validate, median s | bare pytest, median s | ratio | load |")
    print("|---|---|---|---|---|---|")
    sums = [0.0, 0.0]
    built_in_rounds = 0
    for instance in load_instances(args.dataset, instance_ids=args.instance_ids):
        task = RowTask(instance, options, args.repeats, derive_version=False)
        before = len(BUILT)
        start = time.perf_counter()
        assert validate_row(task)["reason"] == "executable", instance.instance_id
        first, builds = time.perf_counter() - start, len(BUILT) - before
        validated, bare, loads = [], [], []
        warm = len(BUILT)
        for round_ in range(args.rounds):
            for which in ("validate", "bare") if round_ % 2 == 0 else ("bare", "validate"):
                start = time.perf_counter()
                if which == "validate":
                    validate_row(task)
                    validated.append(time.perf_counter() - start)
                else:
                    bare.append(bare_seconds(backend, instance, args.repeats))
            loads.append(os.getloadavg()[0])
        built_in_rounds += len(BUILT) - warm
        v, b = statistics.median(validated), statistics.median(bare)
        sums[0] += v
        sums[1] += b
        print(
            f"| {instance.instance_id} | {first:.1f} ({builds}) | {v:.2f} | {b:.2f} | {v / b:.2f}x "
            f"| {statistics.median(loads):.1f} |",
            flush=True,
        )
    print(f"| all | | {sums[0]:.2f} | {sums[1]:.2f} | {sums[0] / sums[1]:.2f}x | |")
    print(f"environments built during the timed rounds: {built_in_rounds}")


if __name__ == "__main__":
    main()
