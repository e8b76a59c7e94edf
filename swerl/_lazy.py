"""Names a package re-exports, loaded on first use (PEP 562).

Why: a package `__init__` that imports its submodules makes every light import of one of them (a config
dataclass, a path helper) pay for the heavy rest (torch, the sandbox pool), and every `swerl` command
imports some. `swerl.learner` and `swerl.sandbox` keep their short public names this way.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], Any]:
    """The module `__getattr__` of `package`: `exports` maps each name to the module that defines it."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__
