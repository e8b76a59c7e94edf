"""The learner: everything that owns trainable weights, so that trainer loops don't.

`Learner` wraps the policy, a client torch optimizer, the LR schedule and (optionally) a DeepSpeed
engine behind one small API (`forward`, `backward`, `step`); `checkpoint` saves and restores all of it
for an exact resume; `metrics` writes what a run did to JSONL and TensorBoard.

The names below load on first use (PEP 562): importing `swerl.learner.config` or
`swerl.learner.layout` must not pull in torch, or every command that only reads a config would pay for it.
"""

from __future__ import annotations

from swerl._lazy import lazy_exports

_EXPORTS = {
    "DistInfo": "swerl.learner.dist",
    "init_distributed": "swerl.learner.dist",
    "Learner": "swerl.learner.learner",
    "LearnerConfig": "swerl.learner.config",
    "MetricsLogger": "swerl.learner.metrics",
    "read_metrics": "swerl.learner.metrics",
    "latest_checkpoint": "swerl.learner.layout",
    "load_rng_state": "swerl.learner.checkpoint",
    "rng_state": "swerl.learner.checkpoint",
}

__all__ = sorted(_EXPORTS)


__getattr__ = lazy_exports(__name__, _EXPORTS)
