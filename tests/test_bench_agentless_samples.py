"""`bench/agentless_samples.py`: how far a run's repair samples got, counted from its files."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _bench():
    spec = importlib.util.spec_from_file_location("agentless_samples", ROOT / "bench/agentless_samples.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ROWS = [
    {
        "instance_id": "o__r-1",
        "samples": [
            {"answer": "no tags", "error": "tag_count", "patch": ""},
            {"answer": "<think>x</think><solution>...", "error": "search_not_found", "patch": ""},
            {"answer": "<think>y</think><solution>ok", "error": None, "patch": "diff --git a/x b/x"},
        ],
    },
    {"instance_id": "o__r-2", "samples": [{"answer": "same", "error": "no_blocks", "patch": ""}] * 2},
    {"instance_id": "o__r-3", "samples": [], "skipped": "prompt 0 has 9000 tokens > 8191"},
]


def test_counts_well_formed_applied_distinct_and_verdicts(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    bench = _bench()
    report = {
        "resolved_ids": [],
        "unresolved_ids": ["o__r-1"],
        "cannot_judge_ids": [],
        "empty_patch_ids": ["a", "b"],
    }
    summary = bench.summarize(ROWS, report)
    assert summary["samples"] == 5 and summary["well_formed"] == 2 and summary["patch"] == 1
    assert summary["distinct"] == [3, 1, 0] and summary["skipped"] == 1
    assert summary["kinds"] == {"no_blocks": 2, "patch": 1, "search_not_found": 1, "tag_count": 1}
    assert (summary["resolved"], summary["unresolved"], summary["cannot_judge"], summary["empty"]) == (
        0,
        1,
        0,
        2,
    )

    run, evaluation = tmp_path / "run", tmp_path / "eval"
    run.mkdir()
    evaluation.mkdir()
    (run / "repair.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    (evaluation / "report.json").write_text(json.dumps(report))
    assert bench.main([str(run), "--eval", str(evaluation)]) == 0
    assert "| 3 | 5 | 2/5 | 1/5 | 3, 1, 0 | 0 / 1 / 0 / 2 |" in capsys.readouterr().out
