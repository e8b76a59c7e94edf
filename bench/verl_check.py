"""Check: swerl's export and reward inside verl's own classes, on a real mining run. Runs in verl's
environment (verl installed, swerl installed beside it; see docs/integrations.md), on CPU.

1. verl's `RLHFDataset` reads `swerl data export --format verl` output (of MINED_RUN or a split of
   it; with a tokenizer that has a chat template: without one verl drops every row, printing a
   traceback per row) and keeps every row.
2. For each row, 8 answers of varying quality (bench/reward.py's groups: exact, near misses, over-edits,
   one file only, wrong fixes elsewhere, two malformed) are tokenized, packed into a `DataProto` and
   scored by verl's `NaiveRewardManager` with `compute_score` loaded the way verl loads a custom reward
   (`get_custom_reward_fn`, from the file's path). Each score must equal `swerl.reward.similarity_reward`
   of the same answer against the mined row's own columns, bit for bit.

    python bench/verl_check.py MINED_RUN EXPORTED.parquet [--max-prompt-tokens 32768]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import torch
from omegaconf import OmegaConf
from verl import DataProto
from verl.trainer.ppo.reward import get_custom_reward_fn
from verl.utils.dataset.rl_dataset import RLHFDataset
from verl.workers.reward_manager.naive import NaiveRewardManager

import swerl.integrations.verl as swerl_verl
from swerl.models.tiny import train_tokenizer
from swerl.paths import row_files
from swerl.reward import similarity_reward
from swerl.reward.batch import coerce_contents
from swerl.synth_repo import Commit


def bench_answers():
    """bench/reward.py's `answers_for`, loaded from its file (bench/ is no package)."""
    spec = importlib.util.spec_from_file_location("bench_reward", Path(__file__).with_name("reward.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.answers_for


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("mined", type=Path)
    parser.add_argument("exported", type=Path)
    parser.add_argument("--max-prompt-tokens", type=int, default=1 << 20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rows = [row for path in row_files(args.mined) for row in pq.read_table(path).to_pylist()]
    texts = [m["content"] for row in rows[:50] for m in row["prompt"]]
    tokenizer = train_tokenizer(texts)  # byte-level BPE with a chat template, trained on the rows
    with tempfile.TemporaryDirectory() as cache:
        config = OmegaConf.create(
            {"max_prompt_length": args.max_prompt_tokens, "filter_overlong_prompts": True, "cache_dir": cache}
        )
        dataset = RLHFDataset(str(args.exported), tokenizer, config)
        items = [dataset[i] for i in range(len(dataset))]
    exported = pq.read_metadata(args.exported).num_rows
    print(f"verl RLHFDataset: {len(dataset)} of {exported} exported rows kept")
    by_id = {row["instance_id"]: row for row in rows}

    verl_config = OmegaConf.create(
        {"reward": {"custom_reward_function": {"path": swerl_verl.__file__, "name": "compute_score"}}}
    )
    manager = NaiveRewardManager(tokenizer, num_examine=0, compute_score=get_custom_reward_fn(verl_config))
    answers_for = bench_answers()
    rng = random.Random(args.seed)
    scored = mismatches = roundtrip = 0
    kinds: dict[str, int] = {}
    start = time.perf_counter()
    for item in items:
        row = by_id[item["extra_info"]["instance_id"]]
        context = coerce_contents(row["code_context"], "code_context")
        oracle = coerce_contents(row["oracle_new_content"], "oracle_new_content")
        answers = answers_for(Commit("", "", context, oracle), rng)
        ids = [
            tokenizer(a, add_special_tokens=False)["input_ids"] or [tokenizer.pad_token_id] for a in answers
        ]
        width = max(map(len, ids))
        responses = torch.full((len(ids), width), tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(ids), 1 + width), dtype=torch.long)
        mask[:, 0] = 1  # a one-token prompt: the manager reads only the response
        for i, seq in enumerate(ids):
            responses[i, : len(seq)] = torch.tensor(seq)
            mask[i, 1 : 1 + len(seq)] = 1
        n = len(ids)
        batch = DataProto.from_dict(
            tensors={
                "prompts": torch.ones((n, 1), dtype=torch.long),
                "responses": responses,
                "attention_mask": mask,
            },
            non_tensors={
                "data_source": np.array([item["data_source"]] * n, dtype=object),
                "reward_model": np.array([item["reward_model"]] * n, dtype=object),
                "extra_info": np.array([dict(item["extra_info"]) for _ in range(n)], dtype=object),
            },
        )
        rewards = manager(batch)
        for i, answer in enumerate(answers):
            decoded = tokenizer.decode(ids[i], skip_special_tokens=True)
            roundtrip += decoded != answer
            want = similarity_reward(decoded, context, oracle)
            got = float(rewards[i, len(ids[i]) - 1])
            mismatches += got != np.float32(want.reward)  # verl's reward tensor is float32
            kind = want.error or ("exact" if want.reward == 1.0 else "scored")
            kinds[kind] = kinds.get(kind, 0) + 1
            scored += 1
    seconds = time.perf_counter() - start
    print(f"answers scored by verl's NaiveRewardManager: {scored} ({seconds:.1f} s)")
    print(f"mismatches against swerl.reward.similarity_reward: {mismatches}")
    print(f"answers whose tokenize/decode changed the text: {roundtrip}")
    print("kinds: " + json.dumps(dict(sorted(kinds.items()))))
    sys.exit(1 if mismatches or len(dataset) != exported else 0)


if __name__ == "__main__":
    main()
