"""Stage 1, collect: where merged PRs and their problem texts come from (local history, GitHub REST API,
GH Archive). Each yields `Candidate`s in a deterministic order and names the bare clone of each repo."""

from data_pipeline.sources.base import Source

__all__ = ["Source"]
