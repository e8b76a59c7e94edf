"""Reproduction tests: a pytest file the model writes from the issue, kept only if it fails at the base.

A test that already passes before any fix tells candidates apart no better than no test at all, so
`check_reproduction` runs it on the unpatched code first. Candidates are later preferred when the kept
test passes with their patch applied.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping

REPRODUCTION_PATH = "test_swerl_reproduction.py"

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
