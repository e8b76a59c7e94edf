"""Execution backends: run a repository's tests at an instance's base commit with patches applied.

`local` exports the commit, applies patches with `git apply`, and runs pytest from a virtualenv inside
bubblewrap when it can. `docker` runs the same request in the official SWE-bench instance images. Both
return a `TestRun`; reranking never cares which one ran.
"""

from agentless.execution.base import ExecutionBackend, TestRun, parse_pytest_report

__all__ = ["ExecutionBackend", "TestRun", "parse_pytest_report"]
