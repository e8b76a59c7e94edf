"""Execution backends: run a repository's tests at an instance's base commit with patches applied.

`local` checks out a fresh tree per run, applies patches with the SWE-bench harness's commands, and runs
the tests in the instance's environment inside bubblewrap; it also judges predictions as the harness does
(`LocalBackend.evaluate`, rules from `harness.py`). `docker` runs the same request in the official
SWE-bench instance images. Both return a `TestRun`; reranking never cares which one ran.
"""

from swerl.execution.base import ExecutionBackend, TestRun, parse_pytest_report

__all__ = ["ExecutionBackend", "TestRun", "parse_pytest_report"]
