"""Name → function tables for advantage estimators and policy losses.

Configs name an algorithm by a string (`advantage: grpo`, `policy_loss: ppo_clip`). The trainer looks
the function up here instead of branching on strings, so a new estimator is one decorated function and
the trainer loop does not change. The tables hold plain functions; their signatures differ by estimator
(GRPO needs a group size, GAE needs values), which the caller knows because it chose the name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

ADVANTAGE_ESTIMATORS: dict[str, Callable[..., Any]] = {}
POLICY_LOSSES: dict[str, Callable[..., Any]] = {}


def _register(table: dict[str, Callable[..., Any]], kind: str, name: str) -> Callable[[F], F]:
    def decorator(fn: F) -> F:
        if name in table and table[name] is not fn:
            raise ValueError(f"{kind} {name!r} is already registered to {table[name].__qualname__}")
        table[name] = fn
        return fn

    return decorator


def register_advantage(name: str) -> Callable[[F], F]:
    """Register an advantage estimator under `name` (a duplicate name is an error, not an override)."""
    return _register(ADVANTAGE_ESTIMATORS, "advantage estimator", name)


def register_policy_loss(name: str) -> Callable[[F], F]:
    """Register a policy loss under `name` (a duplicate name is an error, not an override)."""
    return _register(POLICY_LOSSES, "policy loss", name)


def _get(table: dict[str, Callable[..., Any]], kind: str, name: str) -> Callable[..., Any]:
    try:
        return table[name]
    except KeyError:
        raise KeyError(f"unknown {kind} {name!r}; known: {sorted(table)}") from None


def get_advantage_estimator(name: str) -> Callable[..., Any]:
    """The estimator registered as `name`; the error lists the known names so a config typo is obvious."""
    return _get(ADVANTAGE_ESTIMATORS, "advantage estimator", name)


def get_policy_loss(name: str) -> Callable[..., Any]:
    """The policy loss registered as `name`; the error lists the known names."""
    return _get(POLICY_LOSSES, "policy loss", name)
