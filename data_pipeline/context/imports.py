"""Which files of a Python repository import which: the strongest "relevant file" signal we have.

Imports are read with a regular expression, not by running or even compiling the code (the repository is
untrusted and may not parse under our Python). Module names are resolved against the repository's own
files, so `import requests.utils` in `src/requests/sessions.py` finds `src/requests/utils.py`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from pathlib import PurePosixPath

_IMPORT = re.compile(r"^[ \t]*import[ \t]+([\w. \t,]+)", re.MULTILINE)
_FROM = re.compile(r"^[ \t]*from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+\(?([\w. \t,]+)", re.MULTILINE)


@lru_cache(maxsize=65_536)
def module_names(path: str) -> tuple[str, ...]:
    """Every dotted name a file can be imported as (`a/b/c.py` -> a.b.c, b.c, c), longest first.
    Memoised: the module index of every PR's base commit names the same paths again."""
    pure = PurePosixPath(path)
    parts = list(pure.with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return tuple(".".join(parts[i:]) for i in range(len(parts)))


def imported_modules(path: str, text: str) -> set[str]:
    """Absolute dotted names a Python file imports, relative imports resolved against its package.

    `from x import y` yields both `x` and `x.y`, because y may be a submodule; names that are not files
    of the repository simply resolve to nothing later.
    """
    names: set[str] = set()
    for match in _IMPORT.finditer(text):
        for item in match.group(1).split(","):
            name = item.strip().split()[0] if item.strip() else ""
            if name:
                names.add(name)
    package = list(PurePosixPath(path).parent.parts)
    for match in _FROM.finditer(text):
        dots, module, imported = match.group(1), match.group(2), match.group(3)
        if dots:
            up = len(dots) - 1
            if up > len(package):
                continue
            base = package[: len(package) - up] if up else package
            module = ".".join([*base, module] if module else base)
        if not module:
            continue
        names.add(module)
        for item in imported.split(","):
            name = item.strip().split()[0] if item.strip() else ""
            if name and name != "*":
                names.add(f"{module}.{name}")
    return names


class ModuleIndex:
    """Dotted module name -> repository paths, for the Python files of one commit.

    Kept up to date a file at a time (`add`, `remove`): the context stage holds one per pool, which
    changes by a few files from one PR to the next, where building it afresh over thousands of paths per
    PR was a quarter of the context stage's time on a large real repository (ansible/ansible)."""

    def __init__(self, paths: Iterable[str] = ()) -> None:
        self._by_name: dict[str, set[str]] = {}
        for path in paths:
            self.add(path)

    def add(self, path: str) -> None:
        if path.endswith(".py"):
            for name in module_names(path):
                self._by_name.setdefault(name, set()).add(path)

    def remove(self, path: str) -> None:
        if path.endswith(".py"):
            for name in module_names(path):
                paths = self._by_name.get(name)
                if paths is not None:
                    paths.discard(path)
                    if not paths:
                        del self._by_name[name]

    def resolve(self, names: Iterable[str], also: Iterable[str] = ()) -> set[str]:
        """The files that the names can refer to, among the index's paths and the paths `also` (as if
        they were added). An ambiguous short name resolves to all its files only when it is the longest
        match available (so `utils` alone does not pull in every utils.py)."""
        extra = ModuleIndex(also)._by_name
        found: set[str] = set()
        for name in names:
            paths = self._by_name.get(name, set())
            if name in extra:
                paths = paths | extra[name]
            if len(paths) == 1 or (paths and "." in name):
                found.update(paths)
        return found
