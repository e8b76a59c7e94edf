"""Stage 2, filter: decontamination. No training row may come from a repository or instance that a
benchmark evaluates.

On by default. Training on a SWE-bench task's own PR, or on its repository's later history, inflates the
benchmark score it is then measured on. The SWE-bench instances (SWE-bench, Lite, Verified, Multimodal,
Multilingual) ship as a table (`swebench_instances.json.gz`, rebuilt by `scripts/build_swebench_table.py`
from the datasets' own files): repository, PR number, base commit, creation time and the files the gold
patch touches of each.

A repository is known by its commits, not its name: a clone is a SWE-bench repository when the base
commit of any instance is in its history, whatever the clone is called, wherever it came from (a fork, a
mirror, a directory named anything with no remote). Events and API listings name repositories as they
were called then, so the earlier names of benchmark repositories count as theirs too (`EARLIER_NAMES`).

Two modes. `repository` (the default, as the SWE-RL paper does): nothing from a benchmark repository.
`instances`: only the instances' own PRs are dropped, the rest of those repositories' history is kept
(closer to the benchmark's distribution, at the risk that a PR near an instance teaches its fix).
Instances and repositories of other benchmarks can be added from a file or a Hugging Face dataset.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from data_pipeline.schema import instance_id as make_instance_id
from swerl.errors import UserError
from swerl.git import run_git
from swerl.jsonl import load_json, stream_records

TABLE = Path(__file__).with_name("swebench_instances.json.gz")
MODES = ("repository", "instances")

# Earlier names of benchmark repositories (GitHub redirects them to the current one), lower case: GH
# Archive events and old links still carry them.
EARLIER_NAMES = {
    "kennethreitz/requests": "psf/requests",
    "requests/requests": "psf/requests",
    "mitsuhiko/flask": "pallets/flask",
    "pycqa/pylint": "pylint-dev/pylint",
    "pycqa/astroid": "pylint-dev/astroid",
    "xray/xray": "pydata/xarray",
    "pydata/xray": "pydata/xarray",
    "sloria/marshmallow": "marshmallow-code/marshmallow",
    "vtkiorg/vtki": "pyvista/pyvista",
    "darcymason/pydicom": "pydicom/pydicom",
    "alanmcruickshank/sqlfluff": "sqlfluff/sqlfluff",
    "stedolan/jq": "jqlang/jq",
    "antirez/redis": "redis/redis",
    "vuejs/vue-next": "vuejs/core",
    "friendsofphp/php-cs-fixer": "php-cs-fixer/php-cs-fixer",
    "charliermarsh/ruff": "astral-sh/ruff",
    "spf13/hugo": "gohugoio/hugo",
    "mholt/caddy": "caddyserver/caddy",
    "developit/preact": "preactjs/preact",
    "nnnick/chart.js": "chartjs/chart.js",
    "chjj/marked": "markedjs/marked",
    "krausefx/fastlane": "fastlane/fastlane",
    "mzabriskie/axios": "axios/axios",
    "6to5/6to5": "babel/babel",
    "lmccart/p5.js": "processing/p5.js",
}


@dataclass(frozen=True)
class Instance:
    instance_id: str
    repo: str
    pull_number: int
    base_commit: str
    created_at: str
    files: tuple[str, ...]
    datasets: tuple[str, ...]


def swebench_instances() -> tuple[Instance, ...]:
    """Every instance of the shipped table (`TABLE`, read once per process)."""
    return _load_table(TABLE)


@lru_cache(maxsize=2)
def _load_table(path: Path) -> tuple[Instance, ...]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        table = json.load(f)
    columns = table["columns"]
    found = []
    for row in table["rows"]:
        item = dict(zip(columns, row, strict=True))
        item["files"], item["datasets"] = tuple(item["files"]), tuple(item["datasets"])
        found.append(Instance(**item))
    return tuple(found)


def benchmark_repos() -> frozenset[str]:
    """The SWE-bench repositories (lower case)."""
    return frozenset(item.repo.lower() for item in swebench_instances())


@dataclass(frozen=True)
class Identity:
    """What a clone was found to be: a benchmark repository, and an instance whose base commit it holds."""

    repo: str
    evidence: str
    base_commit: str


def identify(git_dir: Path) -> Identity | None:
    """The benchmark repository whose instances' base commits the clone holds, if any: one `git cat-file
    --batch-check` over every base commit of the table. When commits of several are found (a repository
    that vendors another's history), the one with the most is named."""
    instances = {item.base_commit: item for item in swebench_instances()}
    query = "".join(f"{sha}\n" for sha in instances).encode()
    answer = run_git(git_dir, "cat-file", "--batch-check", stdin=query).decode("ascii", "replace")
    hits: dict[str, list[Instance]] = {}
    for line in answer.splitlines():
        sha, _, kind = line.partition(" ")
        if kind.startswith("commit") and sha in instances:
            hits.setdefault(instances[sha].repo, []).append(instances[sha])
    if not hits:
        return None
    repo, held = max(hits.items(), key=lambda item: (len(item[1]), item[0]))
    first = min(held, key=lambda item: item.instance_id)
    return Identity(repo, first.instance_id, first.base_commit)


def canonical_repo(repo: str, identities: Mapping[str, str] | None = None) -> str:
    """The benchmark repository `repo` is (by its commits, or by an earlier name), else `repo` itself."""
    known = (identities or {}).get(repo)
    return known or EARLIER_NAMES.get(repo.lower(), repo)


def _records_from_file(path: Path) -> Iterable[dict]:
    text_suffixes = (".txt", ".lst")
    if path.suffix in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        columns = [c for c in ("instance_id", "repo") if c in pq.read_schema(path).names]
        yield from pq.read_table(path, columns=columns).to_pylist()
    elif path.suffix == ".json":
        data = load_json(path)
        yield from (item if isinstance(item, dict) else {"instance_id": item} for item in data)
    elif path.suffix in (".jsonl", ".ndjson"):
        yield from stream_records(path)
    elif path.suffix in text_suffixes or not path.suffix:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip() and not line.startswith("#"):
                yield {"instance_id": line.strip()}
    else:
        raise UserError(f"{path}: expected .txt, .json, .jsonl or .parquet with instance ids")


def repo_of_instance(instance_id: str) -> str | None:
    """`owner__name-123` -> `owner/name` (SWE-bench's convention)."""
    head, sep, number = instance_id.rpartition("-")
    if not sep or not number.isdigit() or "__" not in head:
        return None
    owner, _, name = head.partition("__")
    return f"{owner}/{name}"


def load_benchmark(spec: str) -> tuple[list[str], list[str]]:
    """(instance ids, repos) from a file path, or from `hf:NAME[:SPLIT]` (a Hugging Face dataset)."""
    if spec.startswith("hf:"):
        from swerl.hub import unreachable_hub_dataset

        name, _, split = spec[3:].partition(":")
        problem = unreachable_hub_dataset(
            name, "give a local .txt/.json/.jsonl/.parquet file of instance ids"
        )
        if problem:
            raise UserError(f"--decontaminate-with {spec}: {problem}")
        import datasets

        records: Iterable[dict] = datasets.load_dataset(name, split=split or "test")
    else:
        path = Path(spec)
        if not path.exists():
            raise FileNotFoundError(f"decontamination list not found: {path}")
        records = _records_from_file(path)
    ids, repos, malformed = [], [], []
    for record in records:
        instance = record.get("instance_id")
        if instance:
            ids.append(str(instance))
            repo = record.get("repo") or repo_of_instance(str(instance))
            if repo:
                repos.append(str(repo))
            else:
                malformed.append(str(instance))
        elif record.get("repo"):
            repos.append(str(record["repo"]))
    # A safety list that matches nothing must not pass unnoticed: an id no PR can have, or no entry.
    if malformed:
        raise UserError(
            f"{spec}: {len(malformed)} entries are not instance ids (owner__name-NUMBER, with a repo column "
            f"otherwise), e.g. {malformed[0]!r}"
        )
    if not ids and not repos:
        raise UserError(f"{spec}: no instance ids or repositories in it")
    return sorted(set(ids)), sorted(set(repos))


@dataclass(frozen=True)
class Decontaminator:
    """Decides, per PR, whether it is benchmark data. `identities` maps a mined repository's name to the
    benchmark repository its commits show it to be (see `identify`)."""

    enabled: bool = False
    mode: str = "repository"
    ids: frozenset[str] = field(default_factory=frozenset)
    repos: frozenset[str] = field(default_factory=frozenset)
    extra_repos: frozenset[str] = field(default_factory=frozenset)
    identities: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        enabled: bool,
        ids: Iterable[str],
        repos: Iterable[str],
        mode: str = "repository",
        identities: Mapping[str, str] | None = None,
    ) -> Decontaminator:
        if not enabled:
            return cls()
        if mode not in MODES:
            raise ValueError(f"decontamination mode {mode!r}: expected one of {', '.join(MODES)}")
        table = swebench_instances()
        return cls(
            enabled=True,
            mode=mode,
            ids=frozenset((*ids, *(item.instance_id for item in table))),
            repos=benchmark_repos(),
            extra_repos=frozenset(repo.lower() for repo in repos),
            identities=dict(identities or {}),
        )

    def reason(self, instance_id: str, repo: str, pull_number: int) -> str | None:
        """Why this PR is benchmark data (the detail of its `contaminated` drop), or None."""
        if not self.enabled:
            return None
        canonical = canonical_repo(repo, self.identities)
        alias = "" if canonical == repo else f" ({repo} is {canonical})"
        if instance_id in self.ids or make_instance_id(canonical, pull_number) in self.ids:
            return f"benchmark instance {make_instance_id(canonical, pull_number)}{alias}"
        # Whole repositories only in `repository` mode, for the shipped table and added lists alike:
        # `instances` mode drops the instances' own PRs, whatever list named them.
        if self.mode == "repository" and (
            canonical.lower() in self.repos
            or repo.lower() in self.extra_repos
            or canonical.lower() in self.extra_repos
        ):
            return f"benchmark repository {canonical}{alias}"
        return None


def identity_note(repo: str, found: Mapping[str, Any], mode: str) -> str:
    """The terminal's line about a clone identified as a benchmark repository."""
    dropped = "every PR of it" if mode == "repository" else "the PRs of its SWE-bench instances"
    return (
        f"excluded: {repo} is the SWE-bench repository {found['repo']} (its history holds base commit "
        f"{found['base_commit'][:12]} of {found['evidence']}): {dropped} dropped as contaminated "
        "(--no-decontaminate keeps them)"
    )
