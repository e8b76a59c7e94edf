"""The verdicts of several `swerl data validate` outputs side by side: a Markdown table and a figure.

Reads each output's `results.jsonl` (the verdict per row); rows that change no test are counted apart.
One bar per repository, its rows that change tests split by verdict (executable first).

    python bench/validate_funnel.py runs/val/* --png docs/images/validate-funnel.png
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

REASONS = (
    "executable",
    "no_fail_to_pass",
    "collection_error",
    "only_flaky",
    "env_failed",
    "patch_not_applied",
    "timeout",
    "error",
)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("outputs", nargs="+", type=Path)
    parser.add_argument("--png", type=Path, required=True)
    args = parser.parse_args()
    counts: dict[str, collections.Counter[str]] = {}
    for out in args.outputs:
        # Read only (not `runner.read_results`, which cuts a partial last line): an output may be in use.
        lines = (out / "results.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
        records = {r["instance_id"]: r for r in map(json.loads, (x for x in lines if x.endswith("\n")))}
        repo = next(iter(records)).rsplit("-", 1)[0].replace("__", "/")
        counts[repo] = collections.Counter(record["reason"] for record in records.values())
    print("| repository | rows | change tests | " + " | ".join(REASONS) + " |")
    print("|---" * (len(REASONS) + 3) + "|")
    for repo, c in counts.items():
        tested = sum(c.values()) - c["no_test_change"]
        cells = " | ".join(str(c[reason]) for reason in REASONS)
        print(f"| {repo} | {sum(c.values())} | {tested} | {cells} |")
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(counts) + 1.5))
    names = list(counts)
    left = [0] * len(names)
    for reason in REASONS:
        widths = [counts[name][reason] for name in names]
        if any(widths):
            ax.barh(names, widths, left=left, label=reason)
            left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.invert_yaxis()
    ax.set_xlabel("rows that change tests")
    ax.legend(loc="lower right", fontsize="small")
    ax.set_title("swerl data validate, environments inferred: verdict per row")
    fig.tight_layout()
    args.png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.png, dpi=100)
    print(f"wrote {args.png}")


if __name__ == "__main__":
    main()
