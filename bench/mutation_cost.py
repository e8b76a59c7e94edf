"""Mutation testing's cost per row against the row's validation, as `swerl data validate --mutants N` pays it.

For each row of a dataset in SWE-bench's schema, `validate_row` (the whole judgement of the row, then up
to N mutants of its gold patch against its FAIL_TO_PASS + PASS_TO_PASS tests), with the environment
already built by a first, untimed call; the record's own clocks split the row's time into validation
(the 2 x `--repeats` runs and the verdict) and mutation testing (the mutants made and run). Per row:
both times, the mutants run, the seconds per mutant and the ratio mutation / validation; then the sums
over all rows.

    python bench/mutation_cost.py --dataset lite-test.parquet --cache-dir runs/agentless-cache \\
        --clones mirrors --instance-ids pallets__flask-4992 pytest-dev__pytest-7220 --mutants 10
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from data_pipeline.validate.runner import BackendOptions, RowTask, validate_row
from swerl.execution.instances import load_instances


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", required=True, help="rows in SWE-bench's schema (.parquet/.jsonl)")
    parser.add_argument("--cache-dir", type=Path, default=Path("runs/agentless-cache"))
    parser.add_argument("--clones", type=Path, help="a directory of clones to mirror repositories from")
    parser.add_argument("--instance-ids", nargs="+")
    parser.add_argument("--repeats", type=int, default=2, help="runs per side, as validate's --repeats")
    parser.add_argument("--mutants", type=int, default=10, help="as validate's --mutants")
    parser.add_argument("--no-warm", action="store_true", help="the environments are known to be built")
    args = parser.parse_args()
    options = BackendOptions(
        cache_dir=args.cache_dir.resolve(),
        clones=args.clones.resolve() if args.clones else None,
        offline=True,
    )
    print(f"load average at start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print("| instance | validation, s | mutants run | mutation testing, s | s per mutant | ratio |")
    print("|---|---|---|---|---|---|")
    total_validation = total_mutation = 0.0
    total_run = 0
    for instance in load_instances(args.dataset, instance_ids=args.instance_ids):
        if not args.no_warm:
            validate_row(RowTask(instance, options, 1, False))
        record = validate_row(RowTask(instance, options, args.repeats, False, args.mutants))
        if record["reason"] != "executable":
            said = f"not executable: {record['reason']}"
            print(f"| {instance.instance_id} | {record['seconds']:.1f} | {said} | | | |")
            continue
        mutation = record["mutation_seconds"]
        validation = record["seconds"] - mutation
        run = record["mutants_run"]
        per = f"{mutation / run:.1f}" if run else ""
        ratio = f"{mutation / validation:.2f}x"
        print(f"| {instance.instance_id} | {validation:.1f} | {run} | {mutation:.1f} | {per} | {ratio} |")
        total_validation += validation
        total_mutation += mutation
        total_run += run
    if total_validation:
        per = f"{total_mutation / total_run:.1f}" if total_run else ""
        print(
            f"| all rows | {total_validation:.1f} | {total_run} | {total_mutation:.1f} | {per} | "
            f"**{total_mutation / total_validation:.2f}x** |"
        )
    print(f"load average at end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
