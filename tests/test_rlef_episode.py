"""A scripted policy through a real RLEF episode: wrong first answer, reads the feedback, right second answer.

Checks exactly: the dialog tokens (turn 2's prompt is turn 1's prompt + answer +
feedback ids, nothing re-tokenized), the loss masks (feedback tokens out), the rewards, and that the packed
batch the trainer learns from lines up with the episode.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
import torch

from swerl.codecontests.problems import parse_problem
from swerl.environments.codecontests import (
    ChatRenderer,
    ContestTask,
    EpisodeConfig,
    evaluate_dialogs,
    run_episodes,
    sandbox_judge,
)
from swerl.models.loading import load_model_and_tokenizer
from swerl.models.tiny import build_tiny_model
from swerl.rollout.base import Completion, SamplingParams
from swerl.trainers.rlef import RLEFTrainer, pack_episodes

WRONG = "```python\nn = int(input())\nprint(n + 2)\n```"
RIGHT = "```python\nn = int(input())\nprint(n + 3)\n```"
FEEDBACK = (
    "Your code failed 2 of 2 public tests.\n\n"
    "Your program produced the wrong output.\n\n"
    "Input:\n```\n1\n```\n\n"
    "Expected output:\n```\n4\n```\n\n"
    "Your output:\n```\n3\n```\n\n"
    "Fix the program and give the complete corrected code."
)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, object]:
    path = build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0)
    return load_model_and_tokenizer(path)


def add_task(k: int) -> ContestTask:
    """Read n, print n + k; public tests on 1 and 5, private ones on 10 and -3."""
    row = {
        "name": f"add{k}",
        "description": f"Read n. Print n + {k}.",
        "public_tests": {"input": ["1\n", "5\n"], "output": [f"{1 + k}\n", f"{5 + k}\n"]},
        "private_tests": {"input": ["10\n", "-3\n"], "output": [f"{10 + k}\n", f"{k - 3}\n"]},
    }
    return ContestTask(parse_problem(row))


def add3() -> ContestTask:
    return add_task(3)


class ScriptedPolicy:
    """Answers WRONG unless the context holds the feedback's expected output, then RIGHT (with EOS)."""

    def __init__(self, tokenizer: object) -> None:
        self.tokenizer = tokenizer
        self.prompts: list[list[int]] = []

    def answer_ids(self, text: str) -> list[int]:
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return [*ids, self.tokenizer.eos_token_id]

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[list[Completion]]:
        out = []
        for prompt in prompts:
            self.prompts.append(list(prompt))
            seen = self.tokenizer.decode(list(prompt))
            text = RIGHT if "Expected output:\n```\n4" in seen else WRONG
            ids = self.answer_ids(text)
            out.append([Completion(list(prompt), ids, [-0.5] * len(ids), "stop", text)])
        return out

    def sync_weights(self, model: object) -> None:
        pass


def test_scripted_two_turn_episode(tiny: tuple[object, object]) -> None:
    _, tokenizer = tiny
    policy = ScriptedPolicy(tokenizer)
    renderer = ChatRenderer(tokenizer)
    (episode,) = run_episodes(policy, renderer, [add3()], EpisodeConfig(), sandbox_judge(workers=2))

    prompt = renderer.prompt_ids(add3())
    assert (
        prompt
        == tokenizer(
            "<|im_start|>user\nRead n. Print n + 3.\n\n"
            + add3().messages()[0]["content"].split("\n\n", 1)[1]
            + "<|im_end|>\n<|im_start|>assistant\n",
            add_special_tokens=False,
        )["input_ids"]
    )
    a1, a2 = policy.answer_ids(WRONG), policy.answer_ids(RIGHT)
    feedback = tokenizer(
        f"\n<|im_start|>user\n{FEEDBACK}<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False
    )["input_ids"]

    # Turns and verdicts: the first answer fails its public tests and gets feedback, the second passes.
    assert [t.public_passed for t in episode.turns] == [False, True]
    assert episode.turns[0].feedback == FEEDBACK
    assert episode.turns[0].feedback_ids == feedback
    assert episode.turns[1].feedback is None and episode.turns[1].private_passed is True
    assert episode.solved

    # Token-in/token-out: the second prompt is exactly the first + answer + feedback ids.
    assert policy.prompts == [prompt, prompt + a1 + feedback]
    assert episode.tokens == prompt + a1 + feedback + a2
    assert [t.context_len for t in episode.turns] == [len(prompt), len(prompt + a1 + feedback)]

    # Masks: only answer tokens are trained on; each token knows its turn.
    assert episode.answer_mask == [0] * len(prompt) + [1] * len(a1) + [0] * len(feedback) + [1] * len(a2)
    assert episode.turn_of_token == [-1] * len(prompt) + [0] * len(a1) + [-1] * len(feedback) + [1] * len(a2)

    # Rewards: 0 for the intermediate answer, +1 for the final one (public and private tests pass).
    assert episode.rewards == [0.0, 1.0]


def test_wrong_answers_and_no_code(tiny: tuple[object, object]) -> None:
    _, tokenizer = tiny

    class Stubborn(ScriptedPolicy):
        def generate(self, prompts, params):  # type: ignore[no-untyped-def]
            out = super().generate(prompts, params)
            text = "I am not sure." if len(self.prompts) == 1 else WRONG
            ids = self.answer_ids(text)
            return [[Completion(out[0][0].prompt_ids, ids, [-0.5] * len(ids), "stop", text)]]

    policy = Stubborn(tokenizer)
    (episode,) = run_episodes(
        policy, ChatRenderer(tokenizer), [add3()], EpisodeConfig(), sandbox_judge(workers=2)
    )
    assert len(episode.turns) == 3
    assert episode.turns[0].code is None and "No Python code" in episode.turns[0].feedback
    assert episode.rewards == [-0.2, 0.0, -1.0]
    (single,) = run_episodes(
        Stubborn(tokenizer),
        ChatRenderer(tokenizer),
        [add3()],
        EpisodeConfig(feedback="none"),
        sandbox_judge(),
    )
    assert len(single.turns) == 1 and single.rewards == [-1.0]  # a final answer without code fails


def test_packed_batch_lines_up_with_the_episode(tiny: tuple[object, object], tmp_path: Path) -> None:
    model, tokenizer = tiny
    policy = ScriptedPolicy(tokenizer)
    renderer = ChatRenderer(tokenizer)
    episodes = run_episodes(policy, renderer, [add3(), add3()], EpisodeConfig(), sandbox_judge(workers=2))
    batch = pack_episodes(episodes, tokenizer.pad_token_id, "cpu")
    ep = episodes[0]
    p = len(ep.prompt_ids)
    rest = ep.tokens[p:]
    assert batch.packed.completion_ids[0, : len(rest)].tolist() == rest
    assert batch.packed.completion_mask[0, : len(rest)].tolist() == ep.answer_mask[p:]
    assert batch.state_cols[0] == [-1, len(ep.turns[0].answer_ids) + len(ep.turns[0].feedback_ids) - 1]

    # The trainer's per-answer log-prob sums cover each answer's tokens and nothing else.
    from swerl.trainers.rlef import RLEFConfig

    cfg = RLEFConfig(output_dir=str(tmp_path), max_steps=1, prompts_per_step=1, report_to_tensorboard=False)
    trainer = RLEFTrainer(cfg, model, tokenizer, [add3()], judge=sandbox_judge(workers=2), engine=policy)
    token_values = torch.ones_like(batch.packed.completion_mask, dtype=torch.float32)
    sums = trainer.per_turn_sums(token_values, batch, 2)
    assert sums[0].tolist() == [len(ep.turns[0].answer_ids), len(ep.turns[1].answer_ids)]
    # One full step on scripted episodes: finite losses, both optimizers stepped.
    metrics = trainer.train_step()
    assert metrics["solve_rate"] == 1.0 and metrics["turns_per_episode"] == 2.0
    assert all(torch.isfinite(torch.tensor(v)) for v in metrics.values())


def test_random_feedback_in_evaluation_comes_from_another_problem_of_the_whole_set(
    tiny: tuple[object, object],
) -> None:
    """The scripted policy fixes add3 only after seeing add3's expected output. Evaluated one problem per
    batch, random feedback must still come from the other problem of the set (add5), never from add3's
    own tests, or the control would leak the answer (as a slice of a sorted set would)."""
    _, tokenizer = tiny
    renderer, judge = ChatRenderer(tokenizer), sandbox_judge(workers=2)
    tasks = [add3(), add_task(5)]
    common = {"samples": 1, "nk": ((1, 3),), "batch_problems": 1}
    real = evaluate_dialogs(ScriptedPolicy(tokenizer), renderer, tasks, EpisodeConfig(), judge, **common)
    assert real.fixed_at_turn[2] == 1  # add3, fixed after its own feedback; add5 never
    shuffled = evaluate_dialogs(
        ScriptedPolicy(tokenizer), renderer, tasks, EpisodeConfig(feedback="random"), judge, **common
    )
    assert shuffled.first_wrong == 2 and shuffled.fixed_at_turn == {2: 0, 3: 0}
