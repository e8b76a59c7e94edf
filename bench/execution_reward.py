"""The execution reward's cost per distinct answer against its floor, the bare pytest run of the same tests.

For each instance, in one run and alternating: the execution reward of the gold patch
(`ExecutionReward.score_patch`: a fresh checkout, the harness's patch commands, test files reset, the
test patch, the instance's test command in bubblewrap, parsing and grading), and the floor: the same
test command on the same tree (gold and test patch applied, in the same environment), started directly
with no checkout, patching, sandbox or grading, only the pytest process timed. Medians of `--repeat`
rounds; the goal is at most 1.3x.

    python bench/execution_reward.py --dataset SWE-bench_Lite_test.parquet --clones DIR \
        --cache-dir runs/agentless-cache --instance-ids pallets__flask-4992 pytest-dev__pytest-7373
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time
from pathlib import Path

from swerl.execution.harness import eval_plan
from swerl.execution.instances import Instance, load_instances
from swerl.execution.local import LocalBackend, _shims, _test_env, apply_patch, cached_backend, reset_files
from swerl.reward.execution import ExecutionReward


def floor_seconds(backend: LocalBackend, instance: Instance) -> float:
    """The instance's test command alone, on a tree prepared as the harness prepares it."""
    plan = eval_plan(instance)
    with backend._fresh_tree(instance) as (env, tree, scratch):
        assert apply_patch(tree, instance.patch, scratch / "gold.diff")[0]
        reset_files(tree, instance.base_commit, plan.reset_files)
        assert apply_patch(tree, instance.test_patch, scratch / "test.diff")[0]
        test_env = _test_env(tree, _shims(scratch / "bin", env.python), env)
        start = time.perf_counter()
        subprocess.run(
            ["bash", "-c", plan.test_cmd], cwd=tree, env=test_env, capture_output=True, check=False
        )
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--clones", type=Path, required=True)
    parser.add_argument("--cache-dir", type=Path, default=Path("runs/agentless-cache"))
    parser.add_argument("--instance-ids", nargs="+", required=True)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    backend = cached_backend(args.cache_dir, clones=args.clones, offline=True)
    reward = ExecutionReward(backend)
    print("| instance | reward (gold) | execution reward, median s | bare pytest, median s | ratio |")
    print("|---|---|---|---|---|")
    for instance in load_instances(args.dataset, instance_ids=args.instance_ids):
        reward.score_patch(instance, instance.patch)  # warm: environment built, mirror fetched
        rewarded, bare, values = [], [], set()
        for _ in range(args.repeat):
            start = time.perf_counter()
            values.add(reward.score_patch(instance, instance.patch).reward)
            rewarded.append(time.perf_counter() - start)
            bare.append(floor_seconds(backend, instance))
        r, b = statistics.median(rewarded), statistics.median(bare)
        shown = ", ".join(map(str, sorted(values, key=str)))
        print(f"| {instance.instance_id} | {shown} | {r:.2f} | {b:.2f} | {r / b:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
