"""Skeletons of Python files: classes, signatures and module-level code, with function bodies elided.

A skeleton lets a model see many files' structure for the price of one file's text. The elements are
the units element localization names (functions, methods, classes) together with the line spans that
edit locations are built from. Parsing is `ast`; a file that does not parse has no elements and its
skeleton is its first lines, since it is still worth showing.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Literal

ElementKind = Literal["class", "function", "method"]
ELISION = "..."


@dataclass(frozen=True)
class Element:
    """A function, method or class: qualified name (`Class.method`), 1-based inclusive line span."""

    kind: ElementKind
    name: str
    start: int
    end: int

    @property
    def short_name(self) -> str:
        return self.name.rsplit(".", 1)[-1]


_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _start(node: ast.AST) -> int:
    decorators = getattr(node, "decorator_list", [])
    return min([node.lineno, *(d.lineno for d in decorators)])  # type: ignore[attr-defined]


def elements_of(source: str) -> list[Element]:
    """Top-level functions, classes (nested ones too) and methods, in source order.

    Functions nested inside functions are part of their parent: they cannot be named from outside, and
    an edit to them is an edit to the parent.
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    found: list[Element] = []

    def visit(body: list[ast.stmt], prefix: str, in_class: bool) -> None:
        for node in body:
            if isinstance(node, _FUNCS):
                kind: ElementKind = "method" if in_class else "function"
                found.append(Element(kind, prefix + node.name, _start(node), node.end_lineno or node.lineno))
            elif isinstance(node, ast.ClassDef):
                found.append(
                    Element("class", prefix + node.name, _start(node), node.end_lineno or node.lineno)
                )
                visit(node.body, f"{prefix}{node.name}.", True)

    visit(tree.body, "", False)
    return found


def _elided_ranges(tree: ast.Module, lines: list[str]) -> list[tuple[int, int, int]]:
    """(first, last, indent column) of every function body to hide; nested functions are inside them.

    A body that shares its line with the signature (`def f(): return 1`) stays: it is one line anyway.
    """
    ranges: list[tuple[int, int, int]] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, _FUNCS):
                first = node.body[0]
                if not lines[first.lineno - 1][: first.col_offset].strip():
                    ranges.append((first.lineno, node.end_lineno or first.lineno, first.col_offset))
            elif isinstance(node, ast.ClassDef):
                visit(node.body)
            elif isinstance(node, ast.If | ast.Try | ast.With):
                # Module-level `if TYPE_CHECKING:` / `try: import x` blocks may hold definitions too.
                for child in ("body", "orelse", "finalbody"):
                    visit(getattr(node, child, []) or [])

    visit(tree.body)
    return ranges


def skeleton(source: str, *, max_lines_unparsable: int = 40) -> str:
    """The file with every function body replaced by one `...` line at the body's indentation."""
    lines = source.split("\n")  # as ast counts lines; splitlines() also breaks at \f and \x1c
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return "\n".join(lines[:max_lines_unparsable])
    out: list[str] = []
    ranges = sorted(_elided_ranges(tree, lines))
    cursor = 1
    for first, last, indent in ranges:
        if first < cursor:
            continue
        out.extend(lines[cursor - 1 : first - 1])
        out.append(" " * indent + ELISION)
        cursor = last + 1
    out.extend(lines[cursor - 1 :])
    return "\n".join(out)
