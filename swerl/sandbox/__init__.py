"""Run untrusted, model-written programs without letting them touch the machine, the data or the run.

RLEF executes thousands of generated programs per training step. Each one runs inside bubblewrap (no network,
read-only system, private temp dir, private pid namespace) under resource limits, and comes back as a
structured `TestResult`. Each worker slot keeps one bubblewrap alive and forks a fresh, re-isolated child
per test (persistent.py), so isolation costs little more than starting the interpreter. See
docs/sandbox.md for the design and the threat model.
"""

from __future__ import annotations

from swerl._lazy import lazy_exports

# Loaded on first use (PEP 562): `swerl sandbox --help` and the modules that need one piece (bwrap's
# protections, the limits) should not pay for the pool and the runner.
_EXPORTS = {
    "Execution": "swerl.sandbox.runner",
    "Job": "swerl.sandbox.pool",
    "Limits": "swerl.sandbox.limits",
    "SandboxConfig": "swerl.sandbox.bwrap",
    "SandboxUnavailable": "swerl.sandbox.bwrap",
    "TestCase": "swerl.sandbox.pool",
    "TestResult": "swerl.sandbox.verdict",
    "Verdict": "swerl.sandbox.verdict",
    "execute_source": "swerl.sandbox.runner",
    "run_batch": "swerl.sandbox.pool",
    "run_tests": "swerl.sandbox.pool",
    "shutdown": "swerl.sandbox.persistent",
}

__all__ = sorted(_EXPORTS)


__getattr__ = lazy_exports(__name__, _EXPORTS)
