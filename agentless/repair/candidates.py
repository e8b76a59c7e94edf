"""An answer becomes a candidate patch, or a recorded reason why it could not.

The steps are the training format's own (`swerl.edit_format`): parse the answer, apply its edits with
the reward's semantics to the *full* files, and build a git patch. Then two checks that the reward does
not make but a submission needs: every edited path must exist in the repository (or be created with an
empty search), and every edited Python file must still parse. A failure at any step is a value with a
stable `error` kind, never an exception: one bad sample must not stop a run of hundreds of instances.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from swerl.edit_format import FormatError, apply_edits, build_git_patch, parse_answer


@dataclass
class Candidate:
    """One repair sample and what became of it. `patch` is "" exactly when `error` is set."""

    index: int
    temperature: float
    answer: str
    finish_reason: str = "stop"
    error: str | None = None
    message: str = ""
    patch: str = ""
    paths: list[str] = field(default_factory=list)
    new_contents: dict[str, str] = field(default_factory=dict, repr=False)

    def to_row(self) -> dict[str, object]:
        return {
            "index": self.index,
            "temperature": self.temperature,
            "finish_reason": self.finish_reason,
            "answer": self.answer,
            "error": self.error,
            "message": self.message[:500],
            "patch": self.patch,
            "paths": self.paths,
        }


def _syntax_problem(path: str, old: str | None, new: str) -> str | None:
    """Why `new` no longer parses, when it is Python and `old` did parse (or is a new file)."""
    if not path.endswith(".py"):
        return None
    try:
        ast.parse(new)
    except (SyntaxError, ValueError) as err:
        if old is not None:
            try:
                ast.parse(old)
            except (SyntaxError, ValueError):
                return None  # the file never parsed (Python 2, templates): nothing to compare with
        return f"{path}: {err}"
    return None


def make_candidate(
    index: int,
    answer: str,
    read_file: Callable[[str], str | None],
    *,
    temperature: float = 0.0,
    finish_reason: str = "stop",
) -> Candidate:
    """Turn one answer into a candidate. `read_file(path)` gives a file's full text at the base commit,
    or None when the repository has no such file."""
    cand = Candidate(index, temperature, answer, finish_reason)
    try:
        parsed = parse_answer(answer)
    except FormatError as err:
        cand.error, cand.message = str(err.kind), err.message
        return cand
    old: dict[str, str] = {}
    for edit in parsed.edits:
        if edit.path.startswith("/") or ".." in edit.path.split("/") or not edit.path.strip():
            cand.error, cand.message = "bad_path", f"{edit.path!r} is not a path inside the repository"
            return cand
        if edit.path in old:
            continue
        text = read_file(edit.path)
        if text is None:
            if edit.search.strip():
                cand.error = "unknown_path"
                cand.message = f"{edit.path!r} does not exist in the repository"
                return cand
            continue
        old[edit.path] = text
    try:
        new = apply_edits(old, parsed.edits)
    except FormatError as err:
        cand.error, cand.message = str(err.kind), err.message
        return cand
    changed = {path: text for path, text in new.items() if old.get(path) != text}
    if not changed:
        cand.error, cand.message = "no_change", "the edits leave every file as it was"
        return cand
    for path, text in changed.items():
        problem = _syntax_problem(path, old.get(path), text)
        if problem is not None:
            cand.error, cand.message = "syntax_error", problem
            return cand
    try:
        cand.patch = build_git_patch(old, changed)
    except ValueError as err:
        cand.error, cand.message = "bad_path", str(err)
        return cand
    cand.paths = sorted(changed)
    cand.new_contents = changed
    return cand


def cached_reader(
    read: Callable[[str], str | None], preloaded: Mapping[str, str]
) -> Callable[[str], str | None]:
    """A `read_file` that answers from `preloaded` first and remembers what it read."""
    cache: dict[str, str | None] = dict(preloaded)

    def reader(path: str) -> str | None:
        if path not in cache:
            cache[path] = read(path)
        return cache[path]

    return reader
