"""Agentless-style SWE-bench solving (localize -> repair -> rerank) with any swerl rollout engine.
Repair answers use `swerl.edit_format`, the same format the policy is trained on."""
