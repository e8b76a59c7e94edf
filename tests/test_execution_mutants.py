"""Mutants of a gold patch (`swerl.execution.mutants`): each operator makes the careless fix it names, only
on the lines the fix adds, and a mutant that cannot tell a weak test from a strong one is dropped."""

from __future__ import annotations

import ast

import pytest

from swerl.edit_format import apply_patch_to_contents, build_git_patch
from swerl.edit_format.patch import PatchApplyError, rebase_patch
from swerl.execution.mutants import OPERATORS, make_mutants

BASE = '''"""Ranges."""


def clamp(x, lo, hi):
    return x


def head(items, n):
    return items


LIMIT = [1, 2, 3]
'''
FIXED = '''"""Ranges."""


def clamp(x, lo, hi):
    if lo > hi:
        raise ValueError("empty range")
    return max(lo, min(x, hi))


def head(items, n):
    # the first n, keeping the order
    found = not items
    return items[:n] if n >= 0 and found is False else []


LIMIT = [1, 2, 3]
'''


def _mutants(base: str = BASE, fixed: str = FIXED, **kwargs: object) -> list:
    gold = build_git_patch({"r.py": base}, {"r.py": fixed})
    return make_mutants(gold, {"r.py": base}, **kwargs)  # type: ignore[arg-type]


def _changed_line(mutant) -> tuple[str, str]:
    """(the fix's line, the mutant's line) of a mutant that changes one line."""
    minus = [
        line[1:] for line in mutant.change.splitlines() if line.startswith("-") and not line.startswith("---")
    ]
    plus = [
        line[1:] for line in mutant.change.splitlines() if line.startswith("+") and not line.startswith("+++")
    ]
    return "\n".join(minus).strip(), "\n".join(plus).strip()


def test_every_operator_makes_the_mistake_it_names() -> None:
    made = {(m.operator, *_changed_line(m)) for m in _mutants()}
    assert ("drop_hunk", "", "") not in made
    expected = {
        ("flip_comparison", "if lo > hi:", "if lo <= hi:"),
        ("swallow_exception", 'raise ValueError("empty range")', "pass"),
        ("replace_return", "return max(lo, min(x, hi))", "return None"),
        ("flip_boolean", "found = not items", "found = (items)"),
        ("delete_statement", "found = not items", "pass"),
        (
            "off_by_one",
            "return items[:n] if n >= 0 and found is False else []",
            "return items[:(n) + 1] if n >= 0 and found is False else []",
        ),
        (
            "off_by_one",
            "return items[:n] if n >= 0 and found is False else []",
            "return items[:n] if n >= 1 and found is False else []",
        ),
        (
            "flip_boolean",
            "return items[:n] if n >= 0 and found is False else []",
            "return items[:n] if (n >= 0 or found is False) else []",
        ),
        (
            "flip_boolean",
            "return items[:n] if n >= 0 and found is False else []",
            "return items[:n] if n >= 0 and found is True else []",
        ),
        (
            "flip_comparison",
            "return items[:n] if n >= 0 and found is False else []",
            "return items[:n] if n < 0 and found is False else []",
        ),
    }
    assert expected <= made
    assert {m.operator for m in _mutants()} == set(OPERATORS) - {"drop_hunk"}  # one hunk: nothing to drop


def test_a_mutant_applies_to_the_base_and_changes_only_the_fix() -> None:
    for mutant in _mutants():
        after = apply_patch_to_contents({"r.py": BASE}, mutant.patch)["r.py"]
        assert after != FIXED and after != BASE
        ast.parse(after)
        # Lines the base already had are never mutated: `LIMIT = [1, 2, 3]` and the docstring stay.
        assert "LIMIT = [1, 2, 3]\n" in after and after.startswith('"""Ranges."""')


def test_each_hunk_left_out_alone() -> None:
    base = (
        BASE
        + "\n\ndef tail(items):\n    return items\n"
        + "\n" * 8
        + "\ndef last(items):\n    return items\n"
    )
    fixed = base.replace("    return items\n\n\nLIMIT", "    return items[:n]\n\n\nLIMIT")
    fixed = fixed.replace("def last(items):\n    return items", "def last(items):\n    return items[-1:]")
    drops = [m for m in _mutants(base, fixed) if m.operator == "drop_hunk"]
    assert [(m.line, _changed_line(m)) for m in drops] == [
        (9, ("return items[:n]", "return items")),
        (27, ("return items[-1:]", "return items")),
    ]


def test_mutants_that_tell_nothing_are_dropped() -> None:
    # A hunk of comments only: leaving it out runs the fix's code; leaving out the other runs the base's.
    # A docstring is not a statement to delete.
    base = "def f(x):\n    return x\n" + "\n" * 10 + "def g(x):\n    return x\n"
    fixed = base.replace("def f(x):\n", "def f(x):\n    # why\n").replace(
        "def g(x):\n    return x", 'def g(x):\n    """Doc."""\n    return x + 1'
    )
    made = _mutants(base, fixed)
    assert [(m.operator, m.line) for m in made] == [("replace_return", 16), ("off_by_one", 16)]
    # Nothing equals the base, however the fix is mutated: a fix of one deleted line has no mutant.
    assert _mutants(base, base.replace("def g(x):\n    return x\n", "")) == []


def test_strings_and_literal_data_are_left_alone() -> None:
    fixed = BASE.replace("    return x\n", '    return "a < b and True"\n').replace(
        "LIMIT = [1, 2, 3]", "LIMIT = [1, 2, 4]"
    )
    # No comparison, boolean or bound in the string; no off-by-one in the list (the line is deleted whole).
    made = [(m.operator, m.line) for m in _mutants(BASE, fixed)]
    assert made == [("replace_return", 5), ("delete_statement", 12)]


def test_columns_are_characters_not_bytes() -> None:
    fixed = BASE.replace("    return x\n", '    return "héllo" if x > 0 else x\n')
    flipped = [m for m in _mutants(BASE, fixed) if m.operator == "flip_comparison"]
    assert _changed_line(flipped[0])[1] == 'return "héllo" if x <= 0 else x'


def test_a_cap_takes_every_kind_first_and_always_the_same() -> None:
    every = _mutants()
    capped = _mutants(limit=5, seed=3)
    assert len({m.operator for m in capped}) == 5 and set(capped) <= set(every)
    assert capped == _mutants(limit=5, seed=3)
    assert set(_mutants(limit=100)) == set(every)  # the same mutants, in the cap's order
    assert [m.operator for m in _mutants(limit=2, seed=3)] == [m.operator for m in capped[:2]]


def test_python_two_and_data_files_get_hunk_drops_only() -> None:
    base = {"old.py": "print 'a'\n" + "\n" * 8 + "x = 1\n", "setup.cfg": "[a]\nb = 1\n"}
    fixed = {"old.py": "print 'b'\n" + "\n" * 8 + "x = 2\n", "setup.cfg": "[a]\nb = 2\n"}
    gold = build_git_patch(base, fixed)
    made = make_mutants(gold, base)
    assert [(m.operator, m.path) for m in made] == [
        ("drop_hunk", "old.py"),
        ("drop_hunk", "old.py"),
        ("drop_hunk", "setup.cfg"),
    ]


def test_a_gold_patch_that_does_not_fit_is_an_error() -> None:
    gold = build_git_patch({"r.py": BASE}, {"r.py": FIXED})
    with pytest.raises(PatchApplyError):
        make_mutants(gold, {"r.py": "other\n"})


def test_a_gold_patch_at_an_offset_is_moved_where_its_lines_are() -> None:
    # As SWE-bench's published patches can be: made against a tree with a few more lines above.
    gold = build_git_patch({"r.py": "\n\n\n" + BASE}, {"r.py": "\n\n\n" + FIXED})
    moved = rebase_patch({"r.py": BASE}, gold)
    assert "@@ -5," in gold and moved == build_git_patch({"r.py": BASE}, {"r.py": FIXED})  # "@@ -2,"
    assert rebase_patch({"r.py": BASE}, moved) == moved
    assert [m.patch for m in make_mutants(gold, {"r.py": BASE})] == [m.patch for m in _mutants()]
