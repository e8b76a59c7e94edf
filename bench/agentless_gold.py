"""Gold agreement of the local harness: tables from `swerl agentless evaluate` reports.

`evaluate --predictions gold` should resolve every instance the official harness resolves with its gold
patch (all of SWE-bench, by construction), except where this machine's environment differs (no network,
today's releases of unpinned packages, no root for apt). This turns one or more gold run directories into
the Markdown tables of docs/agentless.md: per repository the instances, those resolved strictly, those
resolved once environment failures are set aside, and each environment failure with its reason.

    python bench/agentless_gold.py runs/eval-gold-dev [more runs ...] [--compare runs/eval-gold-dev2]

`--compare` checks that a second run wrote identical rows for the instances both ran.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any


def load(run: Path) -> dict[str, Any]:
    """A run's report; for a run stopped before its end, the rows of the instances it finished."""
    if (run / "report.json").exists():
        return json.loads((run / "report.json").read_text(encoding="utf-8"))
    rows = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(run.glob("logs/*/report.json"))]
    return {"instances": {row["instance_id"]: row for row in rows}}


def repo_of(instance_id: str) -> str:
    owner_name, _ = instance_id.rsplit("-", 1)
    return owner_name.replace("__", "/")


def table(report: dict[str, Any]) -> list[str]:
    """Per repository: instances, strictly resolved, with environment failures, resolved among the rest."""
    rows: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for iid, row in report["instances"].items():
        counts = rows[repo_of(iid)]
        env = bool(row.get("env_failures"))
        counts[0] += 1
        counts[1] += bool(row["resolved"])
        counts[2] += env
        counts[3] += bool(row["resolved"]) and not env
    lines = [
        "| repository | instances | resolved (strict) | with env. failures | resolved among the others |"
    ]
    lines.append("|---|---|---|---|---|")
    total = [0, 0, 0, 0]
    for repo in sorted(rows):
        counts = rows[repo]
        total = [a + b for a, b in zip(total, counts, strict=True)]
        lines.append(_row(repo, counts))
    lines.append(_row("**all**", total))
    return lines


def _row(name: str, counts: list[int]) -> str:
    n, strict, with_env, clean_resolved = counts
    return f"| {name} | {n} | {strict} | {with_env} | {clean_resolved}/{n - with_env} |"


def failures(report: dict[str, Any]) -> list[str]:
    lines = [
        "| instance | tests failing with gold here | reason (pytest's summary, first) |",
        "|---|---|---|",
    ]
    for iid, row in sorted(report["instances"].items()):
        env = row.get("env_failures") or {}
        if env:
            reason = next(iter(env.values())).replace("|", "\\|")[:120]
            what = "all (no results)" if "*" in env else str(len(env))
            lines.append(f"| {iid} | {what} | {reason} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--compare", nargs="*", type=Path, default=[])
    parser.add_argument(
        "--merge",
        action="store_true",
        help="one table: a later run's row replaces an earlier run's for an id",
    )
    args = parser.parse_args(argv)
    reports = [(str(run), load(run)) for run in args.runs]
    if args.merge:
        merged: dict[str, Any] = {}
        for _, report in reports:
            merged.update(report["instances"])
        reports = [(" + ".join(map(str, args.runs)), {"instances": merged})]
    for name, report in reports:
        print(f"## {name}\n")
        print("\n".join(table(report)))
        print()
        print("\n".join(failures(report)))
        print()
    for first, second in zip(args.runs, args.compare, strict=False):
        a, b = load(first)["instances"], load(second)["instances"]
        common = sorted(set(a) & set(b))
        differ = [iid for iid in common if a[iid] != b[iid]]
        print(f"{first} vs {second}: {len(common)} instances in both, {len(differ)} differ {differ}")
        if differ:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
