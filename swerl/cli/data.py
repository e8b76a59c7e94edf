"""`swerl data ...`: mine merged PRs into Parquet training prompts, and report on a mined set."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from data_pipeline.config import MineConfig
from swerl.cli.args import (
    existing_dir,
    existing_path,
    local_or_name,
    nonnegative_int,
    output_dir,
    positive_int,
    proper_fraction,
    repo_name,
    unit_interval,
)
from swerl.edit_format.prompts import PROMPT_STYLES
from swerl.errors import UserError

DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "swerl" / "clones"


def register(groups: argparse._SubParsersAction) -> None:
    group = groups.add_parser(
        "data",
        help="mine GitHub PRs and issues into SWE-RL training prompts",
        description="Build SWE-RL training data: merged PRs and the issues they resolve, with the code "
        "before and after, filtered, decontaminated, with relevant context files, rendered as prompts.",
    )
    commands = group.add_subparsers(dest="command", metavar="SUBCOMMAND", required=True)

    mine = commands.add_parser(
        "mine",
        help="mine one source into OUT (resumable: run the same command again after an interruption)",
        description="Mine merged PRs from GitHub's REST API, GH Archive dumps or a local clone into Parquet "
        "shards under OUT/data. Every dropped PR gets a reason (see `swerl data stats OUT`). A run killed "
        "at any point continues where it stopped when started again with the same arguments.",
        epilog="examples:\n"
        "  swerl data mine --local ~/src/myproject --out runs/mined\n"
        "  GITHUB_TOKEN=... swerl data mine --github owner/repo --github owner/other --out runs/gh\n"
        "  swerl data mine --gharchive dumps/ --clones clones/ --out runs/gha\n"
        "  OPENAI_API_KEY=... swerl data mine --local ~/src/myproject --out runs/ranked \\\n"
        "      --rank-model gpt-4o-mini --rank-base-url https://api.openai.com/v1",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = mine.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--local", type=existing_dir, metavar="PATH", help="a git clone: mine its merge/squash commits"
    )
    source.add_argument(
        "--github",
        action="append",
        metavar="OWNER/REPO",
        help="a repository to mine through the REST API "
        "(repeatable); the token is read from $GITHUB_TOKEN (see --token-env)",
    )
    source.add_argument(
        "--gharchive",
        type=existing_dir,
        metavar="DIR",
        help="a directory of GH Archive hourly dumps (YYYY-MM-DD-H.json.gz)",
    )
    mine.add_argument(
        "--out", type=output_dir, required=True, help="output directory (manifest, shards, data/)"
    )
    mine.add_argument(
        "--clones",
        type=output_dir,
        default=DEFAULT_CACHE,
        help=f"bare clone cache, one per repo (default {DEFAULT_CACHE})",
    )
    mine.add_argument(
        "--repo-name",
        type=repo_name,
        metavar="OWNER/REPO",
        help="--local: the repository's name in rows and ids (default: from a GitHub origin URL, else "
        "local/<directory>; give it so rows can be matched with clones and datasets later)",
    )
    mine.add_argument("--ref", default="HEAD", help="--local: branch or commit to mine (default HEAD)")
    mine.add_argument(
        "--api-url",
        default="https://api.github.com",
        help="--github, and --gharchive with a token: REST API base URL",
    )
    mine.add_argument(
        "--token-env",
        default="GITHUB_TOKEN",
        metavar="NAME",
        help="variable holding a GitHub token: --github's API, and --gharchive asks it about PRs whose "
        "events (trimmed since October 2025) and history leave it unknown whether they were merged",
    )
    mine.add_argument(
        "--clone-url",
        default="https://github.com/{repo}.git",
        help="URL template for cloning ({repo} = owner/name)",
    )
    mine.add_argument(
        "--max-prs", type=positive_int, default=None, help="--github: stop after N merged PRs per repo"
    )
    mine.add_argument("--repos", nargs="*", default=None, help="--gharchive: only these OWNER/REPO")
    mine.add_argument(
        "--shard-size",
        type=positive_int,
        default=MineConfig.shard_size,
        help="candidates per shard: the unit of work and of resumption (default %(default)s)",
    )
    mine.add_argument("--workers", type=positive_int, default=None, help="processes (default: all cores)")
    mine.add_argument(
        "--engine",
        choices=("local", "ray"),
        default="local",
        help="where shards are built: local processes, or Ray (pip install 'swerl[ray]'; joins "
        "$RAY_ADDRESS or starts a local instance; clones and OUT must be on shared storage)",
    )
    mine.add_argument(
        "--max-files", type=positive_int, default=10, help="max modified source files (default 10)"
    )
    mine.add_argument("--max-lines", type=positive_int, default=600, help="max changed lines (default 600)")
    mine.add_argument(
        "--languages",
        default="py",
        metavar="SUFFIXES",
        help="keep PRs that change at least one source file with one of these comma-separated suffixes "
        "(default py; 'any' keeps every language)",
    )
    mine.add_argument(
        "--max-file-bytes", type=positive_int, default=256_000, help="max size of a file (default 256000)"
    )
    mine.add_argument(
        "--max-prompt-tokens", type=positive_int, default=16_384, help="prompt budget (default 16384)"
    )
    mine.add_argument(
        "--max-extra-files", type=nonnegative_int, default=8, help="max unmodified context files (default 8)"
    )
    mine.add_argument(
        "--max-candidate-files",
        type=positive_int,
        default=5_000,
        help="unmodified files per suffix a PR's context is chosen from, the first in tree order "
        "(default 5000); lower mines a repository of many thousands of files faster, from fewer files",
    )
    mine.add_argument(
        "--tokenizer",
        type=existing_dir,
        default=None,
        help="local HF tokenizer dir for exact counts (default: estimate)",
    )
    mine.add_argument(
        "--prompt-style",
        choices=PROMPT_STYLES,
        default="full",
        help="prompt style of swerl.edit_format: full, or compact for small-context models (default full)",
    )
    mine.add_argument(
        "--rank-model",
        metavar="NAME",
        default=None,
        help="also let this chat model pick the unmodified context files: its picks come first, then "
        "imports / same package / BM25 (needs --rank-base-url; default: no model)",
    )
    mine.add_argument(
        "--rank-base-url",
        metavar="URL",
        default=None,
        help="OpenAI-compatible API serving --rank-model, up to /v1 (e.g. https://api.openai.com/v1, "
        "or http://localhost:8000/v1 for `vllm serve`)",
    )
    mine.add_argument(
        "--rank-api-key-env",
        metavar="NAME",
        default="OPENAI_API_KEY",
        help="environment variable holding the API key of --rank-base-url, read by each worker, never "
        "stored (default OPENAI_API_KEY; unset: no key)",
    )
    mine.add_argument(
        "--rank-top-k",
        type=positive_int,
        metavar="N",
        default=5,
        help="files the model may pick per PR, at most (default 5; --max-extra-files still caps the extras)",
    )
    mine.add_argument(
        "--dedup-threshold", type=unit_interval, default=0.9, help="near-duplicate Jaccard (default 0.9)"
    )
    mine.add_argument(
        "--decontaminate-with",
        action="append",
        type=local_or_name,
        default=[],
        metavar="SPEC",
        help="benchmark instances to exclude: a .txt/.json/.jsonl/.parquet file or hf:NAME[:SPLIT] "
        "(repeatable; the SWE-bench instances and repositories are always excluded unless "
        "--no-decontaminate)",
    )
    mine.add_argument(
        "--no-decontaminate", action="store_true", help="keep benchmark repositories (not advised)"
    )
    mine.add_argument(
        "--decontaminate-mode",
        choices=("repository", "instances"),
        default="repository",
        help="repository: nothing from a SWE-bench repository, recognised by its commits whatever the "
        "clone is called (default, as the SWE-RL paper); instances: only the benchmark instances' own PRs "
        "(of the shipped table and of --decontaminate-with lists)",
    )
    mine.add_argument("--allow-no-issue", action="store_true", help="keep API/Archive PRs that link no issue")
    mine.add_argument("--quiet", action="store_true", help="no progress bars")
    mine.set_defaults(run=_run_mine)

    _register_validate(commands)

    stats = commands.add_parser(
        "stats",
        help="print the funnel of a mined (or validated) directory and write PNG histograms",
        description="Count candidates, rows and drops per stage and reason from OUT/manifest.json, and "
        "write histograms of prompt tokens and files per instance (PNG) next to it. For a `swerl data "
        "validate` output: rows per verdict (executable, or why not), an example of each, and their bar "
        "chart (funnel.png).",
        epilog="example: swerl data stats runs/mined --plots runs/mined/stats",
    )
    stats.add_argument(
        "dir", type=existing_dir, help="a `swerl data mine` or `swerl data validate` output directory"
    )
    stats.add_argument(
        "--plots", type=output_dir, default=None, help="where to write PNGs (default DIR/stats)"
    )
    stats.set_defaults(run=_run_stats)

    split = commands.add_parser(
        "split",
        help="write a mined directory's rows as train.parquet and eval.parquet",
        description="Hold out rows for evaluation so that nothing about them was seen in training: by "
        "default the newest PRs (--by time); --by repo holds out whole repositories, --by random draws "
        "rows. Writes DEST/train.parquet and DEST/eval.parquet, for train_file and eval_file.",
        epilog="example: swerl data split runs/mined --eval-size 50 && swerl train sft --config C "
        "--set train_file=runs/mined/split/train.parquet --set eval_file=runs/mined/split/eval.parquet",
    )
    split.add_argument("dir", type=existing_dir, help="a finished `swerl data mine` output directory")
    split.add_argument("--by", choices=("time", "repo", "random"), default="time", help="what is held out")
    size = split.add_mutually_exclusive_group()
    size.add_argument("--eval-size", type=positive_int, help="rows held out")
    size.add_argument(
        "--eval-fraction",
        type=proper_fraction,
        default=0.05,
        help="share of the rows held out (default 0.05)",
    )
    split.add_argument("--seed", type=nonnegative_int, default=0, help="--by random: the draw's seed")
    split.add_argument(
        "--to", type=output_dir, default=None, help="where the two files go (default DIR/split)"
    )
    split.add_argument(
        "--overwrite", action="store_true", help="replace train.parquet and eval.parquet there"
    )
    split.set_defaults(run=_run_split)

    export = commands.add_parser(
        "export",
        help="write mined rows in another trainer's dataset format (verl)",
        description="Write the rows of a finished mining run, a .parquet file of rows (such as `swerl "
        "data split`'s train.parquet or eval.parquet) or a folder of them as verl's RL dataset, "
        "OUT/SPLIT.parquet: prompt (chat messages), data_source, ability, reward_model (style, "
        "ground_truth) and extra_info, scored in verl by swerl.integrations.verl.compute_score (see "
        "docs/integrations.md).",
        epilog="example: swerl data split runs/mined && swerl data export --format verl "
        "runs/mined/split/train.parquet --out runs/verl && swerl data export --format verl "
        "runs/mined/split/eval.parquet --out runs/verl --split test",
    )
    export.add_argument(
        "source", type=existing_path, help="a finished `swerl data mine` output, a .parquet file or folder"
    )
    export.add_argument("--format", required=True, choices=("verl",), help="the dataset format")
    export.add_argument("--out", required=True, type=output_dir, help="folder to write SPLIT.parquet into")
    export.add_argument(
        "--split",
        type=split_name,
        default="train",
        help="the file's name and extra_info.split (default train)",
    )
    export.add_argument("--overwrite", action="store_true", help="replace an existing OUT/SPLIT.parquet")
    export.set_defaults(run=_run_export)


def _register_validate(commands: argparse._SubParsersAction) -> None:
    from swerl.cli.agentless import DEFAULT_CACHE as TEST_CACHE
    from swerl.cli.agentless import _add_local_backend_options

    validate = commands.add_parser(
        "validate",
        help="run mined rows' tests before and after the fix; write the executable ones in SWE-bench's "
        "schema (resumable)",
        description="For each row whose PR changed tests: run the PR's test files at the base commit with "
        "the test patch (before) and with the gold patch too (after), --repeats times each, in the local "
        "backend's sandbox. FAIL_TO_PASS: failed in every before-run, passed in every after-run; "
        "PASS_TO_PASS: passed in every run; a test whose outcome changes between repeats is flaky and "
        "left out. Rows with FAIL_TO_PASS tests are written to OUT/test.parquet in SWE-bench's schema "
        "(plus env_recipe and the mined row's columns); every other row gets a reason (swerl data stats "
        "OUT). Each executable row's tests are then run against up to --mutants mutants of its gold patch "
        "(a hunk left out, a comparison or boolean flipped, an off-by-one, a statement deleted, a return "
        "value replaced, an exception swallowed): the share they reject is the row's test_strength, and "
        "the survivors' diffs are kept. A run stopped at any point continues when started again with the "
        "same arguments.",
        epilog="examples:\n"
        "  swerl data validate runs/mined --out runs/validated --max-rows 50 --workers 2\n"
        "  swerl data validate runs/mined --out runs/strong --mutants 20 --min-test-strength 0.8\n"
        "  swerl data validate lite.parquet --clones ~/mirrors --instance-ids psf__requests-2317 "
        "--out runs/v-lite\n"
        "then: swerl data stats runs/validated\n"
        "      swerl agentless evaluate --dataset runs/validated --predictions gold --out runs/v-gold",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    validate.add_argument(
        "input",
        type=existing_path,
        metavar="INPUT",
        help="a `swerl data mine` output (or its .parquet/.jsonl rows), or a .parquet/.jsonl/.json file "
        "in SWE-bench's schema",
    )
    validate.add_argument("--out", type=output_dir, required=True, help="output folder (test.parquet, ...)")
    validate.add_argument("--instance-ids", nargs="+", metavar="ID", help="only these rows")
    validate.add_argument(
        "--max-rows", type=positive_int, metavar="N", help="only the first N rows that change tests"
    )
    validate.add_argument("--repeats", type=positive_int, default=2, help="runs per side (default 2)")
    validate.add_argument("--workers", type=positive_int, default=1, help="rows at once (default 1)")
    validate.add_argument(
        "--mutants",
        type=nonnegative_int,
        default=10,
        metavar="N",
        help="mutants of the gold patch run against each executable row's tests, at most (default 10; "
        "0: test strength not measured). Each costs one run of the row's test files",
    )
    validate.add_argument(
        "--min-test-strength",
        type=unit_interval,
        metavar="X",
        help="write only the executable rows whose tests killed at least this share of their mutants "
        "(0-1; a row with no mutant to run is left out)",
    )
    validate.add_argument(
        "--engine",
        choices=("local", "ray"),
        default="local",
        help="where rows run: local processes, or Ray tasks (pip install 'swerl[ray]'; joins $RAY_ADDRESS "
        "or starts a local instance; --cache-dir and OUT must be on shared storage)",
    )
    validate.add_argument(
        "--cache-dir",
        type=output_dir,
        default=TEST_CACHE,
        help="repository mirrors and test environments, shared with `swerl agentless` "
        f"(default {TEST_CACHE})",
    )
    validate.add_argument(
        "--clones",
        type=existing_dir,
        metavar="DIR",
        help="directory of clones to mirror repositories from (owner__name, owner+name, owner/name or "
        "name); a --local mining output's own clone is used without it",
    )
    validate.add_argument("--offline", action="store_true", help="never contact GitHub")
    _add_local_backend_options(validate)
    validate.add_argument("--quiet", action="store_true", help="no progress bar")
    validate.set_defaults(run=_run_validate)


def _run_validate(args: argparse.Namespace) -> int:
    from data_pipeline.validate.rows import load_input
    from data_pipeline.validate.runner import BackendOptions, validate
    from swerl.execution.harness import harness_api
    from swerl.execution.local import RunLimits
    from swerl.paths import hold_folder, is_mining_output

    if args.engine == "ray":
        from swerl.ray_cluster import require_ray

        require_ray("--engine ray")
    harness_api()  # patches are applied with the harness's commands: a missing swebench is one line now
    if is_mining_output(args.out):
        raise UserError(f"--out {args.out} is a mining output; validate into a folder of its own")
    if args.min_test_strength is not None and not args.mutants:
        raise UserError("--min-test-strength needs mutants to measure it: drop --mutants 0")
    rows = load_input(args.input, args.instance_ids)
    source = rows.source
    local = Path(source["path"]) if source and source.get("kind") == "local" else None
    options = BackendOptions(
        cache_dir=args.cache_dir.resolve(),
        clones=args.clones.resolve() if args.clones else None,
        offline=args.offline,
        env_specs=args.env_specs.resolve() if args.env_specs else None,
        python=args.python,
        wheelhouse=args.wheelhouse.resolve() if args.wheelhouse else None,
        isolation="none" if args.unsafe_no_isolation else "bwrap",
        timeout_s=args.test_timeout_s,
        limits=RunLimits(memory_mb=args.test_memory_mb, cpu_s=args.test_cpu_s),
    )
    hold_folder(args.out, "validation")
    summary = validate(
        rows,
        args.out,
        options,
        input_name=str(args.input.resolve()),
        repeats=args.repeats,
        max_rows=args.max_rows,
        workers=args.workers,
        engine=args.engine,
        derive_version=rows.mined,
        local_source=None if args.clones else local,
        progress=not args.quiet,
        mutants=args.mutants,
        min_test_strength=args.min_test_strength,
    )
    print(
        f"{summary.report()}; {args.out / 'test.parquet'}; funnel: swerl data stats {args.out}",
        file=sys.stderr,
    )
    return 0


def _config(args: argparse.Namespace):
    from data_pipeline.config import ContextConfig, FilterConfig, MineConfig
    from data_pipeline.filter.decontam import load_benchmark

    ids: list[str] = []
    repos: list[str] = []
    for spec in args.decontaminate_with:
        more_ids, more_repos = load_benchmark(spec)
        ids += more_ids
        repos += more_repos
        if not args.no_decontaminate and not args.quiet:
            dropped = (
                f"every PR of {len(more_repos)} repositor{'y' if len(more_repos) == 1 else 'ies'} dropped "
                "(--decontaminate-mode instances: only the listed PRs)"
                if args.decontaminate_mode == "repository"
                else "their PRs dropped"
            )
            ids_said = f"{len(more_ids)} instance id{'' if len(more_ids) == 1 else 's'}"
            print(f"note: {spec}: {ids_said}; {dropped}", file=sys.stderr)
    return MineConfig(
        filters=FilterConfig(
            max_files=args.max_files,
            max_lines_changed=args.max_lines,
            max_file_bytes=args.max_file_bytes,
            require_issue=not args.allow_no_issue,
            languages=_languages(args.languages),
        ),
        context=ContextConfig(
            max_prompt_tokens=args.max_prompt_tokens,
            max_extra_files=args.max_extra_files,
            max_candidate_files=args.max_candidate_files,
            prompt_style=args.prompt_style,
            rank_model=args.rank_model,
            rank_base_url=args.rank_base_url,
            rank_api_key_env=args.rank_api_key_env,
            rank_top_k=args.rank_top_k,
        ),
        shard_size=args.shard_size,
        decontaminate=not args.no_decontaminate,
        decontaminate_mode=args.decontaminate_mode,
        decontamination_ids=tuple(sorted(set(ids))),
        decontamination_repos=tuple(sorted(set(repos))),
        dedup_threshold=args.dedup_threshold,
        tokenizer=str(args.tokenizer) if args.tokenizer else None,
    )


def _languages(value: str) -> tuple[str, ...]:
    """`--languages`: suffixes without dots, lower case; `any` (or nothing) for every language."""
    suffixes = tuple(sorted({part.strip().lstrip(".").lower() for part in value.split(",") if part.strip()}))
    return () if suffixes in ((), ("any",)) else suffixes


def _source(args: argparse.Namespace):
    if args.local is not None:
        from data_pipeline.sources.local import LocalSource

        _require_git_repository(args.local)
        source = LocalSource(args.local, args.clones, repo=args.repo_name, ref=args.ref)
        if args.repo_name is None and source.repo.startswith("local/") and not args.quiet:
            print(
                f"note: rows are named {source.repo} (the clone has no GitHub origin); pass --repo-name "
                "OWNER/NAME to name them as the repository",
                file=sys.stderr,
            )
        return source
    if args.github:
        from data_pipeline.sources.github import GitHubSource

        _require_reachable(args.api_url)
        return GitHubSource(
            args.github,
            args.clones,
            token=os.environ.get(args.token_env) or None,
            api_url=args.api_url,
            clone_url=args.clone_url,
            max_prs=args.max_prs,
        )
    from data_pipeline.sources.gharchive import GHArchiveSource

    token = os.environ.get(args.token_env) or None
    api = None
    if token:  # trimmed events the history cannot settle are asked about (never without a token)
        from data_pipeline.sources.github import PullLookup

        api = PullLookup(token, args.api_url)
    return GHArchiveSource(args.gharchive, args.clones, clone_url=args.clone_url, repos=args.repos, api=api)


def _require_reachable(api_url: str) -> None:
    """--github talks to the API for every PR: without a route to it, say so now rather than after the
    client's retries (minutes)."""
    from swerl.net import behind_proxy, reachable

    if not behind_proxy() and not reachable(api_url):
        raise UserError(
            f"--api-url {api_url} cannot be reached from this machine; mine a clone with --local, or GH "
            "Archive dumps with --gharchive, where there is no network"
        )


def _require_git_repository(path: Path) -> None:
    """--local must be a git repository (a work tree or a bare one): say so before anything is written."""
    import subprocess

    found = subprocess.run(
        ["git", "-C", str(path), "rev-parse", "--is-inside-git-dir", "--absolute-git-dir", "--show-prefix"],
        capture_output=True,
        text=True,
        check=False,
    )
    if found.returncode != 0:
        raise UserError(f"--local {path}: not a git repository (give a clone's directory)")
    inside_git_dir, git_dir, prefix = found.stdout.split("\n")[:3]  # one line per option asked
    # A folder inside the git directory itself (`.git/refs`, a bare repository's `objects/`).
    if inside_git_dir == "true" and Path(git_dir).resolve() != path.resolve():
        clone = Path(git_dir).parent if Path(git_dir).name == ".git" else Path(git_dir)
        raise UserError(
            f"--local {path}: a folder inside the git directory {git_dir}; give the clone, {clone}"
        )
    if prefix.strip():  # a folder inside a work tree: git finds the repository, a clone of it does not
        top = subprocess.run(
            ["git", "-C", str(path), "rev-parse", "--show-toplevel"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        raise UserError(f"--local {path}: a folder inside the clone {top}; give the clone's top folder")


# Options of one source only, with how to tell that the user gave them: given with another source they
# would be passed over (--max-prs with --local mined every PR).
_SOURCE_OPTIONS = {
    "--repo-name": ("local", lambda a: a.repo_name is not None),
    "--ref": ("local", lambda a: a.ref != "HEAD"),
    "--max-prs": ("github", lambda a: a.max_prs is not None),
    "--repos": ("gharchive", lambda a: a.repos is not None),
}


def _require_mine_options(args: argparse.Namespace) -> None:
    """What would otherwise fail after the run directory was written (and then hold the failed run's
    options against the corrected command), or be passed over: an option of another source, a folder
    that is no tokenizer, Ray missing."""
    source = "local" if args.local is not None else "github" if args.github else "gharchive"
    for option, (owner, given) in _SOURCE_OPTIONS.items():
        if given(args) and owner != source:
            raise UserError(f"{option} applies to --{owner} only, not --{source}")
    if args.languages.strip() == "":
        raise UserError("--languages: give suffixes (py,pyi) or any")
    if args.tokenizer is not None:
        from swerl.configs import missing_model

        problem = missing_model(str(args.tokenizer), tokenizer=True)
        if problem:
            raise UserError(f"--tokenizer {problem}")
    if args.engine == "ray":
        from swerl.ray_cluster import require_ray

        require_ray("--engine ray")  # the run imports it anyway, once its directory is written


def _run_mine(args: argparse.Namespace) -> int:
    from data_pipeline.run.runner import mine
    from swerl.paths import hold_folder

    _require_mine_options(args)
    # A server that fails or a clone git cannot read ends the run with one line (their errors are
    # UserErrors); git errors of single PRs never get here: they drop the PR.
    source, config = _source(args), _config(args)
    if args.local is not None and not (args.out / "manifest.json").exists():
        source.check_ref()  # before the run writes anything (a resumed run keeps the commit it started at)
    hold_folder(args.out, "mining run")  # a second mine into the same --out stops at once
    summary = mine(
        args.out,
        source,
        config,
        workers=args.workers,
        progress=not args.quiet,
        engine=args.engine,
    )
    print(summary.report(), file=sys.stderr)
    return 0


def _run_stats(args: argparse.Namespace) -> int:
    from data_pipeline.report.stats import (
        funnel,
        plot_strength,
        plot_validation_funnel,
        validation_funnel,
        write_histograms,
    )
    from data_pipeline.validate.runner import RUN_FILE, read_results

    if (args.dir / RUN_FILE).is_file():
        text, counts = validation_funnel(args.dir)
        print(text)
        plots = args.plots or args.dir / "stats"
        plots.mkdir(parents=True, exist_ok=True)
        plot_validation_funnel(plots / "funnel.png", counts, f"validation of {args.dir.name}")
        print(f"wrote {plots / 'funnel.png'}")
        strengths = [
            r["test_strength"] for r in read_results(args.dir).values() if r.get("test_strength") is not None
        ]
        if strengths:
            plot_strength(plots / "test_strength.png", strengths, f"test strength of {args.dir.name}")
            print(f"wrote {plots / 'test_strength.png'}")
        return 0

    report = funnel(args.dir)
    print(report.text())
    for path in write_histograms(args.dir, args.plots or args.dir / "stats"):
        print(f"wrote {path}")
    return 0


def split_name(value: str) -> str:
    """--split: a plain file name stem (train, test, val), never a path."""
    if not value or not value.replace("-", "").replace("_", "").isalnum():
        raise argparse.ArgumentTypeError(f"expected a name of letters, digits, - and _, got {value!r}")
    return value


def _run_export(args: argparse.Namespace) -> int:
    from swerl.integrations.verl import export
    from swerl.paths import row_files

    dest = args.out / f"{args.split}.parquet"
    if dest.exists() and not args.overwrite:
        raise UserError(f"{dest} exists; pass --overwrite to replace it")
    rows = export(row_files(args.source), dest, args.split)
    print(f"{dest}: {rows} rows (verl RL dataset, split {args.split})", file=sys.stderr)
    return 0


def _run_split(args: argparse.Namespace) -> int:
    from data_pipeline.report.split import finished_rows, write_split

    table = finished_rows(args.dir)  # first: a folder that is no finished run is the error to name
    dest = args.to or args.dir / "split"
    existing = [name for name in ("train.parquet", "eval.parquet") if (dest / name).exists()]
    if existing and not args.overwrite:
        raise UserError(f"{dest} already holds {', '.join(existing)}; pass --overwrite to replace them")
    size = args.eval_size or max(1, round(table.num_rows * args.eval_fraction))
    train, held_out = write_split(table, dest, args.by, size, args.seed)
    print(f"{dest / 'train.parquet'}: {train} rows", file=sys.stderr)
    print(f"{dest / 'eval.parquet'}: {held_out} rows (held out by {args.by})", file=sys.stderr)
    return 0
