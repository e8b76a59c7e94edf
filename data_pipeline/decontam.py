"""Decontamination: no training row may come from a repository or instance that a benchmark evaluates.

On by default. Training on a SWE-bench task's own PR, or on its repository's later history, inflates the
benchmark score it is then measured on. So rows are dropped when their instance id is a benchmark
instance, or their repository is a benchmark repository. The twelve SWE-bench repositories are built in
(the test set is public and fixed); instances (and their repositories) can be added from a file or a
Hugging Face dataset.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

SWE_BENCH_REPOS = (
    "astropy/astropy",
    "django/django",
    "matplotlib/matplotlib",
    "mwaskom/seaborn",
    "pallets/flask",
    "psf/requests",
    "pydata/xarray",
    "pylint-dev/pylint",
    "pytest-dev/pytest",
    "scikit-learn/scikit-learn",
    "sphinx-doc/sphinx",
    "sympy/sympy",
)


def repo_of_instance(instance_id: str) -> str | None:
    """`owner__name-123` -> `owner/name` (SWE-bench's convention)."""
    head, sep, number = instance_id.rpartition("-")
    if not sep or not number.isdigit() or "__" not in head:
        return None
    owner, _, name = head.partition("__")
    return f"{owner}/{name}"


def _records_from_file(path: Path) -> Iterable[dict]:
    text_suffixes = (".txt", ".lst")
    if path.suffix in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        columns = [c for c in ("instance_id", "repo") if c in pq.read_schema(path).names]
        yield from pq.read_table(path, columns=columns).to_pylist()
    elif path.suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        yield from (item if isinstance(item, dict) else {"instance_id": item} for item in data)
    elif path.suffix in (".jsonl", ".ndjson"):
        with path.open(encoding="utf-8") as f:
            yield from (json.loads(line) for line in f if line.strip())
    elif path.suffix in text_suffixes or not path.suffix:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip() and not line.startswith("#"):
                yield {"instance_id": line.strip()}
    else:
        raise ValueError(f"{path}: expected .txt, .json, .jsonl or .parquet with instance ids")


def load_benchmark(spec: str) -> tuple[list[str], list[str]]:
    """(instance ids, repos) from a file path, or from `hf:NAME[:SPLIT]` (a Hugging Face dataset)."""
    if spec.startswith("hf:"):
        import datasets

        name, _, split = spec[3:].partition(":")
        records: Iterable[dict] = datasets.load_dataset(name, split=split or "test")
    else:
        path = Path(spec)
        if not path.exists():
            raise FileNotFoundError(f"decontamination list not found: {path}")
        records = _records_from_file(path)
    ids, repos = [], []
    for record in records:
        instance = record.get("instance_id")
        if instance:
            ids.append(str(instance))
            repo = record.get("repo") or repo_of_instance(str(instance))
            if repo:
                repos.append(str(repo))
        elif record.get("repo"):
            repos.append(str(record["repo"]))
    return sorted(set(ids)), sorted(set(repos))


@dataclass(frozen=True)
class Decontaminator:
    ids: frozenset[str] = field(default_factory=frozenset)
    repos: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def build(cls, enabled: bool, ids: Iterable[str], repos: Iterable[str]) -> Decontaminator:
        if not enabled:
            return cls()
        return cls(frozenset(ids), frozenset(r.lower() for r in (*SWE_BENCH_REPOS, *repos)))

    def reason(self, instance_id: str, repo: str) -> str | None:
        if instance_id in self.ids:
            return "benchmark instance"
        if repo.lower() in self.repos:
            return "benchmark repository"
        return None
