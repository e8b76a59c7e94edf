"""Reproduction tests: pytest files the model writes from the issue, kept only if they fail at the base.

A test that already passes before any fix tells candidates apart no better than no test at all, so the
reranker (`agentless.rerank.select`) runs them on the unpatched code first. Several are sampled: one
test can be wrong in either direction, and candidates are ranked by how many kept tests they pass.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence

_PROMPT = """\
Below is an issue reported on a software repository, and code that is likely involved.

<issue>
{issue}
</issue>

{files}

Write a pytest test file that reproduces the issue: its tests must fail on the code as it is now and \
pass once the issue is fixed. Import what you need from the repository's packages; the file will be \
placed at the repository root. Reply with the file's full content in a single ```python block."""


def reproduction_messages(issue: str, context: Mapping[str, str]) -> list[dict[str, str]]:
    files = "\n\n".join(f"### {path}\n```python\n{text}```" for path, text in context.items())
    return [{"role": "user", "content": _PROMPT.format(issue=issue.strip(), files=files)}]


_BLOCK = re.compile(r"```(?:python|py)?[^\n]*\n(.*?)```", re.DOTALL)


def parse_reproduction(text: str) -> str | None:
    """The first code block that parses and defines a test function, or None."""
    for block in _BLOCK.findall(text):
        try:
            tree = ast.parse(block)
        except (SyntaxError, ValueError):
            continue
        has_test = any(
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")
            for node in ast.walk(tree)
        )
        if has_test:
            return block if block.endswith("\n") else block + "\n"
    return None


def parse_reproductions(texts: Sequence[str]) -> list[str]:
    """The distinct test files among the model's answers, in order (a repeated test would vote twice)."""
    found = [parse_reproduction(text) for text in texts]
    return list(dict.fromkeys(t for t in found if t is not None))
