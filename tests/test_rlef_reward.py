"""RLEF's task reward cannot be gamed by withholding code, and a syntax error is reported, not hidden.

The incentive test plays every fixed plan through real episodes (real sandbox, real reward): on each turn
the policy either withholds code or attempts, and an attempt is right, right on the public tests only,
or wrong. Expected returns follow exactly from the 4^3 plans, for any attempt quality; no plan that
withholds on some turns may beat attempting on every turn.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest

from swerl.codecontests.problems import parse_problem
from swerl.environments.codecontests import (
    ChatRenderer,
    ContestTask,
    EpisodeConfig,
    run_episodes,
    sandbox_judge,
)
from swerl.models.loading import load_model_and_tokenizer
from swerl.models.tiny import build_tiny_model
from swerl.rollout.base import Completion, SamplingParams
from swerl.sandbox import Job, TestCase

ANSWERS = {
    "R": "```python\nprint(input())\n```",  # right: passes the public and the private test
    "P": "```python\nprint(1)\n```",  # passes the public test only
    "W": "```python\nprint(0)\n```",  # wrong: fails the public test
    "X": "I would rather not write any code.",  # withholds
}
BROKEN = "```python\nn = int(input())\nprint(n +\n```"


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> object:
    return load_model_and_tokenizer(build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0))[1]


def echo(plan: str) -> ContestTask:
    """Print the input back; the plan (one letter of ANSWERS per turn) rides in the statement."""
    row = {
        "name": f"echo-{plan}",
        "description": f"Print the number you read. plan={plan}.",
        "public_tests": {"input": ["1\n"], "output": ["1\n"]},
        "private_tests": {"input": ["2\n"], "output": ["2\n"]},
    }
    return ContestTask(parse_problem(row))


class PlannedPolicy:
    """Answers turn t of an episode with ANSWERS[plan[t]], the plan read from the dialog's first turn."""

    def __init__(self, tokenizer: object, script: dict[str, str] | None = None) -> None:
        self.tokenizer = tokenizer
        self.script = script or ANSWERS

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[list[Completion]]:
        out = []
        for prompt in prompts:
            seen = self.tokenizer.decode(list(prompt))
            plan = seen.split("plan=", 1)[1][:3]
            turn = seen.count("<|im_start|>assistant") - 1
            text = self.script[plan[turn]]
            ids = [*self.tokenizer(text, add_special_tokens=False)["input_ids"], self.tokenizer.eos_token_id]
            out.append([Completion(list(prompt), ids, [-1.0] * len(ids), "stop", text)])
        return out


def test_no_fixed_plan_of_withholding_code_beats_attempting(tokenizer: object) -> None:
    plans = ["".join(p) for p in itertools.product("RPWX", repeat=3)]
    episodes = run_episodes(
        PlannedPolicy(tokenizer),
        ChatRenderer(tokenizer),
        [echo(plan) for plan in plans],
        EpisodeConfig(max_turns=3),
        sandbox_judge(workers=2),
    )
    returns = {plan: sum(ep.rewards) for plan, ep in zip(plans, episodes, strict=True)}
    # Spot checks of the reward itself: silence all along fails, plus -0.2 for each earlier silent turn.
    assert returns["XXX"] == pytest.approx(-1.4)
    assert returns["RXX"] == 1.0 and returns["PWW"] == -1.0 and returns["XXR"] == pytest.approx(0.6)
    assert returns["WWW"] == -1.0 and returns["XWR"] == pytest.approx(0.8)

    # The reward before this fix (-0.2 for a final answer without code) fails the same check: at a 10%
    # chance per attempt, writing nothing (-0.6) beat trying (about -0.71).
    before = {
        p: r + (0.8 if ep.turns[-1].code is None else 0.0)
        for (p, r), ep in zip(returns.items(), episodes, strict=True)
    }
    assert _values(before, 0.05, 1.0)[(True, True, True)] > _values(before, 0.05, 1.0)[(False, False, False)]

    for q, s in itertools.product([i / 20 for i in range(21)], repeat=2):
        value = _values(returns, q, s)
        attempting = value[(False, False, False)]
        for mask, v in value.items():
            assert v <= attempting + 1e-12, (q, s, mask)
            if mask[0]:  # the first turn is always played: withholding there costs its 0.2 at least
                assert v <= attempting - 0.2 + 1e-12, (q, s, mask)


def _values(returns: dict[str, float], q: float, s: float) -> dict[tuple[bool, ...], float]:
    """Expected return of each fixed withholding mask (True: withhold on that turn) when every attempt is
    right with probability q * s, right on the public test only with q * (1 - s), else wrong."""
    odds = {"R": q * s, "P": q * (1 - s), "W": 1 - q}
    value = {}
    for mask in itertools.product((False, True), repeat=3):
        value[mask] = sum(
            odds[a]
            * odds[b]
            * odds[c]
            * returns["".join("X" if w else o for w, o in zip(mask, (a, b, c), strict=True))]
            for a, b, c in itertools.product("RPW", repeat=3)
        )
    return value


def test_a_syntax_error_is_reported_as_the_interpreter_reports_it(tokenizer: object) -> None:
    """The feedback names the error and its line: the same text the sandbox's Python prints running it."""
    policy = PlannedPolicy(tokenizer, {"B": BROKEN, "R": ANSWERS["R"]})
    (episode,) = run_episodes(
        policy, ChatRenderer(tokenizer), [echo("BBR")], EpisodeConfig(), sandbox_judge(workers=2)
    )
    first = episode.turns[0]
    assert first.code is None and first.answer_error is not None
    assert "No Python code" not in first.feedback
    # Run the broken program itself in the sandbox: its stderr is the interpreter's own report.
    source = BROKEN.split("\n", 1)[1].rsplit("```", 1)[0]
    (ran,) = sandbox_judge(workers=1)([Job(source, (TestCase("1\n", "1\n"),))])
    assert ran[0].stderr_tail.rstrip() == first.answer_error
    assert 'File "/sandbox/main.py", line 2' in first.feedback
    assert "SyntaxError: '(' was never closed" in first.feedback
    # Turn rewards: -0.2 for the intermediate unparsable answer, 0 for the next, +1 for the final fix.
    assert episode.rewards == [-0.2, -0.2, 1.0]
