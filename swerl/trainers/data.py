"""Training rows in, token ids out: reading the data pipeline's files and rendering prompts.

A row's prompt is its `prompt` messages when the pipeline stored them (they were rendered with the
shuffled file order the pipeline chose), else `swerl.edit_format.build_messages(problem_statement,
code_context)`; either way it goes through the tokenizer's own chat template, the path every served
model takes too.
"""

from __future__ import annotations

import json
import os
import random
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq

from swerl.edit_format import build_messages
from swerl.errors import UserError
from swerl.execution.instances import Instance
from swerl.jsonl import parse_lines
from swerl.paths import row_files
from swerl.reward.batch import coerce_contents
from swerl.reward.execution import row_instance

# What a row needs: the oracle for the reward (and the SFT target), and either a stored prompt or the
# two fields the prompt is built from.
ORACLE_COLUMN = "oracle_new_content"
PROMPT_COLUMNS = ("problem_statement", "code_context")

if TYPE_CHECKING:
    from swerl.trainers.config import TrainConfig


@dataclass
class Example:
    """One training prompt: its token ids and what the reward (or SFT target) needs from the row."""

    prompt_ids: list[int]
    code_context: dict[str, str] = field(default_factory=dict)
    oracle_new_content: dict[str, str] = field(default_factory=dict)
    instance_id: str = ""
    messages: list[dict[str, str]] = field(default_factory=list)
    instance: Instance | None = None
    """The row's SWE-bench fields (repo, base commit, test lists, test patch), for the execution reward."""


def _missing_columns(names: Iterable[str]) -> list[str]:
    names = set(names)
    needed = [ORACLE_COLUMN] + ([] if "prompt" in names else list(PROMPT_COLUMNS))
    return [c for c in needed if c not in names]


def rows_file_problem(path: str | Path) -> str | None:
    """Why `path` cannot be training rows (None if it looks right), from its schema or its first row,
    without reading it whole: checked before a model is loaded."""
    import pyarrow as pa

    path = Path(path)
    if path.is_dir():
        try:
            files = row_files(path)
        except UserError as err:
            return str(err)
        if not files:
            return f"{path}: no .parquet files in this directory"
        path = files[0]
    if path.suffix == ".parquet":
        try:
            names = pq.read_schema(path).names
        except (pa.ArrowInvalid, OSError) as err:
            return f"{path}: not a readable Parquet file ({err})"
    elif path.suffix in {".jsonl", ".json"}:
        try:
            with path.open(encoding="utf-8") as f:
                first = next((line for line in f if line.strip()), None)
            row = json.loads(first) if first is not None else None
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            return f"{path}: the first row is not a JSON object ({err})"
        if row is None:
            return f"{path}: no rows"
        if not isinstance(row, dict):
            return f"{path}: the first row is not a JSON object"
        names = list(row)
    else:
        return f"{path}: expected .parquet, .jsonl or a directory of .parquet files"
    missing = _missing_columns(names)
    if missing:
        return f"{path}: no column {', '.join(missing)} (it has {', '.join(names[:10]) or 'none'})"
    return None


def read_rows(path: str | Path, limit: int | None = None) -> list[dict[str, Any]]:
    """Rows of a .parquet or .jsonl file (a directory: every .parquet file in it, sorted)."""
    path = Path(path)
    if path.is_dir():
        rows = [row for f in row_files(path) for row in pq.read_table(f).to_pylist()]
    elif path.suffix == ".parquet":
        rows = pq.read_table(path).to_pylist()
    elif path.suffix in {".jsonl", ".json"}:
        with path.open(encoding="utf-8") as f:
            rows = parse_lines(f, path)
    else:
        raise UserError(f"{path}: expected .parquet, .jsonl or a directory of .parquet files")
    return rows[:limit] if limit is not None else rows


def row_messages(row: Mapping[str, Any]) -> list[dict[str, str]]:
    """The chat messages of a row: its stored prompt, or the repair prompt built from its fields."""
    prompt = row.get("prompt")
    if prompt:
        if isinstance(prompt, str):
            prompt = json.loads(prompt)
        return [{"role": m["role"], "content": m["content"]} for m in prompt]
    context = coerce_contents(row["code_context"], "code_context")
    return build_messages(row["problem_statement"], context)


def prompt_ids(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    """Token ids of the chat-templated prompt, ending with the assistant turn's opening.

    Rendered to text first and then encoded without extra special tokens: the template already holds
    them, and the return type of `apply_chat_template(tokenize=True)` differs across transformers versions.
    """
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def build_examples(
    rows: Iterable[Mapping[str, Any]], tokenizer: Any, max_prompt_length: int
) -> tuple[list[Example], int]:
    """Examples for rows whose prompt fits; returns them and how many were skipped as too long."""
    examples, skipped = [], 0
    for row in rows:
        messages = row_messages(row)
        ids = prompt_ids(tokenizer, messages)
        if len(ids) > max_prompt_length:
            skipped += 1
            continue
        examples.append(
            Example(
                prompt_ids=ids,
                code_context=coerce_contents(row["code_context"], "code_context"),
                oracle_new_content=coerce_contents(row["oracle_new_content"], "oracle_new_content"),
                instance_id=str(row.get("instance_id", "")),
                messages=messages,
                instance=row_instance(row),
            )
        )
    return examples, skipped


def train_and_eval_examples(
    config: TrainConfig, tokenizer: Any, max_length: int, limit: str = "max_prompt_length"
) -> tuple[list[Example], int, list[Example]]:
    """The run's training examples, how many training rows were skipped as too long, and the held-out
    examples (none without `eval_file`), each file capped by its `max_*_samples`. `limit` names the
    option `max_length` comes from, for the error when no row fits."""
    examples, skipped = build_examples(
        read_rows(config.train_file, config.max_train_samples), tokenizer, max_length
    )
    if not examples and skipped:
        raise UserError(
            f"train_file {config.train_file}: every row ({skipped}) is longer than {limit} "
            f"({max_length} tokens); raise {limit}, or mine them again with a smaller --max-prompt-tokens"
        )
    if skipped and int(os.environ.get("RANK", "0")) == 0:
        print(
            f"swerl: {skipped} of {skipped + len(examples)} training rows are longer than {limit} "
            f"({max_length} tokens) and left out",
            file=sys.stderr,
        )
    held_out: list[Example] = []
    if config.eval_file:
        held_out, _ = build_examples(
            read_rows(config.eval_file, config.max_eval_samples), tokenizer, max_length
        )
    return examples, skipped, held_out


class EpochSampler:
    """Prompt indices in a seeded order, reshuffled each epoch; its state is two integers.

    Every rank draws the same global order and takes its own contiguous slice of each batch, so the
    global batch is identical for any world size and a resumed run continues exactly where it stopped.
    """

    def __init__(self, size: int, seed: int) -> None:
        if size <= 0:
            raise UserError("no training examples (is train_file empty, or every prompt too long?)")
        self.size, self.seed = size, seed
        self.epoch, self.position = 0, 0
        self._order = self._shuffled(0)

    def _shuffled(self, epoch: int) -> list[int]:
        order = list(range(self.size))
        random.Random(self.seed * 1_000_003 + epoch).shuffle(order)
        return order

    def next_batch(self, batch_size: int) -> list[int]:
        """The next `batch_size` indices of the global order, wrapping into a new epoch as needed."""
        out = []
        while len(out) < batch_size:
            if self.position == self.size:
                self.epoch, self.position = self.epoch + 1, 0
                self._order = self._shuffled(self.epoch)
            take = min(batch_size - len(out), self.size - self.position)
            out.extend(self._order[self.position : self.position + take])
            self.position += take
        return out

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: Mapping[str, int]) -> None:
        self.epoch, self.position = int(state["epoch"]), int(state["position"])
        self._order = self._shuffled(self.epoch)


def rank_slice(indices: list[int], rank: int, world_size: int) -> list[int]:
    """This rank's contiguous share of a global batch (the batch size is a multiple of world_size)."""
    if len(indices) % world_size:
        raise ValueError(f"a batch of {len(indices)} prompts does not split over {world_size} ranks")
    per = len(indices) // world_size
    return indices[rank * per : (rank + 1) * per]
