"""RLEF episodes as token-in/token-out dialogs: answer, execution feedback, answer again.

An episode (RLEF, Gehring et al. 2025): the problem statement is the first user turn; the model answers;
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

Tasks are anything with a statement and two jobs for the sandbox (public and private tests):
`ContestTask` wraps a CodeContests-shaped `Problem`, `HumanEvalTask` a HumanEval problem.
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from swerl.codecontests.checker import outputs_match
from swerl.codecontests.extract import Extracted, extract_answer
from swerl.codecontests.feedback import render_feedback, render_syntax_error
from swerl.codecontests.humaneval import HumanEvalProblem
from swerl.codecontests.humaneval import job as humaneval_job
from swerl.codecontests.problems import Problem
from swerl.rollout.base import SamplingParams
from swerl.sandbox import Job, Limits, SandboxConfig, TestCase, TestResult, run_batch

FEEDBACK_MODES = ("execution", "none", "random")
"""execution: the real public-test feedback; none: one answer per episode (independent samples);
random: feedback of the answer run on an *unrelated* problem's public tests (the paper's ablation)."""

INSTRUCTIONS = (
    "Write a Python 3 program that reads from standard input and writes to standard output. "
    "Answer with the complete program in one ```python code block."
)

RENDER_SENTINEL = "\u2063SWERL-ANSWER\u2063"


# ----------------------------------------------------------------------------------------------- tasks
class Task(Protocol):
    """What an episode needs from a problem: the first user turn and the two sandbox jobs."""

    name: str

    def messages(self) -> list[dict[str, str]]: ...

    def public_job(self, code: str | None) -> Job: ...

    def private_job(self, code: str | None) -> Job: ...


@dataclass(frozen=True)
class ContestTask:
    """A CodeContests-shaped problem: stdin/stdout tests, the problem's own time and memory limits."""

    problem: Problem
    limits: Limits = field(default_factory=Limits)

    @property
    def name(self) -> str:
        return self.problem.name

    def messages(self) -> list[dict[str, str]]:
        return [{"role": "user", "content": f"{self.problem.description.strip()}\n\n{INSTRUCTIONS}"}]

    def public_job(self, code: str | None) -> Job:
        return Job(code, self.problem.public_tests, self.problem.limits(self.limits))

    def private_job(self, code: str | None) -> Job:
        # "All public and private tests": the public ones are re-checked so a final answer that was never
        # judged on them (the last turn) cannot be counted as solved without passing them.
        tests = self.problem.public_tests + self.problem.held_out_tests
        return Job(code, tests, self.problem.limits(self.limits))


@dataclass(frozen=True)
class HumanEvalTask:
    """A HumanEval problem; the answer is the whole function.

    HumanEval has no public tests, so the examples in the docstring (`>>> f(x)` then the expected value)
    play that role: the public job asserts them, the private job runs the official `check`. Problems
    without docstring examples get a public job that only imports the answer (it catches crashes).
    """

    problem: HumanEvalProblem

    @property
    def name(self) -> str:
        return self.problem.task_id

    def messages(self) -> list[dict[str, str]]:
        return [
            {
                "role": "user",
                "content": "Complete this Python function. Answer with the whole function (imports "
                f"included) in one ```python code block.\n\n```python\n{self.problem.prompt}```",
            }
        ]

    def public_job(self, code: str | None) -> Job:
        if code is None:
            return Job(None, (TestCase(""),))
        checks = "\n".join(
            f"assert {call} == {want}, {call!r}" for call, want in docstring_examples(self.problem)
        )
        return Job(f"{code}\n\n{checks}\n", (TestCase(""),))

    def private_job(self, code: str | None) -> Job:
        return humaneval_job(self.problem, code, include_prompt=False)


def docstring_examples(problem: HumanEvalProblem) -> list[tuple[str, str]]:
    """(call, expected) pairs from `>>> entry_point(...)` lines followed by a one-line expected value."""
    lines = problem.prompt.splitlines()
    pairs = []
    for i, line in enumerate(lines[:-1]):
        call = line.strip().removeprefix(">>>").strip()
        want = lines[i + 1].strip()
        is_example = line.strip().startswith(">>>") and call.startswith(problem.entry_point)
        if is_example and want and not want.startswith(">>>"):
            pairs.append((call, want))
    return pairs


# ------------------------------------------------------------------------------------------- judging
Judge = Callable[[Sequence[Job]], list[list[TestResult]]]
"""judge(jobs) -> results[i][j] for job i on its test j (the sandbox, or a fake in tests)."""


def sandbox_judge(config: SandboxConfig | None = None, workers: int | None = None) -> Judge:
    """The real judge: the sandbox pool with the CodeContests output checker."""

    def judge(jobs: Sequence[Job]) -> list[list[TestResult]]:
        return run_batch(jobs, checker=outputs_match, config=config, workers=workers)

    return judge


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
    """One answer of an episode, with what the sandbox said about it."""

    context_len: int
    """Dialog tokens before this answer: the state the turn-level value function scores."""
    answer_ids: list[int]
    logprobs: list[float]
    text: str
    code: str | None
    public_passed: bool
    syntax_error: str | None = None
    """The interpreter's report when the answer's program does not parse (then `code` is None)."""
    finish_reason: str = "stop"
    private_passed: bool | None = None
    """All public + private tests passed; judged for the final answer (for every answer in evaluation)."""
    feedback: str | None = None
    feedback_ids: list[int] = field(default_factory=list)
    reward: float = 0.0
    """The task reward r_t (before the KL penalty)."""


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
    """r_t: the final answer +1 if it passes all tests, -1 otherwise (no valid code included); an earlier
    answer -0.2 without valid code, else 0.

    Why a final answer without code gets -1 and not -0.2: it fails every test, like any wrong program.
    With -0.2 it would pay to write nothing whenever the chance of solving is low (docs/rlef.md, "Rewards",
    works the numbers); with -1 no policy that withholds code, on any turns, scores better than trying.
    """
    if final:
        passed = turn.code is not None and turn.private_passed
        return config.solved_reward if passed else config.failed_reward
    return config.invalid_code_reward if turn.code is None else 0.0


def no_code_feedback(turn: TurnRecord, tests: Sequence[TestCase], results: Sequence[TestResult]) -> str:
    """The feedback on an answer with no runnable program: the syntax error if it has one, else the
    sandbox's "no code found" message."""
    if turn.syntax_error is not None:
        return render_syntax_error(turn.syntax_error)
    return render_feedback(tests, results) or ""


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
    """One episode per task (repeat a task for several), all turns batched through the engine and sandbox.

    `unrelated`: the problems random feedback is drawn from (default: `tasks`). Pass the whole set when
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
        completions = [group[0] for group in engine.generate([contexts[i] for i in active], params)]
        answers: list[Extracted] = [extract_answer(c.text) for c in completions]
        jobs = [episodes[i].task.public_job(a.code) for i, a in zip(active, answers, strict=True)]
        results = judge(jobs)
        continuing = []
        for i, comp, answer, job, res in zip(active, completions, answers, jobs, results, strict=True):
            turn = TurnRecord(
                context_len=len(contexts[i]),
                answer_ids=list(comp.token_ids),
                logprobs=list(comp.logprobs),
                text=comp.text,
                code=answer.code,
                public_passed=answer.code is not None and all(r.passed for r in res),
                syntax_error=answer.syntax_error,
                finish_reason=comp.finish_reason,
            )
            episodes[i].turns.append(turn)
            if turn.public_passed or t + 1 == max_turns:
                continue
            if turn.code is None:
                turn.feedback = no_code_feedback(turn, job.tests, res)
            else:
                turn.feedback = render_feedback(job.tests, res) or ""
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
    """Replace each last turn's feedback by that of its code on an unrelated problem's public tests."""
    jobs = []
    for ep in episodes:
        others = [task for task in tasks if task.name != ep.task.name] or [ep.task]
        jobs.append(rng.choice(others).public_job(ep.turns[-1].code))
    for ep, job, res in zip(episodes, jobs, judge(jobs), strict=True):
        turn = ep.turns[-1]
        # Passing the unrelated tests still has to read as a failure: the episode continues regardless.
        # A program that does not parse gets its true report: it is the same on any problem.
        if turn.code is None:
            turn.feedback = no_code_feedback(turn, job.tests, res)
        else:
            turn.feedback = (
                render_feedback(job.tests, res) or "Your code failed the public tests. Fix the program."
            )
        turn.feedback_ids = renderer.feedback_ids(
            turn.feedback, turn.answer_ids, turn.finish_reason == "stop"
        )


def _judge_private(episodes: Sequence[Episode], judge: Judge, all_turns: bool) -> None:
    """Private (+ public) tests on final answers, or on every answer; answers without code fail unrun."""
    todo = [
        (ep, turn)
        for ep in episodes
        for t, turn in enumerate(ep.turns)
        if all_turns or t == len(ep.turns) - 1
    ]
    runnable = [(ep, turn) for ep, turn in todo if turn.code is not None and turn.public_passed]
    results = judge([ep.task.private_job(turn.code) for ep, turn in runnable]) if runnable else []
    for _, turn in todo:
        turn.private_passed = False
    for (_, turn), res in zip(runnable, results, strict=True):
        turn.private_passed = all(r.passed for r in res)


# ------------------------------------------------------------------------------------ SFT warm-up
def corrupted_solutions(code: str, constant: bool = True, guesses: Sequence[int] = ()) -> list[str]:
    """Wrong variants of a correct program, as a model gets them wrong: a stray extra output line, a
    crash (a name that does not exist) before any output, and, when the program has an integer literal
    and `constant` is set, its last one off by one (a constant not copied right from the statement, the
    commonest miss of a small model on the bundled problems; the feedback's expected output then points
    at the fix). The first two keep the program's constant, so a fix never has to read it elsewhere.

    `guesses`: also the last literal replaced by each of these values other than its own, the constant a
    model writes when the statement leaves it out. Why not only off by one: when every wrong constant is
    k + 1, "subtract one" fixes it without reading the feedback; with wrong constants spread over the
    range, the feedback's expected output is the only way to the fix."""
    body = code.rstrip()
    variants = [f"{body}\nprint(0)\n", f"answer = solve_input()\n{body}\n"]
    literals = list(re.finditer(r"\d+", body))
    if not literals:
        return variants
    last = literals[-1]
    own = int(last.group())
    wrong = ([own + 1] if constant else []) + [g for g in dict.fromkeys(guesses) if g != own]
    variants += [f"{body[: last.start()]}{value}{body[last.end() :]}\n" for value in wrong]
    return variants


def last_constants(codes: Sequence[str]) -> list[int]:
    """The distinct last integer literals of these programs, in order: the constants a model has seen
    written, hence the ones it guesses."""
    found = (re.findall(r"\d+", code) for code in codes)
    return list(dict.fromkeys(int(literals[-1]) for literals in found if literals))


def feedback_fix_dialogs(
    renderer: ChatRenderer,
    tasks: Sequence[ContestTask],
    judge: Judge,
    answer_ids: Callable[[Task, str], list[int]],
    constant: bool = True,
    guesses: int = 0,
    feedback_rate: float = 1.0,
    rng: random.Random | None = None,
) -> list[tuple[list[int], list[int]]]:
    """Second-turn SFT examples: (prompt, wrong answer, its real feedback) -> the fix, or the wrong answer.

    Each task's first reference solution is corrupted (`corrupted_solutions`; with `guesses` > 0 also
    with that many other tasks' constants, drawn by `rng`) and the variants are run on the public tests by
    `judge`; the ones that really fail become the first answer of a dialog, followed by exactly the
    feedback ids `run_episodes` would add. `answer_ids(task, code)` gives an answer's ids with its end of
    turn. Returns (context ids, target ids); only the target is meant to be trained on.

    The target is the reference (the feedback used) in a share `feedback_rate` of the dialogs, drawn by
    `rng`, and the wrong answer resubmitted unchanged (the feedback ignored) in the rest. Why a share
    below 1: a warm-up that always shows the fix teaches the skill outright, so RL has nothing left to
    add; one that never shows it leaves a tiny model a behaviour it may never find by sampling. In
    between, the start policy uses the feedback sometimes, and RL, rewarded by the private tests only,
    can amplify it.
    """
    rng = rng or random.Random(0)
    solutions = [task.problem.python_solutions[:1] for task in tasks]
    pool = last_constants([code for codes in solutions for code in codes])
    cases = []
    for task, codes in zip(tasks, solutions, strict=True):
        for solution in codes:
            others = [g for g in pool if g not in last_constants([solution])]
            drawn = rng.sample(others, min(guesses, len(others)))
            cases += [(task, solution, wrong) for wrong in corrupted_solutions(solution, constant, drawn)]
    jobs = [task.public_job(wrong) for task, _, wrong in cases]
    out = []
    for (task, solution, wrong), job, results in zip(cases, jobs, judge(jobs) if jobs else [], strict=True):
        feedback = render_feedback(job.tests, results)
        if feedback is None:  # the variant passes the public tests: nothing to fix
            continue
        wrong_ids = answer_ids(task, wrong)
        context = renderer.prompt_ids(task) + wrong_ids + renderer.feedback_ids(feedback, wrong_ids, True)
        fixed = feedback_rate >= 1.0 or rng.random() < feedback_rate  # at 1, no draw: earlier runs replay
        out.append((context, answer_ids(task, solution) if fixed else wrong_ids))
    return out


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

    def fixed_share(self, turn: int) -> float:
        return self.fixed_at_turn.get(turn, 0) / max(1, self.first_wrong)

    def summary(self) -> str:
        rates = ", ".join(str(r) for r in self.rates)
        fixes = ", ".join(
            f"turn {t}: {self.fixed_at_turn[t]}/{self.first_wrong} ({100 * self.fixed_share(t):.1f}%)"
            for t in sorted(self.fixed_at_turn)
        )
        wrong = f"first answer wrong in {self.first_wrong}/{self.episodes} dialogs"
        return f"{rates}; {wrong}, fixed at {fixes or '-'}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "rates": [dataclasses.asdict(r) for r in self.rates],
            "episodes": self.episodes,
            "first_wrong": self.first_wrong,
            "fixed_at_turn": {str(t): n for t, n in self.fixed_at_turn.items()},
            "fixed_share": {str(t): self.fixed_share(t) for t in self.fixed_at_turn},
            "solved_first_turn": self.solved_first_turn,
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
    first_wrong, solved_first = 0, 0
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
    )
