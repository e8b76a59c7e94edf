"""RLEF episodes as token-in/token-out dialogs: answer, execution feedback, answer again.

An episode (RLEF, Gehring et al. 2025): the task's statement is the first user turn; the model answers;
if the answer fails a public test and fewer than `max_turns` answers were given, the execution feedback
becomes the next user turn and the model answers again. The episode ends when the public tests pass or
after `max_turns` answers; the final answer is then run on the private tests, which the model never sees.

Why token-level bookkeeping: the trainer must score exactly the tokens the sampler produced. So the dialog
is kept as token ids and only ever *extended*: the context of turn t+1 is the context of turn t, plus the
sampled answer ids (stop token included), plus the ids of the feedback turn. The feedback ids are the
chat template's own rendering of "end of the assistant turn, user turn with the feedback, start of the next
assistant turn" (`ChatRenderer.feedback_ids`), tokenized on their own, so earlier turns are never
re-tokenized (a BPE merge across the boundary cannot change them). Only answer tokens are trained on:
`Episode.answer_mask` is 0 on the prompt and on every feedback token.

The loop knows nothing about what an answer is or how it is judged: a `Task` extracts its answer from the
text (a program for a contest problem, SEARCH/REPLACE edits as a git patch for a repository), makes the
jobs its kind of judge runs, and reads the judge's result back as an `Outcome` (passed, the feedback).
Contest problems live in `swerl.environments.codecontests`, repository rows in
`swerl.environments.repository`; both run through this one loop, trainer and evaluation.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from swerl.rollout.base import SamplingParams

FEEDBACK_MODES = ("execution", "none", "random")
"""execution: the real public-test feedback; none: one answer per episode (independent samples);
random: feedback of the answer judged against an *unrelated* task (the paper's ablation)."""

RENDER_SENTINEL = "\u2063SWERL-ANSWER\u2063"

FALLBACK_FEEDBACK = "Your answer failed the public tests. Fix it."
"""Random feedback for an answer that passed the unrelated task's tests: it must still read as a failure."""


# ----------------------------------------------------------------------------------------------- tasks
@dataclass(frozen=True)
class Answer:
    """What the task reads from an answer's text: the thing to run, or why there is none."""

    code: str | None
    """What the judge runs (a program, a git patch); None when the answer holds nothing runnable."""
    error: str | None = None
    """Why nothing is runnable, as the model should read it (a syntax error, a SEARCH text not found);
    None when `code` is set, or when the task has no more to say than its judge (no code block)."""


@dataclass(frozen=True)
class Outcome:
    """A judge's result on one job, read by the task that made the job."""

    passed: bool | None
    """All of the job's tests passed; None: the tests could not run (an infrastructure failure, which is
    no verdict on the answer: the episode ends and is neither trained on nor counted)."""
    feedback: str | None = None
    """What the model reads next when a public job failed (None when it passed or cannot be judged)."""


class Task(Protocol):
    """What an episode needs from a problem: the first user turn, the answer's reading, the jobs and
    their reading. `public_job`/`private_job` take `Answer.code` (None: nothing runnable); the judge
    turns a list of jobs into a list of results, which `outcome` reads one at a time."""

    name: str

    def messages(self) -> list[dict[str, str]]: ...

    def extract(self, text: str) -> Answer: ...

    def public_job(self, code: str | None) -> Any: ...

    def private_job(self, code: str | None) -> Any: ...

    def unrelated_job(self, code: str | None, other: Task) -> Any:
        """The job whose feedback stands in for this answer's under random feedback; `other.outcome`
        reads its result."""
        ...

    def outcome(self, answer: Answer, job: Any, result: Any) -> Outcome: ...


Judge = Callable[[Sequence[Any]], list[Any]]
"""judge(jobs) -> one result per job, in order (the sandbox for contest jobs, the execution reward for
repository jobs, or a fake in tests). A run's tasks are of one kind, so one judge serves them all."""


# --------------------------------------------------------------------------------------------- tokens
# --------------------------------------------------------------------------------------------- tokens
class ChatRenderer:
    """Token ids of the first prompt and of each feedback turn, through the tokenizer's chat template."""

    def __init__(self, tokenizer: Any, system_prompt: str | None = None) -> None:
        self.tokenizer = tokenizer
        self.system = [{"role": "system", "content": system_prompt}] if system_prompt else []

    def _ids(self, text: str) -> list[int]:
        # The template's text already holds any BOS it wants; the tokenizer must not add another.
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt_ids(self, task: Task) -> list[int]:
        text = self.tokenizer.apply_chat_template(
            [*self.system, *task.messages()], tokenize=False, add_generation_prompt=True
        )
        return self._ids(text)

    def feedback_ids(self, feedback: str, answer_ids: Sequence[int], stopped: bool) -> list[int]:
        """The ids that follow a sampled answer: end of its turn, the feedback turn, the next turn's start.

        The template renders a dialog with a sentinel as the assistant's content; everything after the
        sentinel is what the template puts between an answer and the next answer. When the answer ended
        with its stop token (sampled, already in the dialog), the template's copy of it is dropped.
        """
        messages = [
            *self.system,
            {"role": "user", "content": "problem"},
            {"role": "assistant", "content": RENDER_SENTINEL},
            {"role": "user", "content": feedback},
        ]
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        suffix = text[text.index(RENDER_SENTINEL) + len(RENDER_SENTINEL) :]
        if stopped and answer_ids:
            stop_text = self.tokenizer.decode([answer_ids[-1]])
            if stop_text and suffix.startswith(stop_text):
                suffix = suffix[len(stop_text) :]
        return self._ids(suffix)


# ------------------------------------------------------------------------------------------- episodes
@dataclass
class TurnRecord:
    """One answer of an episode, with what the judge said about it."""

    context_len: int
    """Dialog tokens before this answer: the state the turn-level value function scores."""
    answer_ids: list[int]
    logprobs: list[float]
    text: str
    code: str | None
    public_passed: bool
    answer_error: str | None = None
    """The task's report on an answer with nothing runnable (`Answer.error`; then `code` is None)."""
    finish_reason: str = "stop"
    private_passed: bool | None = None
    """All public + private tests passed; judged for the final answer (for every answer in evaluation)."""
    judged: bool = True
    """False when a test run of this answer could not happen (an infrastructure failure): the episode
    ended here and is left out of training and of n@k, never scored as a wrong answer."""
    feedback: str | None = None
    feedback_ids: list[int] = field(default_factory=list)
    reward: float = 0.0
    """The task reward r_t (before the KL penalty)."""
    seconds: dict[str, float] = field(default_factory=dict)
    """Wall time of this turn's batch: `generate` (sampling every active episode's answer) and `judge`
    (their public tests); the same numbers on every answer of the batch."""


@dataclass
class Episode:
    task: Task
    prompt_ids: list[int]
    turns: list[TurnRecord] = field(default_factory=list)

    @property
    def tokens(self) -> list[int]:
        """The whole dialog: prompt, then each answer followed by its feedback turn (if any)."""
        out = list(self.prompt_ids)
        for turn in self.turns:
            out += turn.answer_ids + turn.feedback_ids
        return out

    @property
    def answer_mask(self) -> list[int]:
        """1 on answer tokens (trained on), 0 on the prompt and on feedback tokens; aligned with tokens."""
        out = [0] * len(self.prompt_ids)
        for turn in self.turns:
            out += [1] * len(turn.answer_ids) + [0] * len(turn.feedback_ids)
        return out

    @property
    def turn_of_token(self) -> list[int]:
        """The answer index each token belongs to, -1 for prompt and feedback tokens."""
        out = [-1] * len(self.prompt_ids)
        for t, turn in enumerate(self.turns):
            out += [t] * len(turn.answer_ids) + [-1] * len(turn.feedback_ids)
        return out

    @property
    def judged(self) -> bool:
        """Every answer's tests ran (see `TurnRecord.judged`)."""
        return all(turn.judged for turn in self.turns)

    @property
    def solved(self) -> bool:
        return bool(self.turns and self.turns[-1].private_passed)

    @property
    def rewards(self) -> list[float]:
        return [turn.reward for turn in self.turns]


@dataclass(frozen=True)
class EpisodeConfig:
    """How episodes are sampled and rewarded (the RLEF paper's values as defaults)."""

    max_turns: int = 3
    max_new_tokens: int = 512
    temperature: float = 1.0
    top_p: float = 1.0
    max_context_length: int = 8192
    """An episode ends early when the next turn's context would not leave room for an answer."""
    feedback: str = "execution"
    judge_all_turns: bool = False
    """Run the private tests on every answer, not only the final one (n@k needs that)."""
    solved_reward: float = 1.0
    failed_reward: float = -1.0
    invalid_code_reward: float = -0.2
    """For an *intermediate* answer without valid code; a final one fails (failed_reward)."""

    seed: int | None = None


def task_reward(turn: TurnRecord, final: bool, config: EpisodeConfig) -> float:
    """r_t: the final answer +1 if it passes all tests, -1 otherwise (no valid answer included); an
    earlier answer -0.2 without a valid answer (no code, edits that do not parse or apply), else 0.

    Why a final answer without code gets -1 and not -0.2: it fails every test, like any wrong answer.
    With -0.2 it would pay to write nothing whenever the chance of solving is low (docs/rlef.md, "Rewards",
    works the numbers); with -1 no policy that withholds code, on any turns, scores better than trying.
    """
    if final:
        passed = turn.code is not None and turn.private_passed
        return config.solved_reward if passed else config.failed_reward
    return config.invalid_code_reward if turn.code is None else 0.0


def run_episodes(
    engine: Any,
    renderer: ChatRenderer,
    tasks: Sequence[Task],
    config: EpisodeConfig,
    judge: Judge,
    *,
    rng: random.Random | None = None,
    unrelated: Sequence[Task] | None = None,
) -> list[Episode]:
    """One episode per task (repeat a task for several), all turns batched through the engine and judge.

    `unrelated`: the tasks random feedback is drawn from (default: `tasks`). Pass the whole set when
    `tasks` is a slice of it: a slice of a sorted set holds look-alikes (the same hidden constant), and
    their "unrelated" feedback would carry the answer.
    """
    if config.feedback not in FEEDBACK_MODES:
        raise ValueError(f"feedback must be one of {FEEDBACK_MODES}, got {config.feedback!r}")
    rng = rng or random.Random(config.seed)
    max_turns = 1 if config.feedback == "none" else config.max_turns
    episodes = [Episode(task, renderer.prompt_ids(task)) for task in tasks]
    contexts = [list(ep.prompt_ids) for ep in episodes]
    active = list(range(len(episodes)))
    for t in range(max_turns):
        if not active:
            break
        params = SamplingParams.from_known(
            n=1,
            max_new_tokens=config.max_new_tokens,
            temperature=config.temperature,
            top_p=config.top_p,
            seed=None if config.seed is None else config.seed + t,
        )
        t0 = time.perf_counter()
        completions = [group[0] for group in engine.generate([contexts[i] for i in active], params)]
        t1 = time.perf_counter()
        answers = [episodes[i].task.extract(c.text) for i, c in zip(active, completions, strict=True)]
        jobs = [episodes[i].task.public_job(a.code) for i, a in zip(active, answers, strict=True)]
        results = judge(jobs)
        seconds = {"generate": t1 - t0, "judge": time.perf_counter() - t1}
        continuing = []
        for i, comp, answer, job, res in zip(active, completions, answers, jobs, results, strict=True):
            outcome = episodes[i].task.outcome(answer, job, res)
            turn = TurnRecord(
                context_len=len(contexts[i]),
                answer_ids=list(comp.token_ids),
                logprobs=list(comp.logprobs),
                text=comp.text,
                code=answer.code,
                public_passed=answer.code is not None and outcome.passed is True,
                answer_error=answer.error,
                finish_reason=comp.finish_reason,
                judged=outcome.passed is not None,
                seconds=dict(seconds),
            )
            episodes[i].turns.append(turn)
            if turn.public_passed or not turn.judged or t + 1 == max_turns:
                continue
            turn.feedback = outcome.feedback or ""
            turn.feedback_ids = renderer.feedback_ids(
                turn.feedback, turn.answer_ids, comp.finish_reason == "stop"
            )
            grown = contexts[i] + turn.answer_ids + turn.feedback_ids
            if len(grown) + config.max_new_tokens > config.max_context_length:
                turn.feedback, turn.feedback_ids = None, []  # no room for another answer: the episode ends
                continue
            contexts[i] = grown
            continuing.append(i)
        if config.feedback == "random" and continuing:
            pool = tasks if unrelated is None else unrelated
            _randomize_feedback([episodes[i] for i in continuing], pool, renderer, judge, rng)
            for i in continuing:
                turn = episodes[i].turns[-1]
                contexts[i] = contexts[i][: turn.context_len] + turn.answer_ids + turn.feedback_ids
        active = continuing
    _judge_private(episodes, judge, config.judge_all_turns)
    for ep in episodes:
        for t, turn in enumerate(ep.turns):
            turn.reward = task_reward(turn, t == len(ep.turns) - 1, config)
    return episodes


def _randomize_feedback(
    episodes: Sequence[Episode],
    tasks: Sequence[Task],
    renderer: ChatRenderer,
    judge: Judge,
    rng: random.Random,
) -> None:
    """Replace each last turn's feedback by what an unrelated task's judge says (`Task.unrelated_job`).

    An answer with nothing runnable keeps its true report: it is the same whatever the task. An unrelated
    run that cannot be judged, or that passes, still has to read as a failure: the episode continues."""
    picked = []
    for ep in episodes:
        others = [task for task in tasks if task.name != ep.task.name] or [ep.task]
        other = rng.choice(others)
        picked.append((other, ep.task.unrelated_job(ep.turns[-1].code, other)))
    results = judge([job for _, job in picked])
    for ep, (other, job), res in zip(episodes, picked, results, strict=True):
        turn = ep.turns[-1]
        if turn.answer_error is None:
            said = other.outcome(Answer(turn.code), job, res).feedback
            turn.feedback = said or FALLBACK_FEEDBACK
        turn.feedback_ids = renderer.feedback_ids(
            turn.feedback or "", turn.answer_ids, turn.finish_reason == "stop"
        )


def _judge_private(episodes: Sequence[Episode], judge: Judge, all_turns: bool) -> None:
    """Private (+ public) tests on final answers, or on every answer; answers that did not pass the
    public tests fail unrun. A private run that cannot be judged marks its answer unjudged."""
    todo = [
        (ep, turn)
        for ep in episodes
        for t, turn in enumerate(ep.turns)
        if all_turns or t == len(ep.turns) - 1
    ]
    runnable = [(ep, turn) for ep, turn in todo if turn.code is not None and turn.public_passed]
    jobs = [ep.task.private_job(turn.code) for ep, turn in runnable]
    results = judge(jobs) if runnable else []
    for _, turn in todo:
        turn.private_passed = False
    for (ep, turn), job, res in zip(runnable, jobs, results, strict=True):
        passed = ep.task.outcome(Answer(turn.code), job, res).passed
        turn.private_passed = bool(passed)
        turn.judged = turn.judged and passed is not None


# ----------------------------------------------------------------------------------------- evaluation
@dataclass
class DialogEval:
    """n@k solve rates with CIs, and how often feedback turns fixed a wrong first answer."""

    rates: list[Any]
    """`swerl.evaluation.nak.SolveRate`, one per requested (n, k)."""
    episodes: int
    first_wrong: int
    """Dialogs whose first answer failed the held-out tests."""
    fixed_at_turn: dict[int, int]
    """turn number (2, 3, ...) -> dialogs whose first correct answer came at that turn (of first_wrong)."""
    solved_first_turn: int
    unjudged: int = 0
    """Dialogs left out because a test run could not happen (an infrastructure failure): no verdict,
    so neither a solve nor a failure; a problem with no judged dialog is left out of n@k."""

    def fixed_share(self, turn: int) -> float:
        return self.fixed_at_turn.get(turn, 0) / max(1, self.first_wrong)

    def summary(self) -> str:
        rates = ", ".join(str(r) for r in self.rates)
        fixes = ", ".join(
            f"turn {t}: {self.fixed_at_turn[t]}/{self.first_wrong} ({100 * self.fixed_share(t):.1f}%)"
            for t in sorted(self.fixed_at_turn)
        )
        wrong = f"first answer wrong in {self.first_wrong}/{self.episodes} dialogs"
        unjudged = f"; {self.unjudged} dialogs could not be judged" if self.unjudged else ""
        return f"{rates}; {wrong}, fixed at {fixes or '-'}{unjudged}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "rates": [dataclasses.asdict(r) for r in self.rates],
            "episodes": self.episodes,
            "first_wrong": self.first_wrong,
            "fixed_at_turn": {str(t): n for t, n in self.fixed_at_turn.items()},
            "fixed_share": {str(t): self.fixed_share(t) for t in self.fixed_at_turn},
            "solved_first_turn": self.solved_first_turn,
            "unjudged": self.unjudged,
        }


def evaluate_dialogs(
    engine: Any,
    renderer: ChatRenderer,
    tasks: Sequence[Task],
    config: EpisodeConfig,
    judge: Judge,
    *,
    samples: int,
    nk: Sequence[tuple[int, int]] = ((1, 3), (10, 100)),
    batch_problems: int = 16,
    seed: int = 0,
    progress: bool = False,
) -> DialogEval:
    """`samples` dialogs per task, every answer judged on the held-out tests, then n@k (nak.py).

    Each answer counts against the budget k, so with feedback a 3-turn dialog costs 3 and `--no-feedback`
    (max_turns 1) draws 3 independent answers for the same budget, the paper's comparison.
    """
    from swerl.evaluation.nak import Turn, solve_rate

    config = dataclasses.replace(config, judge_all_turns=True)
    rng = random.Random(seed)
    dialogs: list[list[list[Turn]]] = []
    first_wrong, solved_first, unjudged = 0, 0, 0
    fixed: dict[int, int] = {}
    max_turns = 1 if config.feedback == "none" else config.max_turns
    for t in range(2, max_turns + 1):
        fixed[t] = 0
    from tqdm.auto import tqdm

    bar = tqdm(total=len(tasks), desc="eval", unit="problem", disable=not progress, dynamic_ncols=True)
    for lo in range(0, len(tasks), batch_problems):
        chunk = list(tasks[lo : lo + batch_problems])
        repeated = [t for t in chunk for _ in range(samples)]
        # Random feedback comes from any other problem of the set, not only of this chunk.
        episodes = run_episodes(engine, renderer, repeated, config, judge, rng=rng, unrelated=tasks)
        for p in range(len(chunk)):
            problem_dialogs = []
            for ep in episodes[p * samples : (p + 1) * samples]:
                if not ep.judged:
                    unjudged += 1
                    continue
                turns = [
                    Turn(public=turn.public_passed, private=bool(turn.private_passed)) for turn in ep.turns
                ]
                problem_dialogs.append(turns)
                if turns[0].private:
                    solved_first += 1
                    continue
                first_wrong += 1
                for t, turn in enumerate(turns[1:], start=2):
                    if turn.private:
                        fixed[t] += 1
                        break
            if problem_dialogs:
                dialogs.append(problem_dialogs)
        bar.update(len(chunk))
    bar.close()
    rates = [solve_rate(dialogs, n, k, seed=seed) for n, k in nk]
    return DialogEval(
        rates=rates,
        episodes=len(tasks) * samples,
        first_wrong=first_wrong,
        fixed_at_turn=fixed,
        solved_first_turn=solved_first,
        unjudged=unjudged,
    )
