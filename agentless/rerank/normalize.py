"""Normalized patches: what a patch does to the code, with layout, comments and docstrings forgotten.

Two samples that make the same fix rarely write it identically (a comment, quotes, spacing, a reworded
docstring). For voting they must count as one. So each changed file's new content is parsed, its
docstrings dropped, and re-emitted with `ast.unparse` (comments vanish in the parse); the key is the
set of (path, normalized content) pairs whose normalized content differs from the normalized original.
A patch that only touches comments or docstrings normalizes to nothing and gets no key.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping

NormalizedKey = tuple[tuple[str, str], ...]


class _DropDocstrings(ast.NodeTransformer):
    """Remove the leading string expression of modules, classes and functions (keeping bodies valid)."""

    def _strip(self, node: ast.AST) -> ast.AST:
        self.generic_visit(node)
        body = getattr(node, "body", None)
        if (
            body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            body.pop(0)
            if not body and not isinstance(node, ast.Module):
                body.append(ast.Pass())
        return node

    visit_Module = _strip
    visit_ClassDef = _strip
    visit_FunctionDef = _strip
    visit_AsyncFunctionDef = _strip


def normalize_source(text: str, path: str = "x.py") -> str:
    """Canonical text of a Python file (no comments, no docstrings, one layout); other files and files
    that don't parse are compared with trailing whitespace and blank lines removed."""
    if path.endswith(".py"):
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            pass
        else:
            return ast.unparse(_DropDocstrings().visit(tree))
    return "\n".join(line.rstrip() for line in text.splitlines() if line.strip())


def normalized_key(old: Mapping[str, str | None], new: Mapping[str, str | None]) -> NormalizedKey | None:
    """The key of a change from `old` to `new` contents (None content = absent file), or None when the
    change is only cosmetic."""
    parts = []
    for path in sorted(new):
        before, after = old.get(path), new[path]
        norm_after = "\0deleted" if after is None else normalize_source(after, path)
        norm_before = "\0absent" if before is None else normalize_source(before, path)
        if norm_after != norm_before:
            parts.append((path, norm_after))
    return tuple(parts) or None
