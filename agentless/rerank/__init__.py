"""Rerank: normalize candidate patches, filter them by tests when a backend is given, and vote."""
