"""A small, real SWE-bench-style task built offline: a git repository with a bug, an issue, tests, gold.

Tests, the docs' example and the offline benchmark need instances that go through the same code paths
as SWE-bench ones (a clone directory, a base commit, a gold patch, FAIL_TO_PASS tests) without network.
The package is stdlib-only and tested with pytest, so the local backend's fast path runs it.
"""

from __future__ import annotations

import json
from pathlib import Path

from swerl.edit_format import build_git_patch
from swerl.execution.instances import Instance, instance_to_row
from swerl.synth_repo import git, init_repo

DEMO_REPO = "demo-org/calc"

_FILES = {
    "README.md": "# calc\n\nSmall numeric helpers.\n",
    "calc/__init__.py": (
        '"""Numeric helpers."""\n\nfrom calc.stats import mean, median\n\n__all__ = ["mean", "median"]\n'
    ),
    "calc/stats.py": '''\
"""Summary statistics over sequences of numbers."""

from __future__ import annotations

from collections.abc import Sequence


def _check(values: Sequence[float]) -> None:
    if not values:
        raise ValueError("need at least one value")


def mean(values: Sequence[float]) -> float:
    """Arithmetic mean."""
    _check(values)
    total = 0.0
    for value in values:
        total += value
    return total / (len(values) - 1)


def median(values: Sequence[float]) -> float:
    """Middle value (mean of the two middle values for an even count)."""
    _check(values)
    ordered = sorted(values)
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[mid]
    return (ordered[mid - 1] + ordered[mid]) / 2
''',
    "calc/text.py": '''\
"""Formatting numbers for people."""


def format_number(value: float, digits: int = 2) -> str:
    """Fixed-point text with `digits` decimals."""
    return f"{value:.{digits}f}"


def parse_number(text: str) -> float:
    """Inverse of format_number, tolerant of surrounding spaces."""
    return float(text.strip())
''',
    "tests/__init__.py": "",
    "tests/test_stats.py": """\
import pytest

from calc.stats import median


def test_median_odd():
    assert median([3, 1, 2]) == 2


def test_median_even():
    assert median([4, 1, 3, 2]) == 2.5


def test_empty():
    with pytest.raises(ValueError):
        median([])
""",
    "tests/test_text.py": """\
from calc.text import format_number, parse_number


def test_roundtrip():
    assert parse_number(format_number(1.5)) == 1.5
""",
}

ISSUE = """\
mean() returns the wrong value

`calc.stats.mean([2, 4])` returns 6.0 instead of 3.0. It looks like the sum is divided by one less \
than the number of values.

```
>>> from calc.stats import mean
>>> mean([2, 4])
6.0
```
"""

_TEST_MEAN = """\
from calc.stats import mean


def test_mean_two_values():
    assert mean([2, 4]) == 3.0


def test_mean_single():
    assert mean([5]) == 5.0
"""
_BUGGY_LINE = "    return total / (len(values) - 1)\n"
_FIXED_LINE = "    return total / len(values)\n"
GOLD_PATCH = build_git_patch(
    {"calc/stats.py": _FILES["calc/stats.py"]},
    {"calc/stats.py": _FILES["calc/stats.py"].replace(_BUGGY_LINE, _FIXED_LINE)},
)
TEST_PATCH = build_git_patch({}, {"tests/test_mean.py": _TEST_MEAN})

GOLD_ANSWER = """\
<think>
mean divides by len(values) - 1; the arithmetic mean divides by len(values).
</think>
<solution>
```python
### calc/stats.py
<<<<<<< SEARCH
    return total / (len(values) - 1)
=======
    return total / len(values)
>>>>>>> REPLACE
```
</solution>"""
"""A correct answer in the SWE-RL format (what a scripted engine returns in tests and the docs)."""


def build_demo(root: str | Path) -> tuple[Instance, Path]:
    """Create `root/clones/demo-org__calc` (a git repo at the buggy commit) and `root/instances.jsonl`.

    Returns the instance and the clones directory (pass it as the repository cache's mirror_dir).
    """
    root = Path(root)
    clones = root / "clones"
    repo = clones / DEMO_REPO.replace("/", "__")
    if (repo / ".git").is_dir():  # a second demo into the same folder keeps the first one's commit
        base = git(repo, "rev-parse", "HEAD").strip()
    else:
        base = init_repo(repo, _FILES, "calc: mean, median and formatting")
    instance = Instance(
        instance_id="demo-org__calc-1",
        repo=DEMO_REPO,
        base_commit=base,
        problem_statement=ISSUE,
        patch=GOLD_PATCH,
        test_patch=TEST_PATCH,
        fail_to_pass=("tests/test_mean.py::test_mean_two_values", "tests/test_mean.py::test_mean_single"),
        pass_to_pass=(
            "tests/test_stats.py::test_median_odd",
            "tests/test_stats.py::test_median_even",
            "tests/test_stats.py::test_empty",
            "tests/test_text.py::test_roundtrip",
        ),
        version="1.0",
    )
    with (root / "instances.jsonl").open("w", encoding="utf-8") as f:
        f.write(json.dumps(instance_to_row(instance)) + "\n")
    return instance, clones
