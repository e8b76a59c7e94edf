"""Options of a mining run. They are recorded in the manifest, so a resumed run cannot silently mix
rows made under different options. Secrets (the GitHub token, the ranking API key) are never part of it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from swerl.errors import UserError


@dataclass(frozen=True)
class FilterConfig:
    """Thresholds of stages 2 (filter) and 3 (extract). Defaults keep PRs that fit a long-context prompt
    and a reviewable fix."""

    max_files: int = 10
    max_lines_changed: int = 600
    max_file_bytes: int = 256_000
    min_problem_chars: int = 10
    require_issue: bool = True
    # File suffixes (no dot) of which a PR must change at least one source file; empty: any language.
    languages: tuple[str, ...] = ("py",)
    bot_authors: tuple[str, ...] = (
        "dependabot",
        "renovate",
        "pre-commit-ci",
        "github-actions",
        "greenkeeper",
        "snyk-bot",
        "pyup-bot",
        "allcontributors",
    )


@dataclass(frozen=True)
class ContextConfig:
    """Stage 5, context: how many tokens of files a prompt may show, and how many unmodified files at most."""

    max_prompt_tokens: int = 16_384
    max_extra_files: int = 8
    max_candidate_files: int = 5_000
    seed: int = 0
    # The prompt style of swerl.edit_format ("full" or "compact"); train and serve with the same one.
    prompt_style: str = "full"
    # Optional model ranking of the unmodified files (`model_rank.py`): a chat model served at an
    # OpenAI-compatible base URL. Only the *name* of the variable holding the API key is kept here.
    rank_model: str | None = None
    rank_base_url: str | None = None
    rank_api_key_env: str = "OPENAI_API_KEY"
    rank_top_k: int = 5

    def __post_init__(self) -> None:
        from swerl.edit_format import system_prompt_for

        system_prompt_for(self.prompt_style)  # refuses an unknown style, in the edit format's own words
        if (self.rank_model is None) != (self.rank_base_url is None):
            raise UserError(
                "context ranking needs both a model and a base URL (--rank-model and --rank-base-url), "
                "or neither"
            )
        if self.rank_top_k < 1:
            raise UserError(f"--rank-top-k must be at least 1, not {self.rank_top_k}")
        if not self.rank_api_key_env:
            raise UserError("--rank-api-key-env must name an environment variable")


@dataclass(frozen=True)
class MineConfig:
    filters: FilterConfig = field(default_factory=FilterConfig)
    context: ContextConfig = field(default_factory=ContextConfig)
    # Candidates per shard: the unit of work, resumption and memory in flight. Each shard costs a few ms
    # of fixed work (its Parquet files, git round trips); 128 measured 10% faster than 64 on the mining
    # bench, with a shorter tail and less memory than 192-256.
    shard_size: int = 128
    decontaminate: bool = True
    # "repository": nothing from a benchmark repository; "instances": only the benchmark's own PRs.
    decontaminate_mode: str = "repository"
    decontamination_ids: tuple[str, ...] = ()
    decontamination_repos: tuple[str, ...] = ()
    dedup_threshold: float = 0.9
    tokenizer: str | None = None

    def record(self) -> dict[str, Any]:
        """JSON-ready, as stored in the manifest (id lists are summarised by a hash: they can be long)."""
        import hashlib

        data = asdict(self)
        for key in ("decontamination_ids", "decontamination_repos"):
            values = sorted(data.pop(key))
            data[key] = {
                "count": len(values),
                "sha256": hashlib.sha256("\n".join(values).encode()).hexdigest(),
            }
        return data
