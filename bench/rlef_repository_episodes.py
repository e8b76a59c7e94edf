"""RLEF episodes on real validated repository rows: scripted answers, then a model; per-turn cost.

    PYTHONPATH=. .venv/bin/python bench/rlef_repository_episodes.py ROWS [ROWS ...] --cache-dir CACHE \
        [--model tiny|PATH] [--turns 3] [--out report.json]

ROWS: `swerl data validate` outputs (their test.parquet). For every row with two or more FAIL_TO_PASS
tests, three scripted dialogs and one sampled one run through `run_episodes` and `repository_judge`
(the execution reward's harness):

- gold: the row's own fix as SEARCH/REPLACE edits first: must end at turn 1 with +1;
- no-op: a comment appended to a shown file (a patch that changes nothing the tests see): the public
  failures each turn, -1 at the end;
- special: with `--special FILE` (JSON: instance id -> answer text), answers written to pass what the
  public feedback showed and nothing more: they must pass the public tests and fail the grade;
- model: `--model` sampled for `--turns` answers (tiny: a random tiny Llama built here; none: skip).

Reports each turn's wall time split into sampling and judging, and the feedback texts, as JSON.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from swerl.edit_format import canonical_answer
from swerl.environments.dialog import ChatRenderer, Episode, EpisodeConfig, run_episodes
from swerl.environments.repository import RepositoryTask, repository_judge, repository_tasks
from swerl.execution.local import cached_backend
from swerl.models.loading import load_model_and_tokenizer
from swerl.models.tiny import build_tiny_model
from swerl.reward.batch import coerce_contents
from swerl.reward.execution import ExecutionReward
from swerl.rollout.base import Completion, SamplingParams
from swerl.rollout.hf import HFEngine
from swerl.trainers.data import read_rows, row_messages


class Scripted:
    """Answers every turn of episode i with scripts[i] (the episodes' order is the tasks' order)."""

    def __init__(self, tokenizer: Any, scripts: Sequence[str]) -> None:
        self.tokenizer, self.scripts = tokenizer, list(scripts)

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[list[Completion]]:
        del params
        out = []
        for prompt in prompts:
            # Turn 1: by position; later turns: the script whose answer the dialog already holds.
            seen = self.tokenizer.decode(list(prompt))
            text = next((s for s in self.scripts if s in seen), None) or self.scripts[len(out)]
            ids = [*self.tokenizer(text, add_special_tokens=False)["input_ids"], self.tokenizer.eos_token_id]
            out.append([Completion(list(prompt), ids, [0.0] * len(ids), "stop", text)])
        return out


def gold_answer(row: dict[str, Any], task: RepositoryTask) -> str:
    """The row's fix written as the SWE-RL answer format (the data pipeline's canonical answer)."""
    new = coerce_contents(row["oracle_new_content"], "oracle_new_content")
    return canonical_answer(dict(task.code_context), new)


def noop_answer(task: RepositoryTask) -> str:
    path, text = next(iter(task.code_context.items()))
    last = text.rstrip("\n").splitlines()[-1]
    edit = f"```python\n### {path}\n<<<<<<< SEARCH\n{last}\n=======\n{last}\n# reviewed\n>>>>>>> REPLACE\n```"
    return f"<think>\nThe code looks right.\n</think>\n<solution>\n{edit}\n</solution>"


def describe(ep: Episode) -> dict[str, Any]:
    return {
        "task": ep.task.name,
        "turns": len(ep.turns),
        "rewards": ep.rewards,
        "public_passed": [t.public_passed for t in ep.turns],
        "private_passed": ep.turns[-1].private_passed,
        "judged": ep.judged,
        "seconds": [t.seconds for t in ep.turns],
        "feedback": [t.feedback for t in ep.turns],
        "feedback_tokens": [len(t.feedback_ids) for t in ep.turns],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", nargs="+")
    parser.add_argument("--cache-dir", type=Path, required=True)
    parser.add_argument("--clones", default=None)
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--special", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    backend = cached_backend(args.cache_dir, clones=args.clones, offline=True, timeout_s=600)
    reward = ExecutionReward(backend, workers=args.workers)
    rows = [row for path in args.rows for row in read_rows(path)]
    found = repository_tasks(rows, reward, row_messages)
    print(found.summary())
    by_id = {str(r["instance_id"]): r for r in rows}
    model_path = args.model
    if model_path in ("tiny", "none"):  # the scripted runs only need a chat template: the tiny one's
        model_path = str(build_tiny_model(Path(tempfile.mkdtemp()) / "tiny", seed=0))
    model, tokenizer = load_model_and_tokenizer(model_path)
    renderer = ChatRenderer(tokenizer)
    judge = repository_judge(reward)
    config = EpisodeConfig(
        max_turns=args.turns, max_new_tokens=args.max_new_tokens, max_context_length=16384, seed=0
    )
    tasks = found.tasks
    report: dict[str, Any] = {"rows": [t.name for t in tasks], "skipped": found.skipped}
    special = json.loads(args.special.read_text(encoding="utf-8")) if args.special else {}
    for name, chosen, answers in (
        ("gold", tasks, [gold_answer(by_id[t.name], t) for t in tasks]),
        ("noop", tasks, [noop_answer(t) for t in tasks]),
        (
            "special",
            [t for t in tasks if t.name in special],
            [special[t.name] for t in tasks if t.name in special],
        ),
    ):
        if not chosen:
            continue
        t0 = time.perf_counter()
        episodes = run_episodes(Scripted(tokenizer, answers), renderer, chosen, config, judge)
        report[name] = {"seconds": time.perf_counter() - t0, "episodes": [describe(ep) for ep in episodes]}
        print(name, [(d["task"], d["turns"], d["rewards"]) for d in report[name]["episodes"]])
    if args.model == "none":
        if args.out:
            args.out.write_text(json.dumps(report, indent=2), encoding="utf-8")
        return
    engine = HFEngine(model, tokenizer, batch_size=8)
    t0 = time.perf_counter()
    episodes = run_episodes(engine, renderer, tasks, config, judge)
    report["model"] = {
        "model": args.model,
        "seconds": time.perf_counter() - t0,
        "episodes": [describe(ep) for ep in episodes],
    }
    print("model", [(d["task"], d["turns"], d["rewards"]) for d in report["model"]["episodes"]])
    if args.out:
        args.out.write_text(json.dumps(report, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
