"""Does a model read the hidden constant from the feedback? The turn-2 constant on hidden_test.

    PYTHONPATH=. OMP_NUM_THREADS=1 .venv/bin/python bench/rlef_copy_rate.py MODEL [--every 3] [--seed 0]

For every `every`-th held-out problem of `bundled:hidden_test` (constant k), the first answer is the
reference with a wrong constant c (drawn uniformly from the other seven, as a guess would be); the
sandbox runs it on the problem's public tests (real feedback) and on a random other problem's (random
feedback), and the model samples its second answer (temperature 1) after each. We count whether that
answer's last integer is k (read from the feedback), c (its own first answer again) or another value.
Guessing gives 1/8, 1/8, 6/8; a model that reads the feedback shows k far above 1/8 with real feedback
and not with random feedback. Why this probe and not 1@3 alone: it isolates the one skill the
hidden-constant demonstration is about, in about a minute, without the first turn's 1-in-8 guess.
"""

from __future__ import annotations

import argparse
import random

import torch

from swerl.cli.args import nonnegative_int, positive_int
from swerl.codecontests.extract import extract_answer
from swerl.codecontests.feedback import render_feedback
from swerl.codecontests.problems import load_problems
from swerl.data.rlef_problems import bundled_path
from swerl.environments.codecontests import ChatRenderer, ContestTask, last_constants, sandbox_judge
from swerl.models.loading import load_model_and_tokenizer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--every", type=positive_int, default=3, help="probe every N-th held-out problem")
    parser.add_argument("--seed", type=nonnegative_int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    model, tokenizer = load_model_and_tokenizer(args.model)
    model.eval()
    tasks = [ContestTask(p) for p in load_problems(bundled_path("hidden_test")).problems][:: args.every]
    renderer = ChatRenderer(tokenizer)
    cases = []
    for task in tasks:
        solution = task.problem.python_solutions[0]
        k = last_constants([solution])[0]
        c = rng.choice([v for v in range(2, 10) if v != k])
        cases.append((task, k, c, solution.replace(str(k), str(c)), rng.choice(tasks)))
    jobs = [task.public_job(wrong) for task, _, _, wrong, _ in cases]
    jobs += [other.public_job(wrong) for _, _, _, wrong, other in cases]
    results = sandbox_judge()(jobs)
    for name, part in (("real", slice(0, len(cases))), ("random", slice(len(cases), None))):
        counts = {"k": 0, "own": 0, "other": 0}
        for (task, k, c, wrong, _), job, res in zip(cases, jobs[part], results[part], strict=True):
            feedback = (
                render_feedback(job.tests, res) or "Your code failed the public tests. Fix the program."
            )
            answer = list(
                tokenizer(f"```python\n{wrong}```<|im_end|>", add_special_tokens=False)["input_ids"]
            )
            context = renderer.prompt_ids(task) + answer + renderer.feedback_ids(feedback, answer, True)
            with torch.no_grad():
                out = model.generate(
                    input_ids=torch.tensor([context]), max_new_tokens=30, do_sample=True, temperature=1.0
                )
            code = extract_answer(tokenizer.decode(out[0, len(context) :], skip_special_tokens=True)).code
            value = (last_constants([code]) or [None])[0] if code else None
            counts["k" if value == k else "own" if value == c else "other"] += 1
        shares = ", ".join(f"{key} {n}/{len(cases)}" for key, n in counts.items())
        print(f"{args.model}: {name} feedback: {shares}")


if __name__ == "__main__":
    main()
