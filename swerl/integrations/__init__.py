"""swerl's data and rewards inside other trainers: TRL's `GRPOTrainer` (`trl`) and verl (`verl`).

Neither trainer is imported here: each module only speaks the calling convention of its trainer (keyword
arguments for TRL, `compute_score` for verl), so it loads in that trainer's environment with nothing but
swerl's reward beside it.
"""
