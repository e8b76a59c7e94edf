"""Trainer loops: GRPO (`grpo`) and the SFT baseline (`sft`), configured by dataclasses (`config`).

Each loop wires the learner, a rollout engine, the reward and the algorithms together and reads top to
bottom; the pieces it calls live in their own modules.
"""
