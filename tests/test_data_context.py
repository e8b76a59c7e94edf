"""Facts of a new file version derived from the previous version's (term counts, length, imports, token
estimate) equal the facts of a full scan, for any edit, including lines that repeat, imports, non-ASCII
text and whitespace runs."""

from __future__ import annotations

import inspect
import random
from pathlib import Path

import pytest

from data_pipeline import context as context_module
from data_pipeline.config import ContextConfig, FilterConfig
from data_pipeline.context import ContextBuilder, VersionStore
from data_pipeline.tokens import estimate_tokens


class _Reader:
    git_dir = Path("/nowhere/repo.git")


def _builder(store: VersionStore) -> ContextBuilder:
    return ContextBuilder(_Reader(), ContextConfig(), FilterConfig(), estimate_tokens, versions=store)  # type: ignore[arg-type]


def _scan(path: str, text: str) -> context_module.BlobFacts:
    return ContextBuilder._scan_facts(path, text, estimate_tokens(text))


_EXTRA_LINES = [
    "import os, sys",
    "from .sibling import helper as h",
    "    from ..pkg import (a, b)",
    "x = parseDate(some_value)  # déjà vu",
    "\t\t  spaced\t out   ",
    "",
    "return None",
    "    def camelCaseName(self, HTTPServer): pass",
]


def _edit(lines: list[str], rng: random.Random) -> list[str]:
    out = list(lines)
    for _ in range(rng.randint(1, 6)):
        op = rng.random()
        at = rng.randrange(len(out) + 1)
        if op < 0.4 or not out:
            out.insert(at, rng.choice(_EXTRA_LINES + out[:50]))
        elif op < 0.7:
            del out[min(at, len(out) - 1)]
        else:
            out[min(at, len(out) - 1)] = rng.choice(_EXTRA_LINES)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_derived_facts_equal_a_full_scan(seed):
    rng = random.Random(seed)
    text = inspect.getsource(context_module)
    path = "pkg/sub/module.py"
    store = VersionStore(1 << 30)
    builder = _builder(store)
    lines = text.split("\n")
    derived = 0
    for step in range(25):
        lines = _edit(lines, rng)
        version = "\n".join(lines)
        known = store.get((str(_Reader.git_dir), path))
        facts = builder._compute_facts(path, f"v{step}", version.encode())
        expected = _scan(path, version)
        assert facts == expected
        assert all(n > 0 for n in facts.terms.values())
        derived += known is not None
    assert derived == 24


def test_a_rewritten_file_is_scanned_and_the_store_is_bounded():
    store = VersionStore(100)
    builder = _builder(store)
    for i in range(5):
        text = f"import mod{i}\nvalue_{i} = {i}\n" * 3
        assert builder._compute_facts(f"f{i}.py", "sha", text.encode()) == _scan(f"f{i}.py", text)
    other = "totally = different\n"
    assert builder._compute_facts("f4.py", "sha", other.encode()) == _scan("f4.py", other)
    assert sum(size for *_, size in store._items.values()) <= 100
    assert [path for _, path in store._items][-1] == "f4.py"  # the most recent versions are kept
