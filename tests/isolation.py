"""The sandbox tests' one rule about bubblewrap: where isolation is missing they are skipped loudly, and
in CI (`CI=true`) they fail instead, so a CI run can never pass without having run them isolated."""

from __future__ import annotations

import os

import pytest

from swerl.sandbox.bwrap import isolation_available


def require_isolation() -> None:
    """Skip (fail in CI) the calling test when bubblewrap cannot isolate a program here."""
    problem = isolation_available()
    if problem:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the sandbox tests isolated: {problem}")
        pytest.skip(f"!!! SANDBOX ISOLATION TESTS SKIPPED: {problem} !!!")
