"""Rollout engines behind one token-in/token-out interface (`RolloutEngine`).

`HFEngine` (transformers, CPU/GPU, colocated with the policy), `VLLMEngine` (vLLM in-process with sleep
mode; optional extra, CUDA only) and `OpenAIEngine` (any OpenAI-compatible server such as `vllm serve`).
Heavy engines are imported from their modules, so `import swerl.rollout` never needs vLLM.
"""

from swerl.algorithms.diagnostics import logprob_mismatch
from swerl.rollout.base import Completion, FinishReason, RolloutEngine, SamplingParams
from swerl.rollout.hf import HFEngine

__all__ = [
    "Completion",
    "FinishReason",
    "HFEngine",
    "RolloutEngine",
    "SamplingParams",
    "logprob_mismatch",
]
