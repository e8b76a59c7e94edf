"""What the runner needs from a source of PRs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from data_pipeline.schema import Candidate


class Source(Protocol):
    """A source of candidates. `state` is stored in the manifest: whatever a source resolves on the first
    run (a head sha, a listing) goes there, so a resumed run sees exactly the same candidates."""

    kind: str

    def describe(self) -> dict[str, Any]:
        """The source's identity for the manifest. Never a secret."""
        ...

    def prepare(self, state: dict[str, Any]) -> None:
        """Fetch or resolve what `candidates` needs, reusing `state` from an earlier run when present."""
        ...

    def candidates(self, state: dict[str, Any]) -> Iterator[Candidate]:
        """Every candidate, in the same order on every run with the same state."""
        ...

    def git_dir(self, repo: str) -> Path:
        """The bare clone holding `repo`'s commits (cloned into the cache on first use)."""
        ...
