"""Run untrusted, model-written programs without letting them touch the machine, the data or the run.

RLEF executes thousands of generated programs per training step. Each one runs inside bubblewrap (no network,
read-only system, private temp dir, private pid namespace) under resource limits, and comes back as a
structured `TestResult`. Each worker slot keeps one bubblewrap alive and forks a fresh, re-isolated child
per test (persistent.py), so isolation costs little more than starting the interpreter. See
docs/sandbox.md for the design and the threat model.
"""

from swerl.sandbox.bwrap import SandboxConfig, SandboxUnavailable
from swerl.sandbox.limits import Limits
from swerl.sandbox.persistent import shutdown
from swerl.sandbox.pool import Job, TestCase, run_batch, run_tests
from swerl.sandbox.runner import Execution, execute_source
from swerl.sandbox.verdict import TestResult, Verdict

__all__ = [
    "Execution",
    "Job",
    "Limits",
    "SandboxConfig",
    "SandboxUnavailable",
    "TestCase",
    "TestResult",
    "Verdict",
    "execute_source",
    "run_batch",
    "run_tests",
    "shutdown",
]
