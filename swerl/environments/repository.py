"""RLEF on executable repository rows: answer with SEARCH/REPLACE edits, read the public tests' failures,
answer again; graded on every test of the row.

A validated row (SWE-bench schema: `swerl data validate` output, or a published dataset with its clones)
is a `RepositoryTask`. The first user turn is the row's own SWE-RL prompt (the issue and the files the
model may edit). Each answer is parsed by `swerl.edit_format` (the one parser) and applied to those files;
the resulting git patch is judged by `swerl.reward.execution.ExecutionReward` (the local harness behind
`swerl agentless evaluate` and the execution reward: distinct answers once, Ray optional, infrastructure
failures no verdict). Every answer is a whole answer against the files as first shown, as a contest
answer is a whole program: the final one alone is graded.

Public and private tests (docs/rlef.md, "Repository tasks", says why). Public: a share of FAIL_TO_PASS
(`public_share`, at least one, never all; or the ids a row's PUBLIC_TESTS column names) and the
PASS_TO_PASS tests, the repository's existing tests, which a deployed model can run too. Private: the
other FAIL_TO_PASS tests. The grade is the harness's verdict on all of the row's tests. A row with one
FAIL_TO_PASS test is left out: its one test would be either shown (the grade would rest on a test the
model saw, which an answer can special-case) or hidden (the feedback would say nothing about the issue).

Feedback (`render_test_feedback`): the failing public test ids, each one's pytest report cut to its tail
(the assertion or exception and the end of the traceback), an edit whose SEARCH text is not in the file,
a patch that does not apply or build, a package that no longer imports; bounded by `feedback_chars`; never
a private test's name or source (sections are picked by public test name and a last pass removes any line
naming a private test).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from swerl.codecontests.feedback import fenced
from swerl.edit_format import FormatError, FormatErrorKind, patch_paths
from swerl.environments.dialog import Answer, Outcome, Task
from swerl.errors import UserError
from swerl.execution.base import BUILD_FAILED
from swerl.execution.harness import END, START
from swerl.execution.instances import Instance
from swerl.reward.batch import coerce_contents
from swerl.reward.execution import ExecutionResult, ExecutionReward, answer_patch, row_instance

DEFAULT_PUBLIC_SHARE = 0.5
DEFAULT_FEEDBACK_CHARS = 2400
"""About 700 tokens of code-like text for a BPE tokenizer (3-4 characters a token)."""
MAX_SHOWN_FAILURES = 3
MAX_LISTED_FAILURES = 10
PUBLIC_TESTS_COLUMN = "PUBLIC_TESTS"
NEXT_ANSWER = (
    "Give your whole answer again: SEARCH/REPLACE edits against the files as first shown "
    "(this answer is discarded)."
)

MIN_REPORT_CHARS = 300
NOT_PASSED = "The public tests did not pass."
NO_RESULT = "No test result was reported; the end of the output"

_SECTION = re.compile(r"^_{3,} (.+?) _{3,}$")
_BANNER = re.compile(r"^={3,}.*={3,}$")


# ------------------------------------------------------------------------------------------ the split
def public_fail_to_pass(instance: Instance, share: float = DEFAULT_PUBLIC_SHARE) -> tuple[str, ...]:
    """The FAIL_TO_PASS tests shown to the model: round(share * n) of them, at least one and at most
    n - 1, chosen by a hash of (instance id, test id), so the split is the same in every run, on every
    machine, and does not favour the file's first (often simplest) tests. Empty for n < 2."""
    tests = list(instance.fail_to_pass)
    if len(tests) < 2:
        return ()
    count = min(len(tests) - 1, max(1, round(share * len(tests))))

    def key(test: str) -> str:
        return hashlib.sha256(f"{instance.instance_id}\n{test}".encode()).hexdigest()

    chosen = set(sorted(tests, key=key)[:count])
    return tuple(t for t in tests if t in chosen)


def row_public_tests(row: Mapping[str, Any], instance: Instance) -> tuple[str, ...] | None:
    """The public FAIL_TO_PASS tests a row names itself (a PUBLIC_TESTS column, a JSON list), None when
    it names none. They must be FAIL_TO_PASS tests, at least one, and not all of them."""
    value = row.get(PUBLIC_TESTS_COLUMN)
    if value is None or value == "":
        return None
    named = json.loads(value) if isinstance(value, str) else list(value)
    chosen = tuple(str(t) for t in named)
    unknown = [t for t in chosen if t not in instance.fail_to_pass]
    if unknown or not chosen or len(set(chosen)) >= len(set(instance.fail_to_pass)):
        raise UserError(
            f"{instance.instance_id}: {PUBLIC_TESTS_COLUMN} must name some but not all FAIL_TO_PASS tests"
            + (f" (not FAIL_TO_PASS: {', '.join(unknown[:3])})" if unknown else "")
        )
    return chosen


# ------------------------------------------------------------------------------------------- jobs
@dataclass(frozen=True)
class RepoJob:
    """One test run of an answer: the instance whose tests grade it, the patch, the tests it may report."""

    instance: Instance
    """The public view of the row (its public tests as FAIL_TO_PASS / PASS_TO_PASS) or the whole row."""
    patch: str | None
    """The answer as a git patch against the base commit; None: nothing to run (edits that do not
    parse or apply), judged malformed without a run."""
    public: tuple[str, ...] = ()
    """Tests whose outcome the feedback may show (empty for a private job)."""
    private: tuple[str, ...] = ()
    """Tests the feedback must never name."""


@dataclass(frozen=True)
class RepositoryJudge:
    """The judge of `RepoJob`s: one `ExecutionReward.score_pairs` call per batch (the same patch for the
    same tests once, `workers` runs at a time or on Ray, a verdict known from an earlier call from the
    reward's memo). `reward` runs an empty patch too (`run_empty`), since its feedback must say what
    fails."""

    reward: ExecutionReward

    def __call__(self, jobs: Sequence[RepoJob]) -> list[ExecutionResult]:
        runnable = [i for i, job in enumerate(jobs) if job.patch is not None]
        verdicts = self.reward.score_pairs([(jobs[i].instance, str(jobs[i].patch)) for i in runnable])
        out = [ExecutionResult(-1.0, "malformed", "no_answer") for _ in jobs]
        for i, verdict in zip(runnable, verdicts, strict=True):
            out[i] = verdict
        return out


def repository_judge(reward: ExecutionReward) -> RepositoryJudge:
    """`reward` as the judge of repository episodes (with `run_empty`; the copy shares its memo)."""
    return RepositoryJudge(reward if reward.run_empty else dataclasses.replace(reward, run_empty=True))


# -------------------------------------------------------------------------------------------- the task
@dataclass(frozen=True)
class RepositoryTask:
    """One executable row as an RLEF task (a `swerl.environments.dialog.Task`)."""

    instance: Instance
    prompt: tuple[Mapping[str, str], ...]
    """The first turn's messages (system, user): the row's SWE-RL prompt."""
    code_context: Mapping[str, str]
    """The files the prompt shows, which the answer's SEARCH texts must match."""
    public_tests: tuple[str, ...]
    """The FAIL_TO_PASS tests shown (see the module docstring); the others are private."""
    read_base: Callable[[str], str | None] = field(compare=False, repr=False)
    """A file of the base tree (for edits to a file the prompt does not show), None when absent."""
    feedback_chars: int = DEFAULT_FEEDBACK_CHARS
    public_pass_to_pass: bool = True

    @property
    def name(self) -> str:
        return self.instance.instance_id

    @property
    def private_tests(self) -> tuple[str, ...]:
        return tuple(t for t in self.instance.fail_to_pass if t not in self.public_tests)

    @functools.cached_property
    def public_instance(self) -> Instance:
        """The row as the public tests see it: graded on the public FAIL_TO_PASS (and PASS_TO_PASS)."""
        regression = self.instance.pass_to_pass if self.public_pass_to_pass else ()
        return dataclasses.replace(self.instance, fail_to_pass=self.public_tests, pass_to_pass=regression)

    def messages(self) -> list[dict[str, str]]:
        return [dict(m) for m in self.prompt]

    def extract(self, text: str) -> Answer:
        """The answer's edits applied to the shown files, as a git patch; or why they cannot be."""
        patch, error = answer_patch({"output": text}, self.code_context, self.read_base)
        if error is not None:
            return Answer(None, render_format_error(error))
        return Answer(patch)

    def public_job(self, code: str | None) -> RepoJob:
        shown = (*self.public_instance.fail_to_pass, *self.public_instance.pass_to_pass)
        return RepoJob(self.public_instance, code, shown, self.private_tests)

    def private_job(self, code: str | None) -> RepoJob:
        return RepoJob(self.instance, code, (), self.private_tests)

    def unrelated_job(self, code: str | None, other: Task) -> Any:
        """Random feedback: the other row's public tests on its own base tree. A patch for this
        repository means nothing to another one (it would only ever "not apply"); the other row's
        failures are real feedback, in the same form, about something else."""
        del code
        return other.public_job("")

    def outcome(self, answer: Answer, job: RepoJob, result: ExecutionResult) -> Outcome:
        """Passed: the harness resolved the job's instance; None: no verdict (the run failed)."""
        if result.kind in ("infra_error", "not_executable"):
            return Outcome(None)
        if answer.code is None:
            return Outcome(False, answer.error or "")
        if result.kind == "resolved":
            return Outcome(True)
        return Outcome(False, render_test_feedback(result, job, self.feedback_chars))


# --------------------------------------------------------------------------------------------- feedback
def render_format_error(error: FormatError) -> str:
    """What the model reads when its edits cannot become a patch: which rule, and which SEARCH text."""
    head = {
        FormatErrorKind.SEARCH_NOT_FOUND: "A SEARCH block does not match the file exactly, so nothing ran.",
        FormatErrorKind.AMBIGUOUS_SEARCH: "A SEARCH block matches more than one place, so nothing ran.",
        FormatErrorKind.UNKNOWN_PATH: "An edit names a file that was not shown, so nothing ran.",
    }.get(error.kind, "Your answer is not in the SEARCH/REPLACE format, so nothing ran.")
    return f"{head}\n```\n{_tail(error.message, 600)}\n```\n{NEXT_ANSWER}"


def _tail(text: str, limit: int) -> str:
    """The end of `text` in at most `limit` characters, the note of how much was cut included."""
    if len(text) <= limit:
        return text
    # The note is sized with the whole length, which has at least as many digits as the cut part's.
    room = max(0, limit - len(f"... ({len(text)} characters before)\n"))
    return f"... ({len(text) - room} characters before)\n{text[len(text) - room :]}"


def section_name(test_id: str) -> str:
    """The title pytest gives a test's failure report: `Class.test[param]` for `file::Class::test[param]`."""
    return ".".join(test_id.split("::")[1:]) or test_id


def test_sections(log: str) -> dict[str, str]:
    """pytest's failure and error reports in a log, by title (a test name, or "ERROR collecting FILE")."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in log.splitlines():
        match = _SECTION.match(line)
        if match is not None:
            current = sections.setdefault(match.group(1).strip(), [])
            continue
        if _BANNER.match(line):
            current = None
        elif current is not None:
            current.append(line)
    return {title: "\n".join(lines).strip("\n") for title, lines in sections.items()}


def _failed(result: ExecutionResult, tests: Iterable[str]) -> list[str]:
    return [t for t in tests if result.statuses.get(t) not in ("PASSED", "XFAIL")]


def _scrub(text: str, private: Sequence[str]) -> str:
    """`text` without any line that names a private test: its id past the file (`Class::test[p]`) or its
    report title (`Class.test[p]`), as a whole name. A public test of the same method name in another
    class, or with other parameters, keeps its lines."""
    names = set()
    for test in private:
        parts = test.split("::")[1:] or [test]
        names |= {"::".join(parts), ".".join(parts)}
    if not names:
        return text
    named = re.compile(r"(?<![\w.])(?:" + "|".join(map(re.escape, sorted(names))) + r")(?![\w\[])")
    return "\n".join(line for line in text.splitlines() if not named.search(line))


def render_test_feedback(result: ExecutionResult, job: RepoJob, max_chars: int) -> str:
    """The feedback on a patch that ran, or did not, on the public tests (see the module docstring)."""
    if result.error == "patch_does_not_apply":
        text = "Your patch does not apply to the repository, so no test ran."
    elif result.error == "does_not_build" or BUILD_FAILED in result.log:
        errors = [line for line in result.log.splitlines() if "error" in line.lower()]
        head = "Your patch does not build, so no test ran:\n```\n"
        text = head + _tail("\n".join(errors[-12:]), max_chars - len(head) - 4) + "\n```"
    else:
        text = _test_report(result, job, max_chars)
    return _scrub(f"{text}\n{NEXT_ANSWER}", job.private)


def _test_report(result: ExecutionResult, job: RepoJob, max_chars: int) -> str:
    """At most `max_chars`: the list of failing public tests, then the reports share what it leaves,
    their titles and fences paid first (each report keeps at least `MIN_REPORT_CHARS`, so only a list
    that nearly fills the budget alone can take the text past it)."""
    failed = _failed(result, job.public)
    sections = test_sections(result.log)
    collection = [(t, s) for t, s in sections.items() if t.startswith("ERROR collecting")][:1]
    shown = [t for t in failed if section_name(t) in sections][:MAX_SHOWN_FAILURES]
    lines = [f"{len(failed)} of {len(job.public)} public tests fail:" if failed else NOT_PASSED]
    lines += [f"FAILED {t}" for t in failed[:MAX_LISTED_FAILURES]]
    if len(failed) > MAX_LISTED_FAILURES:
        lines.append(f"... and {len(failed) - MAX_LISTED_FAILURES} more")
    titles = [title for title, _ in collection] + shown
    if not titles and not result.statuses:
        titles = [NO_RESULT]
    left = max_chars - sum(len(line) + 1 for line in lines) - sum(len(fenced(t, "")) + 1 for t in titles)
    budget = max(MIN_REPORT_CHARS, left // max(1, len(titles)))
    for title, body in collection:
        # A test file that does not import: its exception only (the lines that follow the import
        # line are the test file's own source).
        exception = [line for line in body.splitlines() if line.startswith("E ")]
        lines.append(fenced(title, _tail("\n".join(exception), budget)))
    seen: dict[str, str] = {}
    for test in shown:
        body = _tail(sections[section_name(test)], budget)
        if body in seen:  # the same report again (a shared helper failing): said once
            lines.append(f"{test}: fails the same way as {seen[body]}")
            continue
        seen[body] = test
        lines.append(fenced(test, body))
    if titles == [NO_RESULT]:
        output = result.log.split(START, 1)[-1].split(END, 1)[0].strip("'\n")
        lines.append(fenced(NO_RESULT, _tail(output, budget)))
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------- loading
@dataclass
class RepositoryTasks:
    """The tasks of a set of rows, and how many rows were left out, by reason."""

    tasks: list[RepositoryTask]
    skipped: dict[str, int]

    def summary(self) -> str:
        left = ", ".join(f"{n} {why}" for why, n in sorted(self.skipped.items()))
        return f"{len(self.tasks)} repository tasks" + (f"; left out: {left}" if left else "")


def oracle_context(instance: Instance, read_base: Callable[[str], str | None]) -> dict[str, str]:
    """For a published row without a prompt: the base tree's files that the gold patch changes."""
    files = {path: read_base(path) for path in patch_paths(instance.patch)}
    return {path: text for path, text in files.items() if text is not None}


def repository_tasks(
    rows: Iterable[Mapping[str, Any]],
    reward: ExecutionReward,
    messages: Callable[[Mapping[str, Any]], list[dict[str, str]]],
    *,
    public_share: float = DEFAULT_PUBLIC_SHARE,
    feedback_chars: int = DEFAULT_FEEDBACK_CHARS,
    public_pass_to_pass: bool = True,
) -> RepositoryTasks:
    """Tasks of the executable rows among `rows`; `messages(row)` renders a row's first turn (the
    trainers' `row_messages`: its stored prompt, else the repair prompt of its files). A row without
    `code_context` (a published dataset's) is shown the base files its gold patch changes."""
    tasks, skipped = [], {}
    for row in rows:
        instance = row_instance(row)
        problem = reward.problem(instance)
        if problem is not None or instance is None:
            why = problem[0] if problem is not None else "no_instance"
            skipped[why] = skipped.get(why, 0) + 1
            continue
        read = functools.partial(reward.backend.repos.read_file, instance.repo, instance.base_commit)
        public = row_public_tests(row, instance) or public_fail_to_pass(instance, public_share)
        if not public:
            skipped["one_fail_to_pass"] = skipped.get("one_fail_to_pass", 0) + 1
            continue
        context = (
            coerce_contents(row["code_context"], "code_context")
            if row.get("code_context")
            else oracle_context(instance, read)
        )
        prompt = messages({**row, "code_context": [{"path": p, "content": c} for p, c in context.items()]})
        tasks.append(
            RepositoryTask(
                instance,
                tuple(prompt),
                context,
                public,
                read,
                feedback_chars=feedback_chars,
                public_pass_to_pass=public_pass_to_pass,
            )
        )
    return RepositoryTasks(tasks, skipped)
