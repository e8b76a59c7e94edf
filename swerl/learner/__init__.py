"""The learner: everything that owns trainable weights, so that trainer loops don't.

`Learner` wraps the policy, a client torch optimizer, the LR schedule and (optionally) a DeepSpeed
engine behind one small API (`forward`, `backward`, `step`); `checkpoint` saves and restores all of it
for an exact resume; `metrics` writes what a run did to JSONL and TensorBoard.
"""

from swerl.learner.checkpoint import latest_checkpoint, load_rng_state, rng_state
from swerl.learner.config import LearnerConfig
from swerl.learner.dist import DistInfo, init_distributed
from swerl.learner.learner import Learner
from swerl.learner.metrics import MetricsLogger, read_metrics

__all__ = [
    "DistInfo",
    "Learner",
    "LearnerConfig",
    "MetricsLogger",
    "init_distributed",
    "latest_checkpoint",
    "load_rng_state",
    "read_metrics",
    "rng_state",
]
