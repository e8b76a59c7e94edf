"""The optional model filter of regression tests, as Agentless has one.

Tests that pass at the base commit are expected to keep passing, but a few check the very behaviour the
issue asks to change (they assert the old, wrong output); a correct fix breaks them, and the regression
filter would then prefer a patch that fixes nothing. The model reads the issue and the passing tests and
names the ones a fix may rightly break; they are left out of the filter.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_PROMPT = """\
Below is an issue reported on a software repository, and tests of the repository that pass on its \
current code.

<issue>
{issue}
</issue>

<tests>
{tests}
</tests>

A fix for the issue will change some behaviour. Which of these tests check behaviour that a correct fix \
may change, so that they could rightly fail after it? Name only those, one per line, exactly as listed, \
inside a single ``` block; leave the block empty if none."""

MAX_TESTS = 200
"""The prompt lists at most this many tests (the first ones; the rest are kept as they are)."""

_BLOCK = re.compile(r"```[^\n]*\n(.*?)```", re.DOTALL)


def regression_filter_messages(issue: str, tests: Sequence[str]) -> list[dict[str, str]]:
    listing = "\n".join(tests[:MAX_TESTS])
    return [{"role": "user", "content": _PROMPT.format(issue=issue.strip(), tests=listing)}]


def parse_excluded_tests(text: str, tests: Sequence[str]) -> list[str]:
    """The listed tests the answer names, in the listing's order. Only exact names count, so a model
    cannot drop tests it made up or misspelled; no code block means nothing is dropped."""
    blocks = _BLOCK.findall(text)
    if not blocks:
        return []
    named = {line.strip().strip("`-* ") for block in blocks for line in block.splitlines()}
    return [t for t in tests if t in named]
