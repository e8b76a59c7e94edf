"""What a model's repair samples looked like: a Markdown table from `swerl agentless run` folders.

`repair.jsonl` keeps every sample's answer and what became of it (a format error kind, or a patch). For a
weak model the question before "resolved?" is how far its answers get: do they have the format's tags and
a SEARCH/REPLACE block (well formed), does the edit apply to the repository (a patch), do the samples of
one prompt differ at all (a server that ignores the temperature answers the same text each time). With
`--eval DIR` per run (in the same order), the verdicts of `swerl agentless evaluate` are added; with
`--tokenizer`, the answers' tokens.

    python bench/agentless_samples.py runs/inproc runs/served --eval runs/eval-inproc runs/eval-served \
        --tokenizer runs/smollm2/sft/final
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

# The answer's structure is broken: no tags, an empty thought, no edit block. Every other kind is a well
# formed answer whose edit did not fit the repository.
MALFORMED = frozenset({"tag_count", "empty_thought", "no_blocks"})


def summarize(repair_rows: list[dict[str, Any]], report: dict[str, Any] | None = None) -> dict[str, Any]:
    """Counts over one run's repair rows: samples, well formed, with a patch, error kinds, distinct answers
    per prompt, and, given an evaluation's report, its three verdicts."""
    samples = [s for row in repair_rows for s in row.get("samples", [])]
    kinds = Counter(s.get("error") or "patch" for s in samples)
    out: dict[str, Any] = {
        "instances": len(repair_rows),
        "samples": len(samples),
        "well_formed": sum(1 for s in samples if s.get("error") not in MALFORMED),
        "patch": sum(1 for s in samples if s.get("patch")),
        "kinds": dict(sorted(kinds.items())),
        "distinct": [len({s["answer"] for s in row.get("samples", [])}) for row in repair_rows],
        "skipped": sum(1 for row in repair_rows if "skipped" in row),
    }
    if report is not None:
        out["resolved"] = len(report.get("resolved_ids", []))
        out["unresolved"] = len(report.get("unresolved_ids", []))
        out["cannot_judge"] = len(report.get("cannot_judge_ids", []))
        out["empty"] = len(report.get("empty_patch_ids", []))
    return out


def answer_tokens(repair_rows: list[dict[str, Any]], tokenizer: Any) -> int:
    """The answers' length in the model's tokens (re-tokenized text: the stop token is not counted)."""
    return sum(
        len(tokenizer(s["answer"], add_special_tokens=False)["input_ids"])
        for row in repair_rows
        for s in row.get("samples", [])
    )


def read_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def table(names: list[str], summaries: list[dict[str, Any]]) -> list[str]:
    """One Markdown row per run."""
    lines = [
        "| run | instances | samples | well formed | patch applies | distinct answers per prompt "
        "| resolved / unresolved / cannot judge / empty |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, s in zip(names, summaries, strict=True):
        verdicts = (
            f"{s['resolved']} / {s['unresolved']} / {s['cannot_judge']} / {s['empty']}"
            if "resolved" in s
            else "not evaluated"
        )
        lines.append(
            f"| {name} | {s['instances']} | {s['samples']} | {s['well_formed']}/{s['samples']} "
            f"| {s['patch']}/{s['samples']} | {', '.join(map(str, s['distinct']))} | {verdicts} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("runs", nargs="+", type=Path, help="folders of `swerl agentless run`")
    parser.add_argument("--eval", nargs="*", type=Path, default=[], help="their evaluations, same order")
    parser.add_argument("--tokenizer", help="count the answers' tokens with this tokenizer")
    args = parser.parse_args(argv)
    if args.eval and len(args.eval) != len(args.runs):
        parser.error("--eval takes one evaluation folder per run")
    tokenizer = None
    if args.tokenizer:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    summaries = []
    for i, run in enumerate(args.runs):
        rows = read_rows(run / "repair.jsonl")
        report = json.loads((args.eval[i] / "report.json").read_text()) if args.eval else None
        summary = summarize(rows, report)
        if tokenizer is not None:
            summary["answer_tokens"] = answer_tokens(rows, tokenizer)
        summaries.append(summary)
        print(f"{run}: {json.dumps(summary)}")
    print("\n".join(table([str(r) for r in args.runs], summaries)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
