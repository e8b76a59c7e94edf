"""Environments: a dataset row becomes an episode, and the episode a reward. They know nothing of models
or optimizers, so the trainers that drive them stay plumbing. `codecontests` is RLEF's: up to three
answers to a CodeContests-shaped problem, public-test feedback between them, private tests for the reward."""
