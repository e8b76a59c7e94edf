"""`swerl quickstart` in miniature: generated repo -> data pipeline -> tiny model -> SFT -> GRPO."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from swerl.cli.quickstart import build_repo, mine_rows
from swerl.edit_format import build_messages
from swerl.reward.batch import coerce_contents


def test_generated_repo_is_mined_into_rows(tmp_path: Path) -> None:
    commits = build_repo(tmp_path / "repo", files=6, lines=5, commits=20, seed=1)
    assert commits > 0
    rows, report = mine_rows(tmp_path / "repo", tmp_path, quiet=True)
    assert rows and "rows:" in report
    for row in rows:
        assert len(row["code_context"]) == 1  # no extra context files: short prompts
        assert "This line of" in row["problem_statement"]
        # The issue quotes the old line and the fixed one exactly, indentation included: copyable.
        old = coerce_contents(row["code_context"], "code_context")
        new = coerce_contents(row["oracle_new_content"], "oracle_new_content")
        (path,) = new
        before, after = old[path].splitlines(), new[path].splitlines()
        changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
        assert len(changed) == 1
        assert f"\n{changed[0][0]}\n" in row["problem_statement"]
        assert row["problem_statement"].endswith(f"\n{changed[0][1]}")


def test_quickstart_small_end_to_end(tmp_path: Path) -> None:
    """With the default held-out size (more rows than the small size mines) and a budget too short for
    anything: the held-out share is capped, and SFT and GRPO still run at least a step each."""
    out = tmp_path / "qs"
    cmd = [sys.executable, "-m", "swerl", "quickstart", "--out", str(out), "--size", "small"]
    cmd += ["--minutes", "0.05", "--quiet"]
    # Generous: the run takes ~25 s alone, but a loaded CI machine can make it several times slower.
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "mean reward" in proc.stdout and "summary:" in proc.stdout
    summary = json.loads((out / "summary.json").read_text())
    mined = summary["train_rows"] + summary["eval_rows"]
    assert summary["grpo_steps"] >= 1 and summary["eval_rows"] == mined // 4 and summary["sft_steps"] >= 1
    for key in ("before", "after"):
        assert -1.0 <= summary[key]["mean_reward"] <= 1.0
        assert 0.0 <= summary[key]["malformed_rate"] <= 1.0
    for path in (
        "data/train.jsonl",
        "data/eval.jsonl",
        "mined/manifest.json",
        "tiny-model/tokenizer.json",
        "sft/final/config.json",
        "grpo/final/config.json",
        "grpo/metrics.jsonl",
        "grpo/plots/overview.png",
        "eval_samples_after.jsonl",
    ):
        assert (out / path).exists(), path
    # The training data holds the compact prompts the model was trained on (served the same way).
    first = json.loads((out / "data" / "train.jsonl").read_text().splitlines()[0])
    assert first["prompt"] == build_messages(
        first["problem_statement"], coerce_contents(first["code_context"], "c"), style="compact"
    )
    rows = [json.loads(line) for line in (out / "grpo" / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == summary["grpo_steps"] and "reward" in rows[0] and "malformed_rate" in rows[0]
