"""RLEF episodes on real validated repository rows: scripted answers, then a model; per-turn cost.

    PYTHONPATH=. .venv/bin/python bench/rlef_repository_episodes.py ROWS [ROWS ...] --cache-dir CACHE \
        [--instances ID,ID] [--scripted gold,empty,noop] [--model tiny|PATH] [--sample model,after-noop] \
        [--turns 3] [--out report.json]

ROWS: `swerl data validate` outputs (their test.parquet). For every row with two or more FAIL_TO_PASS
tests (`--instances` picks some), scripted and sampled dialogs run through `run_episodes` and
`repository_judge` (the execution reward's harness):

- gold: the row's own fix as SEARCH/REPLACE edits first: must end at turn 1 with +1;
- empty: a well-framed answer whose solution holds no edit (the empty patch in the SWE-RL format). The
  edit format has no runnable empty patch (an edit whose SEARCH equals its REPLACE is malformed too), so
  it is an answer without code: the format feedback each turn, -0.2, -0.2, -1;
- noop: a comment appended to a shown file (a patch that changes nothing the tests see): the public
  tests run each turn, their real failures are the feedback, 0, 0, -1;
- special: with `--special FILE` (JSON: instance id -> answer text), answers written to pass what the
  public feedback showed and nothing more: they must pass the public tests and fail the grade;
- model: `--model` sampled for `--turns` answers (tiny: a random tiny Llama built here; a folder: that
  model with its own chat template);
- after-noop: the comment patch as the first answer, then the model's answers: what it writes after a
  real pytest report (a model that never writes a valid edit only ever sees the format's feedback).

`--sample` picks the sampled dialogs (default: model); `--sample ''` runs the scripted dialogs only,
through the model's tokenizer and chat template, without loading its weights.

Per turn it reports the public tests that failed, the batch's sampling and test seconds, the feedback
and its token count, the answers' token counts and how they ended, and the load average around each
dialog kind, as JSON; a summary table (one line per dialog kind and row) goes to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from swerl.edit_format import canonical_answer
from swerl.environments.dialog import ChatRenderer, Episode, EpisodeConfig, Judge, run_episodes
from swerl.environments.repository import RepoJob, RepositoryTask, repository_judge, repository_tasks
from swerl.execution.local import cached_backend
from swerl.models.loading import load_model_and_tokenizer, load_tokenizer
from swerl.models.tiny import build_tiny_model
from swerl.reward.batch import coerce_contents
from swerl.reward.execution import ExecutionReward
from swerl.rollout.base import Completion, SamplingParams
from swerl.rollout.hf import HFEngine
from swerl.trainers.data import read_rows, row_messages

SCRIPTED = ("gold", "empty", "noop")
EMPTY_ANSWER = "<think>\nThe code already does what the issue asks.\n</think>\n<solution>\n</solution>"


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


class ThenSampled:
    """The first turn's answers from `first`, every later turn's from `engine` (run_episodes asks for
    one batch a turn)."""

    def __init__(self, first: Scripted, engine: HFEngine) -> None:
        self.first, self.engine, self.calls = first, engine, 0

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[list[Completion]]:
        self.calls += 1
        return (self.first if self.calls == 1 else self.engine).generate(prompts, params)


class PublicRuns:
    """A judge that also keeps, per row, each public run's (failed, shown) test counts in turn order
    (None: nothing ran, the answer had no code), for the per-turn table."""

    def __init__(self, judge: Judge) -> None:
        self.judge, self.runs = judge, {}

    def __call__(self, jobs: Sequence[RepoJob]) -> list[Any]:
        results = self.judge(jobs)
        for job, res in zip(jobs, results, strict=True):
            if job.public:  # a private job (the grade) shows no test
                failed = sum(res.statuses.get(t) not in ("PASSED", "XFAIL") for t in job.public)
                ran = job.patch is not None
                self.runs.setdefault(job.instance.instance_id, []).append(
                    (failed, len(job.public)) if ran else None
                )
        return results


def gold_answer(row: dict[str, Any], task: RepositoryTask) -> str:
    """The row's fix written as the SWE-RL answer format (the data pipeline's canonical answer)."""
    new = coerce_contents(row["oracle_new_content"], "oracle_new_content")
    return canonical_answer(dict(task.code_context), new)


def noop_answer(task: RepositoryTask) -> str:
    path, text = next(iter(task.code_context.items()))
    last = text.rstrip("\n").splitlines()[-1]
    edit = f"```python\n### {path}\n<<<<<<< SEARCH\n{last}\n=======\n{last}\n# reviewed\n>>>>>>> REPLACE\n```"
    return f"<think>\nThe code looks right.\n</think>\n<solution>\n{edit}\n</solution>"


def describe(ep: Episode, runs: list[Any]) -> dict[str, Any]:
    return {
        "task": ep.task.name,
        "prompt_tokens": len(ep.prompt_ids),
        "turns": len(ep.turns),
        "rewards": ep.rewards,
        "public_failed": runs[: len(ep.turns)],
        "public_passed": [t.public_passed for t in ep.turns],
        "private_passed": ep.turns[-1].private_passed,
        "judged": ep.judged,
        "seconds": [t.seconds for t in ep.turns],
        "answer_tokens": [len(t.answer_ids) for t in ep.turns],
        "finish": [t.finish_reason for t in ep.turns],
        "answers": [t.text for t in ep.turns],
        "answer_errors": [t.answer_error for t in ep.turns],
        "feedback": [t.feedback for t in ep.turns],
        "feedback_tokens": [len(t.feedback_ids) for t in ep.turns],
        "dialog_tokens": len(ep.tokens),
    }


def run_dialog(engine: Any, tasks: Sequence[RepositoryTask], run: Any, judge: Judge) -> dict[str, Any]:
    """One batch of episodes, described, with the wall time and the load average before and after."""
    recorder = PublicRuns(judge)
    load, t0 = os.getloadavg(), time.perf_counter()
    episodes = run(engine, tasks, recorder)
    seconds = time.perf_counter() - t0
    # Every turn's batch times are on each of its answers: the longest episode holds them all.
    turns = max((ep.turns for ep in episodes), key=len, default=[])
    return {
        "seconds": seconds,
        "grade_seconds": seconds - sum(t.seconds["generate"] + t.seconds["judge"] for t in turns),
        "load_before": load,
        "load_after": os.getloadavg(),
        "episodes": [describe(ep, recorder.runs.get(ep.task.name, [])) for ep in episodes],
    }


def table(report: dict[str, Any]) -> list[str]:
    """One line per dialog kind and row: turns, rewards, public failures, test seconds per turn (then the
    grade's, the private run of the final answers), sampling seconds and feedback tokens per turn."""
    lines = ["dialog | row | turns | rewards | public failing | test s (+ grade) | sampling s | feedback tok"]
    for kind in (*SCRIPTED, "special", "model", "after-noop"):
        for ep in report.get(kind, {}).get("episodes", []):
            fails = ", ".join("no run" if r is None else f"{r[0]}/{r[1]}" for r in ep["public_failed"])
            tests = ", ".join(f"{s['judge']:.1f}" for s in ep["seconds"])
            sampling = ", ".join(f"{s['generate']:.1f}" for s in ep["seconds"])
            grade = report[kind]["grade_seconds"]
            lines.append(
                f"{kind} | {ep['task']} | {ep['turns']} | {ep['rewards']} | {fails} | {tests} + {grade:.1f}"
                f" | {sampling} | {ep['feedback_tokens']}"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", nargs="+")
    parser.add_argument("--cache-dir", type=Path, required=True)
    parser.add_argument("--clones", default=None)
    parser.add_argument("--instances", default=None, help="comma-separated instance ids (default: all)")
    parser.add_argument("--scripted", default=",".join(SCRIPTED), help="scripted dialogs to run ('' none)")
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--sample", default="model", help="sampled dialogs: model, after-noop ('' none)")
    parser.add_argument("--dtype", default=None)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--special", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    backend = cached_backend(args.cache_dir, clones=args.clones, offline=True, timeout_s=600)
    reward = ExecutionReward(backend, workers=args.workers)
    rows = [row for path in args.rows for row in read_rows(path)]
    if args.instances:
        wanted = set(args.instances.split(","))
        rows = [r for r in rows if str(r["instance_id"]) in wanted]
    found = repository_tasks(rows, reward, row_messages)
    print(found.summary())
    by_id = {str(r["instance_id"]): r for r in rows}
    model_path = args.model
    if model_path == "tiny":
        model_path = str(build_tiny_model(Path(tempfile.mkdtemp()) / "tiny", seed=0))
    tokenizer = load_tokenizer(model_path)
    renderer = ChatRenderer(tokenizer)
    judge = repository_judge(reward)
    # Scripted dialogs have no window; the model's dialogs end when its window has no room for an answer.
    config = EpisodeConfig(
        max_turns=args.turns, max_new_tokens=args.max_new_tokens, max_context_length=16384, seed=0
    )
    window = config.max_context_length
    tasks = found.tasks
    report: dict[str, Any] = {"rows": [t.name for t in tasks], "skipped": found.skipped}

    def episodes(engine: Any, chosen: Sequence[RepositoryTask], recorder: Judge) -> list[Episode]:
        limit = config.max_context_length if isinstance(engine, Scripted) else window
        return run_episodes(engine, renderer, chosen, replace(config, max_context_length=limit), recorder)

    special = json.loads(args.special.read_text(encoding="utf-8")) if args.special else {}
    scripts = {
        "gold": (tasks, lambda t: gold_answer(by_id[t.name], t)),
        "empty": (tasks, lambda t: EMPTY_ANSWER),
        "noop": (tasks, noop_answer),
        "special": ([t for t in tasks if t.name in special], lambda t: special[t.name]),
    }
    chosen_kinds = [k for k in args.scripted.split(",") if k] + (["special"] if special else [])
    for name in chosen_kinds:
        chosen, answer = scripts[name]
        if chosen:
            engine = Scripted(tokenizer, [answer(t) for t in chosen])
            report[name] = run_dialog(engine, chosen, episodes, judge)
            print(name, [(d["task"], d["turns"], d["rewards"]) for d in report[name]["episodes"]])
    sampled = [k for k in args.sample.split(",") if k]
    if sampled:
        model, _ = load_model_and_tokenizer(model_path, dtype=args.dtype)
        window = min(window, getattr(model.config, "max_position_embeddings", None) or window)
        policy = HFEngine(model, tokenizer, batch_size=args.batch_size)
        engines = {
            "model": lambda: policy,
            "after-noop": lambda: ThenSampled(Scripted(tokenizer, [noop_answer(t) for t in tasks]), policy),
        }
        for name in sampled:
            report[name] = {"model": args.model, **run_dialog(engines[name](), tasks, episodes, judge)}
            print(name, [(d["task"], d["turns"], d["rewards"]) for d in report[name]["episodes"]])
    print("\n".join(table(report)))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
