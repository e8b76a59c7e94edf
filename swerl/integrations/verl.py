"""The SWE-RL reward for verl, and the rows of its RL dataset built from a swerl mining run.

verl's reward managers call `compute_score(data_source, solution_str, ground_truth, extra_info)` per
answer, with `ground_truth` taken from the dataset's `reward_model.ground_truth`. Point verl at this file:
`reward.custom_reward_function.path=pkg://swerl.integrations.verl` (or this file's path) and
`reward.custom_reward_function.name=compute_score`.

The ground truth is a JSON string holding `code_context` and `oracle_new_content` (path -> content, in
prompt order): a string survives every way verl reads its Parquet (datasets, pandas, numpy object
arrays) unchanged, where nested structs come back as numpy arrays of dicts. `verl_row` writes it, and
`export` a whole file of such rows.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from swerl.errors import UserError
from swerl.reward import RewardConfig
from swerl.reward.batch import BadRowError, coerce_contents, score_row

DATA_SOURCE = "swe_rl"
ABILITY = "swe"
# The mined columns an exported row is made of (the rest stays in the mining run).
SOURCE_COLUMNS = ("instance_id", "repo", "base_commit", "prompt", "code_context", "oracle_new_content")
VERL_SCHEMA = pa.schema(
    [
        ("data_source", pa.string()),
        ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
        ("ability", pa.string()),
        ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
        (
            "extra_info",
            pa.struct(
                [
                    ("index", pa.int64()),
                    ("split", pa.string()),
                    ("instance_id", pa.string()),
                    ("repo", pa.string()),
                    ("base_commit", pa.string()),
                ]
            ),
        ),
    ]
)


def ground_truth_json(code_context: Any, oracle_new_content: Any) -> str:
    """The `reward_model.ground_truth` string for one row (contents in any shape the reward reads)."""
    return json.dumps(
        {
            "code_context": coerce_contents(code_context, "code_context"),
            "oracle_new_content": coerce_contents(oracle_new_content, "oracle_new_content"),
        },
        ensure_ascii=False,
    )


def verl_row(row: Mapping[str, Any], index: int, split: str) -> dict[str, Any]:
    """One row of verl's RL dataset (prompt, data_source, ability, reward_model, extra_info) from a mined
    row. `extra_info.index` is what verl groups a prompt's answers by; the rest says where it came from."""
    return {
        "data_source": DATA_SOURCE,
        "prompt": [{"role": m["role"], "content": m["content"]} for m in row["prompt"]],
        "ability": ABILITY,
        "reward_model": {
            "style": "rule",
            "ground_truth": ground_truth_json(row["code_context"], row["oracle_new_content"]),
        },
        "extra_info": {
            "index": index,
            "split": split,
            "instance_id": row["instance_id"],
            "repo": row["repo"],
            "base_commit": row["base_commit"],
        },
    }


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str | Mapping[str, Any],
    extra_info: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> float:
    """The SWE-RL reward of `solution_str` (the decoded answer): -1 malformed, else the similarity.

    verl needs a number for every answer, so a ground truth that cannot be read raises (a broken dataset
    is to be fixed, not trained on); `data_source` and `extra_info` are verl's and not needed here.
    """
    truth = json.loads(ground_truth) if isinstance(ground_truth, str) else ground_truth
    row = {"output": solution_str, **truth}
    reward, info = score_row(row, RewardConfig())
    if reward is None:
        raise BadRowError(f"reward_model.ground_truth: {info['message']}")
    return reward


def export(sources: Sequence[Path], dest: Path, split: str, batch_rows: int = 256) -> int:
    """Write the mined rows of the Parquet files `sources` as verl's RL dataset `dest`; returns the rows.

    Streams `batch_rows` rows at a time (a mined row carries whole files), into a temporary file renamed
    over `dest` only when complete, so an interrupted export leaves no partial dataset for verl to train
    on. `extra_info.index` counts rows across all sources.
    """
    if not sources:
        raise UserError("no rows to export: the source holds no .parquet files")
    for source in sources:
        missing = [c for c in SOURCE_COLUMNS if c not in pq.read_schema(source).names]
        if missing:
            raise UserError(f"{source}: not mined rows (no {', '.join(missing)} column)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    count = 0
    try:
        with pq.ParquetWriter(tmp, VERL_SCHEMA) as writer:
            for source in sources:
                for batch in pq.ParquetFile(source).iter_batches(
                    batch_size=batch_rows, columns=list(SOURCE_COLUMNS)
                ):
                    rows = [verl_row(row, count + i, split) for i, row in enumerate(batch.to_pylist())]
                    writer.write_table(pa.Table.from_pylist(rows, schema=VERL_SCHEMA))
                    count += len(rows)
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return count
