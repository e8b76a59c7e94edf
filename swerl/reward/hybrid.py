"""Scoring rows with the similarity reward, the execution reward, or both (`hybrid`), recording the kind.

`execution` judges every row by its tests and gives a row that cannot be executed reward None and a
named error; `hybrid` judges by the tests where the row is executable and by similarity elsewhere, in
one run. Each row says which reward it got (`reward_kind`). Rows of one instance are judged together, so
identical patches run once and distinct ones in parallel (`ExecutionReward.score_group`).
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from swerl.edit_format import FormatError
from swerl.errors import UserError
from swerl.reward.batch import coerce_contents, score_row
from swerl.reward.execution import ExecutionResult, ExecutionReward, answer_patch, row_instance
from swerl.reward.files import ScoreSummary, file_format
from swerl.reward.similarity import RewardConfig

RewardKind = Literal["similarity", "execution", "hybrid"]
REWARD_KINDS: tuple[str, ...] = ("similarity", "execution", "hybrid")


@dataclass
class KindSummary(ScoreSummary):
    """A scoring run's summary with how many rows each reward judged and how many tests resolved."""

    kinds: Counter[str] = field(default_factory=Counter)
    resolved: int = 0

    def report(self) -> str:
        by_kind = ", ".join(f"{k}: {n}" for k, n in sorted(self.kinds.items()))
        executed = self.kinds.get("execution", 0)
        rate = f", resolved {self.resolved}/{executed}" if executed else ""
        return f"{super().report()}\n  rows by reward: {by_kind}{rate}"


def _contents(row: Mapping[str, Any]) -> dict[str, str]:
    return coerce_contents(row["code_context"], "code_context") if row.get("code_context") else {}


def score_execution_rows(
    rows: Sequence[Mapping[str, Any]], reward: ExecutionReward
) -> dict[int, ExecutionResult]:
    """Execution verdicts of `rows` (by index), each instance's rows judged as one group."""
    groups: defaultdict[str, list[int]] = defaultdict(list)
    out: dict[int, ExecutionResult] = {}
    for i, row in enumerate(rows):
        instance = row_instance(row)
        problem = reward.problem(instance)
        if problem is not None or instance is None:
            out[i] = ExecutionResult(None, "not_executable", *(problem or ("no_instance", "")))
        else:
            groups[instance.instance_id].append(i)
    for members in groups.values():
        instance = row_instance(rows[members[0]])
        assert instance is not None  # checked above
        read = functools.partial(reward.backend.repos.read_file, instance.repo, instance.base_commit)
        patches: list[str | FormatError] = []
        for i in members:
            patch, error = answer_patch(rows[i], _contents(rows[i]), read)
            patches.append(patch if patch is not None else error)  # type: ignore[arg-type]
        out.update(zip(members, reward.score_group(instance, patches), strict=True))
    return out


def score_mixed_rows(
    rows: Sequence[Mapping[str, Any]],
    kind: RewardKind,
    config: RewardConfig = RewardConfig(),
    execution: ExecutionReward | None = None,
) -> list[tuple[float | None, dict[str, Any], str]]:
    """(reward, info, reward kind) per row under `kind`; `execution` is needed unless kind is similarity."""
    if kind not in REWARD_KINDS:
        raise UserError(f"unknown reward {kind!r}; use {', '.join(REWARD_KINDS)}")
    verdicts: dict[int, ExecutionResult] = {}
    if kind != "similarity":
        if execution is None:
            raise ValueError(f"reward {kind} needs an ExecutionReward")
        verdicts = score_execution_rows(rows, execution)
    out: list[tuple[float | None, dict[str, Any], str]] = []
    for i, row in enumerate(rows):
        verdict = verdicts.get(i)
        if verdict is not None and (kind == "execution" or verdict.kind != "not_executable"):
            out.append((verdict.reward, verdict.info(), "execution"))
        else:
            reward, info = score_row(row, config)
            out.append((reward, info, "similarity"))
    return out


def _read(src: Path) -> list[dict[str, Any]]:
    if file_format(src) == "parquet":
        import pyarrow.parquet as pq

        return pq.read_table(src).to_pylist()
    with src.open(encoding="utf-8", errors="surrogateescape") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    if not all(isinstance(r, dict) for r in rows):
        raise UserError(f"{src}: every line must be a JSON object")
    return rows


def _write(dst: Path, rows: list[dict[str, Any]], kind: str) -> None:
    if kind == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        for row in rows:
            row["reward_info"] = json.dumps(row["reward_info"], ensure_ascii=False)
        pq.write_table(pa.Table.from_pylist(rows), dst)
        return
    with dst.open("w", encoding="utf-8", errors="surrogateescape") as f:
        f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def score_file_mixed(
    src: Path,
    dst: Path,
    kind: RewardKind,
    config: RewardConfig = RewardConfig(),
    execution: ExecutionReward | None = None,
) -> KindSummary:
    """`swerl reward score --reward execution|hybrid`: every row of `src` with `reward`, `reward_info`
    and `reward_kind` into `dst`, which appears only when complete."""
    if file_format(dst) != file_format(src):
        raise UserError(f"{dst}: output format must match the input ({file_format(src)})")
    start = time.perf_counter()
    rows = _read(src)
    summary = KindSummary()
    if not rows:
        raise UserError(f"{src}: no rows to score")
    for row, (reward, info, row_kind) in zip(
        rows, score_mixed_rows(rows, kind, config, execution), strict=True
    ):
        row.update(reward=reward, reward_info=info, reward_kind=row_kind)
        summary.add(reward, info)
        summary.kinds[row_kind] += 1
        summary.resolved += info.get("kind") == "resolved"
    if summary.scored == 0:
        first = next(iter(summary.errors), "?")
        raise UserError(f"{src}: none of its {summary.rows} rows could be scored (first error: {first})")
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.tmp-{os.getpid()}")
    try:
        _write(tmp, rows, file_format(dst))
        os.replace(tmp, dst)
    finally:
        tmp.unlink(missing_ok=True)
    summary.seconds = time.perf_counter() - start
    return summary
