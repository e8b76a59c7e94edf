"""Mutants of a gold patch: the fixes a careless author could have written instead, made without a model.

A row's tests are only as good as the wrong fixes they reject. Each mutant is the gold patch with one
thing changed, in the kinds of mistake a hurried fix makes:

- `drop_hunk`: one hunk of the fix left out (the rest applied), for every hunk of a patch of more than one;
- on the lines the fix adds to a Python file (found with `ast`, so strings and comments are never touched):
  `flip_comparison` (`<` to `>=`, `==` to `!=`, `in` to `not in`, ...), `flip_boolean` (`True`/`False`,
  `and`/`or`, a `not` dropped), `off_by_one` (an integer constant, or a slice bound, plus one),
  `delete_statement` (a simple statement replaced by `pass`), `replace_return` (a returned value
  replaced by `None`) and `swallow_exception` (a `raise` replaced by `pass`).

A mutant that leaves the files as the base commit has them, whose Python does not parse, or that runs
the same code as the gold patch (a hunk of comments or docstrings left out) is dropped: it tells nothing
about the tests. Everything here is a pure function of the patch and the base contents of the files it
touches, and the order (then the sample a cap takes) is fixed by the patch and a seed, so every run of a
row meets the same mutants.
"""

from __future__ import annotations

import ast
import functools
import random
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import unidiff

from swerl.edit_format.patch import (
    apply_parsed_patch,
    build_git_patch,
    parse_patch,
    rebase_patch,
    split_lines,
)

OPERATORS = (
    "drop_hunk",
    "flip_comparison",
    "flip_boolean",
    "off_by_one",
    "delete_statement",
    "replace_return",
    "swallow_exception",
)

_NEGATED: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.GtE,
    ast.GtE: ast.Lt,
    ast.Gt: ast.LtE,
    ast.LtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
_SIMPLE_STATEMENTS = (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete, ast.Assert)


@dataclass(frozen=True)
class Mutant:
    """One altered fix: `patch` replaces the gold patch (it applies to the base commit); `change` is the
    difference from the gold patch's result, what a reader judges (is it still a correct fix?)."""

    operator: str
    path: str
    line: int
    """Where in the fixed file (1-based; a dropped hunk's first line)."""
    patch: str
    change: str


@dataclass(frozen=True)
class _Edit:
    """One operator's change to a fixed file: text between two (line, column) positions replaced."""

    operator: str
    start: tuple[int, int]
    end: tuple[int, int]
    text: str


def make_mutants(
    gold: str, base: Mapping[str, str], *, limit: int | None = None, seed: int = 0
) -> list[Mutant]:
    """The mutants of `gold`, a patch that applies to `base` (the base contents of the files it modifies;
    a file it creates need not be there). Hunk drops come first, then the operators' mutants; with
    `limit`, at most that many: hunk drops first, then operator mutants taken in turn from each operator
    (each operator's list shuffled by `seed`), so a small cap still sees every kind of mistake.

    A hunk whose header names other lines than its own is moved where they are, as `git apply` does
    (`rebase_patch`). Raises `PatchApplyError` when `gold` does not apply to `base`."""
    gold = rebase_patch(base, gold)
    parsed = parse_patch(gold)
    fixed = apply_parsed_patch(base, parsed)
    candidates = [*_hunk_drops(gold, base, fixed), *_operator_mutants(parsed, base, fixed)]
    found: list[Mutant] = []
    seen = {""}
    # A candidate is made (its file parsed, its diff written) only when its turn comes: under a cap, a
    # large file's hundreds of candidates cost only the few taken.
    for _, make in candidates if limit is None else _in_turn(candidates, seed):
        if limit is not None and len(found) == limit:
            break
        mutant = make()
        if mutant is not None and mutant.patch not in seen:
            seen.add(mutant.patch)
            found.append(mutant)
    return found


_Candidate = tuple[str, Callable[[], "Mutant | None"]]
"""An operator and how to make its mutant (None when it turns out to tell nothing)."""


def _in_turn(candidates: list[_Candidate], seed: int) -> Iterator[_Candidate]:
    """Hunk drops first, then the other operators' candidates in turn, each operator's shuffled by `seed`."""
    yield from (c for c in candidates if c[0] == "drop_hunk")
    rng = random.Random(seed)
    queues = []
    for operator in OPERATORS[1:]:
        mine = [c for c in candidates if c[0] == operator]
        rng.shuffle(mine)
        queues.append(mine)
    for turn in range(max(map(len, queues), default=0)):
        yield from (queue[turn] for queue in queues if turn < len(queue))


def _mutant(
    operator: str, path: str, line: int, base: Mapping[str, str], fixed: Mapping[str, str | None], text: str
) -> Mutant | None:
    """The mutant whose file `path` reads `text` (the fix's other files as the fix has them), or None
    when it equals the base or the fix, or is Python that does not parse where the fix's does, or that
    differs from the fix's only in comments, layout and docstrings (no test can tell those apart)."""
    after = fixed[path]
    changed = {**fixed, path: text}
    if path.endswith(".py") and _code(after) is not None and _code(text) is None:
        return None
    if _same_code(changed, base) or _same_code(changed, fixed):
        return None
    return Mutant(
        operator,
        path,
        line,
        build_git_patch(base, changed),
        build_git_patch({path: after or ""}, {path: text}),
    )


def _same_code(ours: Mapping[str, str | None], theirs: Mapping[str, str | None]) -> bool:
    """Whether every file of `ours` is `theirs`'s, or runs the same Python."""
    return all(
        text == theirs.get(path)
        or (path.endswith(".py") and _code(text) == _code(theirs.get(path)) is not None)
        for path, text in ours.items()
    )


@functools.lru_cache(maxsize=64)
def _code(text: str | None) -> str | None:
    """What Python runs of `text`: its syntax tree without docstrings, or None when it does not parse."""
    try:
        tree = ast.parse(text or "")
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


def _hunk_drops(gold: str, base: Mapping[str, str], fixed: Mapping[str, str | None]) -> Iterator[_Candidate]:
    """The fix with one hunk left out, for each hunk of a modified file, when the fix has more than one."""
    parsed = parse_patch(gold)
    if sum(len(patched) for patched in parsed) < 2:
        return
    for f, patched in enumerate(parsed):
        if not patched.is_modified_file:
            continue
        for h in range(len(patched)):
            without = parse_patch(gold)
            hunk = without[f][h]
            first = next((line.target_line_no for line in hunk if line.is_added), hunk.target_start)
            del without[f][h]
            text = apply_parsed_patch(base, without).get(patched.path, base[patched.path])
            if text is not None:
                yield (
                    "drop_hunk",
                    functools.partial(_mutant, "drop_hunk", patched.path, first, base, fixed, text),
                )


def _added_lines(patched: unidiff.PatchedFile) -> set[int]:
    """The fixed file's line numbers (1-based) that the patch adds."""
    return {line.target_line_no for hunk in patched for line in hunk if line.is_added}


def _operator_mutants(
    parsed: unidiff.PatchSet, base: Mapping[str, str], fixed: Mapping[str, str | None]
) -> Iterator[_Candidate]:
    """Every operator's candidates on the added lines of each Python file the fix leaves behind."""
    for patched in parsed:
        path = patched.path
        text = fixed.get(path)
        if patched.is_removed_file or not path.endswith(".py") or text is None:
            continue
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue  # code this interpreter cannot read (Python 2): hunk drops only
        added = _added_lines(patched)
        lines = split_lines(text)
        edits = sorted(_edits(tree, added), key=_edit_order)
        for edit in edits:
            yield edit.operator, functools.partial(_made, edit, path, lines, base, fixed)


def _made(
    edit: _Edit, path: str, lines: list[str], base: Mapping[str, str], fixed: Mapping[str, str | None]
) -> Mutant | None:
    """The mutant of one operator's edit (`_mutant`)."""
    return _mutant(edit.operator, path, edit.start[0], base, fixed, _splice(lines, edit))


def _edit_order(edit: _Edit) -> tuple[tuple[int, int], tuple[int, int], int, str]:
    """Edits in file order, then by operator: the order does not depend on `ast.walk`'s."""
    return edit.start, edit.end, OPERATORS.index(edit.operator), edit.text


def _within(node: ast.AST, added: set[int]) -> bool:
    """Whether every line of `node` is one the fix added (context lines are the base's, not the fix's)."""
    first, last = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
    return first is not None and last is not None and all(n in added for n in range(first, last + 1))


def _edit(operator: str, node: ast.AST, text: str) -> _Edit:
    return _Edit(operator, (node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset), text)  # type: ignore[attr-defined,arg-type]


def _edits(tree: ast.AST, added: set[int]) -> Iterator[_Edit]:
    """The operators' edits of the nodes that lie wholly on added lines. An integer in a literal
    collection is data, not a bound: it gets no off-by-one."""
    in_literal = {
        id(child)
        for node in ast.walk(tree)
        if isinstance(node, ast.List | ast.Tuple | ast.Set | ast.Dict)
        for child in ast.iter_child_nodes(node)
    }
    for node in ast.walk(tree):
        if not _within(node, added):
            continue
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _NEGATED:
            flipped = ast.Compare(node.left, [_NEGATED[type(node.ops[0])]()], node.comparators)
            yield _edit("flip_comparison", node, ast.unparse(flipped))
        elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
            yield _edit("flip_boolean", node, repr(not node.value))
        elif isinstance(node, ast.BoolOp):
            other = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            yield _edit("flip_boolean", node, f"({ast.unparse(ast.BoolOp(other, node.values))})")
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            yield _edit("flip_boolean", node, f"({ast.unparse(node.operand)})")
        elif isinstance(node, ast.Constant) and type(node.value) is int and id(node) not in in_literal:
            yield _edit("off_by_one", node, repr(node.value + 1))
        elif isinstance(node, ast.Slice):
            for bound in (node.lower, node.upper):
                if bound is not None and not isinstance(bound, ast.Constant):
                    yield _edit("off_by_one", bound, f"({ast.unparse(bound)}) + 1")
        elif isinstance(node, ast.Return) and node.value is not None:
            if not (isinstance(node.value, ast.Constant) and node.value.value is None):
                yield _edit("replace_return", node, "return None")
        elif isinstance(node, ast.Raise):
            yield _edit("swallow_exception", node, "pass")
        elif isinstance(node, _SIMPLE_STATEMENTS) and not _is_text(node):
            yield _edit("delete_statement", node, "pass")


def _is_text(node: ast.AST) -> bool:
    """A statement that is a string alone (a docstring): deleting it changes no behaviour."""
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _splice(lines: list[str], edit: _Edit) -> str:
    """The file's text with the edit made. ast's columns count UTF-8 bytes, so they are turned into
    characters on their own line."""

    def offset(line: int, column: int) -> int:
        row = lines[line - 1]
        return sum(len(x) for x in lines[: line - 1]) + len(row.encode("utf-8")[:column].decode("utf-8"))

    text = "".join(lines)
    return text[: offset(*edit.start)] + edit.text + text[offset(*edit.end) :]
