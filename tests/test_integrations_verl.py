"""`swerl data export --format verl` and `swerl.integrations.verl.compute_score`, on rows mined from a real
history built here. verl itself is not installed in CI (it lives in its own environment, see
docs/integrations.md): the export is checked against the schema verl documents for its RL dataset
(prompt as chat messages, data_source, ability, reward_model.{style, ground_truth}, extra_info.index)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from mined_rows import mine_rows

from swerl.cli.main import main
from swerl.edit_format import canonical_answer
from swerl.integrations.verl import compute_score
from swerl.paths import row_files
from swerl.reward import similarity_reward
from swerl.reward.batch import BadRowError, coerce_contents


@pytest.fixture(scope="module")
def mined(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return mine_rows(tmp_path_factory.mktemp("verl"))


def test_export_writes_verls_rl_dataset_and_compute_score_is_swerls_reward(
    mined: Path, tmp_path: Path
) -> None:
    assert main(["data", "export", "--format", "verl", str(mined), "--out", str(tmp_path / "verl")]) == 0
    exported = pq.read_table(tmp_path / "verl" / "train.parquet").to_pylist()
    rows = [row for path in row_files(mined) for row in pq.read_table(path).to_pylist()]
    assert len(exported) == len(rows) > 0
    for i, (out, row) in enumerate(zip(exported, rows, strict=True)):
        assert set(out) == {"data_source", "prompt", "ability", "reward_model", "extra_info"}
        assert out["prompt"] == row["prompt"] and out["prompt"][-1]["role"] == "user"
        assert out["data_source"] == "swe_rl" and out["reward_model"]["style"] == "rule"
        assert out["extra_info"] == {
            "index": i,
            "split": "train",
            "instance_id": row["instance_id"],
            "repo": "acme/demo",
            "base_commit": row["base_commit"],
        }
        truth = out["reward_model"]["ground_truth"]
        context = coerce_contents(row["code_context"], "code_context")
        oracle = coerce_contents(row["oracle_new_content"], "oracle_new_content")
        assert json.loads(truth) == {"code_context": context, "oracle_new_content": oracle}
        gold = canonical_answer(context, oracle)
        for answer in (gold, gold.replace("=======\n", "=======\n    pass\n", 1), gold[:-20], ""):
            want = similarity_reward(answer, context, oracle).reward
            assert compute_score(out["data_source"], answer, truth, out["extra_info"]) == want
        assert compute_score("swe_rl", gold, json.loads(truth)) == 1.0  # a ground truth read as a dict too


def test_export_of_a_split_file_refuses_overwrites_and_other_files(mined: Path, tmp_path: Path) -> None:
    assert main(["data", "split", str(mined), "--eval-size", "2", "--to", str(tmp_path / "split")]) == 0
    export = [
        "data",
        "export",
        "--format",
        "verl",
        str(tmp_path / "split" / "eval.parquet"),
        "--out",
        str(tmp_path),
    ]
    assert main([*export, "--split", "test"]) == 0
    assert [r["extra_info"]["split"] for r in pq.read_table(tmp_path / "test.parquet").to_pylist()] == [
        "test"
    ] * 2
    assert main([*export, "--split", "test"]) == 1  # exists: not replaced without --overwrite
    assert main([*export, "--split", "test", "--overwrite"]) == 0
    pq.write_table(pq.read_table(tmp_path / "test.parquet"), tmp_path / "not-mined.parquet")
    assert (
        main(
            [
                "data",
                "export",
                "--format",
                "verl",
                str(tmp_path / "not-mined.parquet"),
                "--out",
                str(tmp_path / "x"),
            ]
        )
        == 1
    )
    assert not (tmp_path / "x" / "train.parquet").exists()
    with pytest.raises(SystemExit):
        main([*export, "--split", "../escape"])
    with pytest.raises(BadRowError, match="ground_truth"):
        compute_score("swe_rl", "", json.dumps({"code_context": {}}))
