"""Evaluation metrics shared by the trainers and the offline evaluators."""
