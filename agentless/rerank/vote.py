"""Majority vote over normalized candidates.

Candidates with the same normalized key form a group; the biggest group wins and is represented by
its earliest member (the greedy sample, when it is in the group, comes first). Ties between groups go
to the group whose earliest member came first, so the greedy answer wins when nothing agrees.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Group:
    key: Hashable
    members: tuple[int, ...]
    """Candidate indices, ascending."""

    @property
    def representative(self) -> int:
        return self.members[0]


def group_candidates(items: Sequence[tuple[int, Hashable]]) -> list[Group]:
    """Groups of (candidate index, key) pairs, largest first, ties by earliest member."""
    members: dict[Hashable, list[int]] = {}
    for index, key in items:
        members.setdefault(key, []).append(index)
    groups = [Group(key, tuple(sorted(indices))) for key, indices in members.items()]
    groups.sort(key=lambda g: (-len(g.members), g.members[0]))
    return groups


def majority_vote(items: Sequence[tuple[int, Hashable]]) -> int | None:
    """The winning candidate index, or None when there are no candidates."""
    groups = group_candidates(items)
    return groups[0].representative if groups else None
