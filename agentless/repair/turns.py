"""Repair in turns: each sample's patch runs on the tests a deployment has, and the failures go back to
the model as the next user turn, before rerank (RLEF's execution feedback, served).

A deployed model never sees the hidden tests that grade it; what it can run are the repository's own tests
that pass before the fix (the regression tests Agentless selects: they must keep passing) and the
reproduction tests it wrote from the issue that fail before the fix (they should pass after it). Those
are the public tests of the dialog. A sample's episode: its first answer is the repair stage's; while it
fails a public test and fewer than `turns` feedback turns were given, the feedback (the one renderer the
RLEF repository environment uses) becomes a user turn after the answer, and the model answers again. An
answer that passes them all ends the episode early; the last answer is never run here (rerank runs it).

Each answer is a complete edit against the base files, as each RLEF answer is a complete program: the
model can restart rather than patch its own patch, and a candidate stays comparable with every other.

The dialog is kept as chat messages, prompt, then each answer followed by its feedback turn, and rendered
by the chat template for every new answer; the template puts between an answer and the next the same
text RLEF's token bookkeeping appends (end of turn, the user turn, the start of the next answer).

Resume: the stage row of an instance is the whole state of its episodes and is appended after every phase
(the public tests' baseline, each turn's test runs, each turn's answers), so a killed run loses at most
the phase in flight; the last row of an instance wins and `done` says it has nothing left to do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentless.repair.candidates import make_candidate
from agentless.rerank.select import (
    failing_at_base,
    passed_files,
    passing_at_base,
    reproduction_files,
)
from agentless.sampling import Messages, PromptTooLong, TextSampler
from swerl.edit_format import FormatError, FormatErrorKind
from swerl.environments.repository import (
    DEFAULT_FEEDBACK_CHARS,
    NEXT_ANSWER,
    RepoJob,
    render_format_error,
    render_test_feedback,
)
from swerl.execution.base import ExecutionBackend, TestRun
from swerl.execution.dispatch import Dispatch, TestJob, run_jobs
from swerl.execution.instances import Instance
from swerl.reward.execution import ExecutionResult

Row = dict[str, Any]
STOPS = ("passed", "no_tests", "max_turns", "infra_error", "prompt_too_long")
"""Why a sample's episode ended: its answer passes every public test; there is none to run; it had its
feedback turns; its tests could not run (after a retry: not the answer's fault, so no feedback on it);
the dialog no longer fits the model's context."""


@dataclass(frozen=True)
class PublicTests:
    """What the deployment runs on a patch: regression tests passing at the base, reproduction tests
    failing there (their files and the patch that adds them)."""

    regression: tuple[str, ...]
    reproduction: tuple[str, ...]
    reproduction_patch: str

    @property
    def empty(self) -> bool:
        return not self.regression and not self.reproduction

    def to_row(self) -> Row:
        return {
            "regression": list(self.regression),
            "reproduction": list(self.reproduction),
            "reproduction_patch": self.reproduction_patch,
        }

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> PublicTests:
        return cls(tuple(row["regression"]), tuple(row["reproduction"]), str(row["reproduction_patch"]))

    def job(self, instance: Instance, patch: str) -> TestJob:
        """The run of `patch` on these tests: the regression tests by id, the reproduction tests' files
        (added by their patch, after the answer's)."""
        extra = (self.reproduction_patch,) if self.reproduction_patch else ()
        return TestJob(instance, patch, (*self.regression, *self.reproduction), extra)

    def failures(self, run: TestRun) -> list[str]:
        """The public tests `run` did not pass (a reproduction file counts as one)."""
        failed = [t for t in self.regression if not run.passed(t)]
        passed = passed_files(run, self.reproduction)
        return failed + [p for p in self.reproduction if p not in passed]


def public_tests(
    instance: Instance,
    backend: ExecutionBackend,
    regression: Sequence[str] | None,
    reproductions: Sequence[str],
    notes: list[str],
) -> PublicTests:
    """Run the candidate public tests at the base commit and keep those that can tell a fix: regression
    tests (files or ids; None: off) that pass there, reproduction tests (sources) that fail there."""
    passing: list[str] = []
    if regression:
        baseline, passing = passing_at_base(instance, backend, regression)
        if baseline.status != "ok" or not passing:
            notes.append(f"no regression tests: baseline run {baseline.status}, {len(passing)} passing")
            passing = []
    kept = failing_at_base(instance, backend, reproductions, notes) if reproductions else []
    paths, patch = reproduction_files(reproductions, kept) if kept else ([], "")
    return PublicTests(tuple(passing), tuple(paths), patch)


# -- the feedback text ----------------------------------------------------------------------------------

_CANDIDATE_CHECKS = {
    "syntax_error": "Your edits leave a Python file that does not parse, so nothing ran.",
    "no_change": "Your edits leave every file as it was, so nothing ran.",
    "bad_path": "An edit names a path outside the repository, so nothing ran.",
}
"""The candidate checks Agentless adds to the format's own (`agentless.repair.candidates`)."""


def render_feedback(
    instance: Instance,
    turn: Mapping[str, Any],
    run: TestRun | None,
    tests: PublicTests,
    max_chars: int = DEFAULT_FEEDBACK_CHARS,
) -> str:
    """The feedback on an answer: the RLEF repository environment's renderer, on the public tests' run
    (`run`), or on the edits that could not become a patch (`run` None). A reproduction test file that
    did not collect counts as one failing test under its path."""
    if run is None:
        kind, message = str(turn.get("error")), str(turn.get("message") or "")
        if kind in _CANDIDATE_CHECKS:
            return f"{_CANDIDATE_CHECKS[kind]}\n```\n{message[-600:]}\n```\n{NEXT_ANSWER}"
        known = kind if kind in set(FormatErrorKind) else FormatErrorKind.NO_BLOCKS
        return render_format_error(FormatError(FormatErrorKind(known), message))
    ran = [t for t in run.results if t.split("::", 1)[0] in tests.reproduction]
    unrun = [p for p in tests.reproduction if not any(t.split("::", 1)[0] == p for t in ran)]
    error = {"apply_failed": "patch_does_not_apply", "build_failed": "does_not_build"}.get(run.status)
    result = ExecutionResult(0.0, "unresolved", error, log=run.log, statuses=dict(run.results))
    job = RepoJob(instance, str(turn.get("patch") or ""), public=(*tests.regression, *ran, *unrun))
    return render_test_feedback(result, job, max_chars)


# -- episodes -------------------------------------------------------------------------------------------


def first_turns(repair_row: Mapping[str, Any]) -> list[Row]:
    """One episode per repair sample, its first answer the sample itself."""
    return [
        {
            "index": int(s["index"]),
            "temperature": float(s.get("temperature", 0.0)),
            "stopped": None,
            "turns": [_answer_row(s)],
        }
        for s in repair_row.get("samples", [])
    ]


def _answer_row(sample: Mapping[str, Any]) -> Row:
    keys = ("answer", "finish_reason", "error", "message", "patch", "paths")
    return {k: sample.get(k) for k in keys}


def dialog(prompt: Messages, episode: Mapping[str, Any]) -> Messages:
    """The messages before the episode's next answer: the prompt, then each answer and its feedback."""
    out = list(prompt)
    for turn in episode["turns"]:
        out.append({"role": "assistant", "content": str(turn["answer"])})
        out.append({"role": "user", "content": str(turn["feedback"])})
    return out


def give_feedback(
    instance: Instance,
    backend: ExecutionBackend,
    tests: PublicTests,
    episodes: Sequence[Row],
    max_turns: int,
    dispatch: Dispatch | None = None,
) -> int:
    """The run phase of a turn, in place: each open episode's last answer is run (or judged unusable)
    and either ends the episode or gets its feedback. Returns how many episodes it moved on.

    The runs go through the execution reward's machinery (`swerl.execution.dispatch`, where `dispatch`
    says: default one thread): each distinct patch once; a run the backend raised on is tried once
    more, then ends the episode without feedback (`infra_error`: no verdict on the answer)."""
    open_ = [e for e in episodes if e["stopped"] is None and "feedback" not in e["turns"][-1]]
    for episode in open_:
        if len(episode["turns"]) > max_turns:
            episode["stopped"] = "max_turns"
    open_ = [e for e in open_ if e["stopped"] is None]
    patched = [e for e in open_ if e["turns"][-1]["patch"]]
    if tests.empty:
        for episode in patched:
            episode["stopped"] = "no_tests"
        runs: list[TestRun | None] = []
        patched = []
    else:
        jobs = [tests.job(instance, e["turns"][-1]["patch"]) for e in patched]
        runs = run_jobs(backend, jobs, dispatch)
    for episode, run in zip(patched, runs, strict=True):
        turn = episode["turns"][-1]
        if run is None:
            episode["stopped"] = "infra_error"
            continue
        failed = tests.failures(run)
        turn["tests"] = {"status": run.status, "failed": failed}
        if not failed:
            episode["stopped"] = "passed"
        else:
            turn["feedback"] = render_feedback(instance, turn, run, tests)
    for episode in open_:
        turn = episode["turns"][-1]
        if not turn["patch"]:
            turn["feedback"] = render_feedback(instance, turn, None, tests)
    return len(open_)


def answer_again(
    sampler: TextSampler,
    prompt: Messages,
    episodes: Sequence[Row],
    read: Callable[[str], str | None],
    *,
    max_new_tokens: int,
    seed: int,
) -> int:
    """The answer phase of a turn, in place: every open episode whose last answer has its feedback gets
    its next answer (greedy episodes greedily, the others at their temperature). Returns how many
    episodes it moved on."""
    waiting = [e for e in episodes if e["stopped"] is None and "feedback" in e["turns"][-1]]
    for temperature in sorted({e["temperature"] for e in waiting}):
        group = [e for e in waiting if e["temperature"] == temperature]
        turn = len(group[0]["turns"])
        call_seed = seed + 1000 * turn + (1 if temperature > 0 else 0)
        answers = _sample(sampler, prompt, group, temperature, max_new_tokens, call_seed)
        for episode, sample in zip(group, answers, strict=True):
            if sample is None:
                episode["stopped"] = "prompt_too_long"
                continue
            stop, index = sample.finish_reason, episode["index"]
            cand = make_candidate(index, sample.text, read, temperature=temperature, finish_reason=stop)
            episode["turns"].append(_answer_row(cand.to_row()))
    return len(waiting)


def _sample(
    sampler: TextSampler,
    prompt: Messages,
    group: Sequence[Row],
    temperature: float,
    max_new_tokens: int,
    seed: int,
) -> list[Any]:
    """One answer per episode of `group`, in one call; when a dialog no longer fits, one call each so
    that only the ones that do not fit go without (None)."""
    dialogs = [dialog(prompt, e) for e in group]

    def call(batch: list[Messages]) -> list[Any]:
        out = sampler.sample(batch, n=1, temperature=temperature, max_new_tokens=max_new_tokens, seed=seed)
        return [samples[0] for samples in out]

    try:
        return call(dialogs)
    except PromptTooLong:
        answers: list[Any] = []
        for one in dialogs:
            try:
                answers += call([one])
            except PromptTooLong:
                answers.append(None)
        return answers
