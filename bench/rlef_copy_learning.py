"""Can the warm-up teach a tiny model to copy the hidden constant from the feedback? Curves per Adam beta2.

    PYTHONPATH=. OMP_NUM_THREADS=1 .venv/bin/python bench/rlef_copy_learning.py MODEL \
        [--family hidden_add] [--steps 300] [--beta2 0.999,0.95] [--lr 3e-3] [--seed 0] [--out DIR]

From the same start model, one run per beta2 trains on the warm-up's second turns only, of the
`bundled:hidden_train` problems whose name holds `--family` (all by default): `feedback_fix_dialogs` with
all seven guessed constants and every target the fix (prompt, a wrong constant c, its real feedback
showing k, then the reference with k), through the trainer's own packing and log-probs (`pack_sequences`,
`completion_logprobs`). It prints, every 25 steps, the mean loss over all target tokens and over the
constant alone. ln 8 = 2.08 nats is what guessing k costs; copying it from the feedback costs ~0. One
run per setting: when a plateau ends varies between runs, so compare curves, not single steps.
`--out` saves the trained model (with one `--beta2`): a start model that has left the plateau.

Why this probe: every other target token is a copy of the wrong answer or of the template and is learned
in ~100 steps, after which the constant is the only token with a gradient. With beta2 = 0.999 Adam's
second moment still holds the early gradients of those easy tokens for ~1000 steps, so the constant's
small gradient moves the weights by a tiny fraction of the learning rate; with beta2 = 0.95 that memory
lasts ~20 steps. Measured (docs/rlef.md): no run at 0.999 left the guessing loss, some at 0.95 did, when
depends on the batch order (`--seed`).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import torch

from swerl.cli.args import nonnegative_int, output_dir, positive_float, positive_int
from swerl.environments.codecontests import ChatRenderer, sandbox_judge
from swerl.environments.warmup import feedback_fix_dialogs
from swerl.models.loading import load_model_and_tokenizer
from swerl.trainers.common import completion_logprobs, pack_sequences
from swerl.trainers.rlef import answer_text_ids, load_tasks


def constant_position(target: list[int], digits: set[int]) -> int:
    """Index of the constant in a target: its last digit token (the hidden constants are one digit)."""
    return max(i for i, token in enumerate(target) if token in digits)


def contest_examples(tokenizer: Any, family: str) -> list[tuple[list[int], list[int]]]:
    """Second turns of the `bundled:hidden_train` problems whose name holds `family`: seven guesses each."""
    tasks = [task for task in load_tasks("bundled:hidden_train") if family in task.name]
    return feedback_fix_dialogs(
        ChatRenderer(tokenizer),
        tasks,
        sandbox_judge(),
        partial(answer_text_ids, tokenizer),
        constant=False,
        guesses=7,
        feedback_rate=1.0,
    )


def repository_examples(tokenizer: Any, rows: Path, clones: Path, cache: Path, python: str | None) -> list:
    """Second turns of the hidden-constant repository rows (`swerl.data.hidden_repos`): for one row of
    each constant, every other constant as the wrong answer, its real feedback from the row's public test
    (the local backend, pytest), then the gold answer. Every row of a constant shows the same prompt and
    the same feedback, so one row per constant holds every distinct dialog."""
    from swerl.environments.repository import repository_judge, repository_tasks
    from swerl.environments.warmup import fix_dialogs, guess_cases, last_integer, repository_reference
    from swerl.execution.local import cached_backend
    from swerl.reward.execution import ExecutionReward
    from swerl.trainers.data import row_messages
    from swerl.trainers.sft import answer_suffix

    reward = ExecutionReward(cached_backend(cache, clones=clones, offline=True, python=python), workers=2)
    lines = rows.read_text(encoding="utf-8").splitlines()
    tasks = repository_tasks([json.loads(line) for line in lines], reward, row_messages).tasks
    one_each = {}
    for task in tasks:
        one_each.setdefault(last_integer(repository_reference(task)), task)
    constants = sorted(one_each)
    cases = []
    for task in one_each.values():
        reference = repository_reference(task)
        cases += guess_cases(task, reference, constants, constants)

    def answer_ids(task: Any, text: str) -> list[int]:
        suffix = answer_suffix(tokenizer, task.messages(), text)
        return list(tokenizer(suffix, add_special_tokens=False)["input_ids"])

    return fix_dialogs(ChatRenderer(tokenizer), cases, repository_judge(reward), answer_ids)


def train(
    model_path: str,
    examples_of: Callable[[Any], list[tuple[list[int], list[int]]]],
    beta2: float,
    lr: float,
    steps: int,
    seed: int,
    batch_size: int = 16,
    out: Path | None = None,
    stop_below: float = 0.0,
) -> None:
    torch.manual_seed(seed)
    model, tokenizer = load_model_and_tokenizer(model_path)
    examples = examples_of(tokenizer)
    print(f"{len(examples)} second-turn examples, contexts of {len(examples[0][0])} tokens", flush=True)
    digits = {tokenizer.convert_tokens_to_ids(str(d)) for d in range(10)}
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, beta2), weight_decay=0.0)
    rng = random.Random(seed)  # the batches' order: when the plateau ends depends on it
    start, window = time.perf_counter(), []
    for step in range(1, steps + 1):
        batch = rng.sample(examples, batch_size)
        packed = pack_sequences([c for c, _ in batch], [t for _, t in batch], tokenizer.pad_token_id, "cpu")
        logp, _ = completion_logprobs(model, packed.input_ids, packed.attention_mask, packed.completion_ids)
        mask = packed.completion_mask.float()
        loss = -(logp * mask).sum() / mask.sum()
        constant = -torch.stack([logp[i, constant_position(t, digits)] for i, (_, t) in enumerate(batch)])
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        window.append((float(loss.detach()), float(constant.mean().detach())))
        if step % 25 == 0:
            mean_loss = sum(w[0] for w in window) / len(window)
            mean_constant = sum(w[1] for w in window) / len(window)
            elapsed = time.perf_counter() - start
            print(
                f"beta2 {beta2}: step {step} loss {mean_loss:.3f}, constant {mean_constant:.3f} nats "
                f"({elapsed:.0f} s)",
                flush=True,
            )
            window = []
            if mean_constant < stop_below:  # off the plateau: the copy works, the rest is polish
                break
    if out:
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--family", default="", help="only problems whose name holds this, e.g. hidden_add")
    parser.add_argument("--steps", type=positive_int, default=300)
    parser.add_argument("--lr", type=positive_float, default=3e-3)
    parser.add_argument("--seed", type=nonnegative_int, default=0, help="seeds the order of the batches")
    parser.add_argument("--beta2", default="0.999,0.95", help="comma-separated Adam beta2 values to compare")
    parser.add_argument("--out", type=output_dir, help="save the trained model here (one --beta2 only)")
    parser.add_argument(
        "--stop-below",
        type=float,
        default=0.0,
        metavar="NATS",
        help="stop (and save) at the first 25-step window whose constant loss is below this (default: never)",
    )
    parser.add_argument(
        "--repo-rows",
        type=Path,
        help="train on these hidden-constant repository rows instead (python -m swerl.data.hidden_repos)",
    )
    parser.add_argument("--clones", type=Path, help="with --repo-rows: the folder of the rows' clones")
    parser.add_argument("--cache-dir", type=Path, help="with --repo-rows: mirrors and test environments")
    parser.add_argument("--python", help="with --repo-rows: the interpreter (with pytest) the tests run in")
    args = parser.parse_args()
    betas = [float(b) for b in args.beta2.split(",")]
    if args.out and len(betas) != 1:
        parser.error("--out takes a single --beta2")
    if args.repo_rows and not (args.clones and args.cache_dir):
        parser.error("--repo-rows needs --clones and --cache-dir")
    if args.repo_rows:
        examples_of = partial(
            repository_examples,
            rows=args.repo_rows,
            clones=args.clones,
            cache=args.cache_dir,
            python=args.python,
        )
    else:
        examples_of = partial(contest_examples, family=args.family)
    for beta2 in betas:
        done = {"out": args.out, "stop_below": args.stop_below}
        train(args.model, examples_of, beta2, args.lr, args.steps, args.seed, **done)


if __name__ == "__main__":
    main()
