"""`swerl agentless ...`: solve SWE-bench instances (localize -> repair -> rerank) and evaluate the result."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from swerl.cli.args import (
    absolute,
    existing_dir,
    existing_file,
    local_or_name,
    nonnegative_float,
    nonnegative_int,
    output_dir,
    positive_int,
)
from swerl.edit_format.prompts import PROMPT_STYLES
from swerl.errors import UserError
from swerl.jsonl import load_json
from swerl.paths import hold_folder

DEFAULT_CACHE = Path("runs/agentless-cache")


def _add_data_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dataset",
        required=True,
        type=local_or_name,
        help="a local .parquet/.jsonl/.json file in the SWE-bench schema, a hub id "
        "(princeton-nlp/SWE-bench_Lite) or an alias: lite, verified, full",
    )
    parser.add_argument("--split", default="test", help="hub dataset split (default: test)")
    parser.add_argument("--instance-ids", nargs="+", metavar="ID", help="only these instances")
    parser.add_argument(
        "--cache-dir",
        type=output_dir,
        default=DEFAULT_CACHE,
        help=f"bare repository mirrors and search indexes (default: {DEFAULT_CACHE})",
    )
    parser.add_argument(
        "--clones",
        type=existing_dir,
        default=None,
        metavar="DIR",
        help="directory of existing clones to mirror from instead of GitHub: owner__name, owner+name, "
        "owner/name or name, each with or without .git, bare or not (or holding the repository as repo/)",
    )
    parser.add_argument("--offline", action="store_true", help="never contact GitHub")


def _add_model_options(parser: argparse.ArgumentParser, required: bool) -> None:
    group = parser.add_argument_group("model")
    group.add_argument(
        "--model",
        required=required,
        help="checkpoint (hub id or local folder) run with transformers; with --openai-base-url, the "
        "served model's name",
    )
    group.add_argument(
        "--openai-base-url",
        help="sample from an OpenAI-compatible completions server (vllm serve, transformers serve, ...)",
    )
    group.add_argument(
        "--openai-protocol",
        choices=["auto", "vllm", "openai", "transformers"],
        default="auto",
        help="vllm: token ids in and out (vLLM's extensions); openai: text only, the plain API any "
        "server takes; transformers: openai plus transformers serve's switch to sampling (without it "
        "that server answers greedily at any temperature); auto (default): ask the server which it is",
    )
    group.add_argument(
        "--tokenizer", type=local_or_name, help="tokenizer to render prompts with (default: --model)"
    )
    group.add_argument("--dtype", default=None, help="model dtype for transformers (e.g. bfloat16)")
    group.add_argument("--device", default="cpu", help="device for transformers (default: cpu)")
    group.add_argument(
        "--max-prompt-tokens", type=positive_int, default=None, help="skip prompts longer than this"
    )


def _add_run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out", required=True, type=output_dir, help="run directory (stage files, predictions)"
    )
    parser.add_argument("--top-files", type=positive_int, default=5, help="files kept by file localization")
    parser.add_argument(
        "--element-files",
        type=nonnegative_int,
        default=20,
        help="first files of the model-free ranking re-ranked by their best function or class (0: none)",
    )
    parser.add_argument(
        "--dense",
        type=nonnegative_float,
        default=0.0,
        help="weight of a static embedding model's similarity (paths and defined names) added to the "
        "model-free ranking (0: off; needs pip install 'swerl[dense]'; figures in docs/benchmarks.md)",
    )
    parser.add_argument(
        "--context-files", type=positive_int, default=3, help="files shown to the repair prompt"
    )
    parser.add_argument("--num-elements", type=positive_int, default=8, help="functions/classes kept")
    parser.add_argument(
        "--no-model-localization",
        action="store_true",
        help="localize without the model (BM25 and boosts only)",
    )
    parser.add_argument("--seed", type=nonnegative_int, default=0, help="sampling seed")


def _add_local_backend_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("local backend")
    group.add_argument(
        "--python",
        type=local_or_name,
        help="run every repository's tests with this interpreter (no env creation)",
    )
    group.add_argument(
        "--env-specs",
        type=existing_file,
        metavar="FILE",
        help="JSON of environments per repository and version (Python version, pinned packages, install "
        "steps; see docs/agentless.md); default: the built-in specs",
    )
    group.add_argument("--unsafe-no-isolation", action="store_true", help="run tests without bubblewrap")
    group.add_argument(
        "--wheelhouse",
        type=existing_dir,
        metavar="DIR",
        help="no network: create test environments from the wheels in DIR, never from an index (pip "
        "--no-index --find-links DIR); DIR needs pytest, build backends (setuptools, wheel) and every "
        "dependency",
    )
    group.add_argument(
        "--test-memory-mb",
        type=positive_int,
        metavar="MB",
        help="memory per test process (RLIMIT_DATA; default: unlimited)",
    )
    group.add_argument(
        "--test-cpu-s",
        type=positive_int,
        metavar="SECONDS",
        help="CPU seconds per test process (RLIMIT_CPU; default: unlimited)",
    )
    group.add_argument("--test-timeout-s", type=positive_int, default=1800, help="wall clock per test run")


def register(groups: argparse._SubParsersAction) -> None:
    group = groups.add_parser(
        "agentless",
        help="solve SWE-bench instances: localize, repair, rerank; evaluate predictions",
        description="Agentless-style repair with the SWE-RL edit format. Every stage writes a JSONL file "
        "in the run directory; rerunning the same command resumes where it stopped.",
    )
    commands = group.add_subparsers(dest="command", metavar="SUBCOMMAND", required=True)

    run = commands.add_parser(
        "run",
        help="all stages; writes predictions.jsonl for the SWE-bench harness",
        description="Localize files and elements, sample repairs (one greedy, the rest at --temperature), "
        "rerank by normalized majority vote (optionally after regression/reproduction test filters), and "
        "write predictions.jsonl (instance_id, model_name_or_path, model_patch).",
        epilog="example: swerl agentless run --dataset lite --model Qwen/Qwen2.5-Coder-7B-Instruct "
        "--device cuda --dtype bfloat16 --out runs/lite-qwen7b",
    )
    _add_data_options(run)
    _add_model_options(run, required=False)
    _add_run_options(run)
    run.add_argument("--num-samples", type=positive_int, default=4, help="repair samples per instance")
    run.add_argument(
        "--temperature", type=nonnegative_float, default=0.8, help="temperature of all but the first sample"
    )
    run.add_argument("--max-new-tokens", type=positive_int, default=4096, help="tokens per repair answer")
    run.add_argument(
        "--localize-max-new-tokens", type=positive_int, default=512, help="tokens per localization answer"
    )
    run.add_argument("--model-name", help="model_name_or_path written in predictions (default: --model)")
    run.add_argument(
        "--prompt-style",
        choices=PROMPT_STYLES,
        default="full",
        help="repair prompt style; use the one the model was trained with (default: full)",
    )
    run.add_argument(
        "--regression",
        action="store_true",
        help="filter candidates by the repository's tests that pass at the base commit (those of the edited "
        "modules), as Agentless does",
    )
    run.add_argument(
        "--regression-from-gold-pass-to-pass",
        action="store_true",
        help="regression filter on the dataset's PASS_TO_PASS instead: labels derived from the gold patch, "
        "so scores are not comparable with published ones (recorded in each prediction's metadata)",
    )
    run.add_argument(
        "--regression-model-filter",
        action="store_true",
        help="with --regression: the model names the passing tests a fix may rightly break; left out",
    )
    run.add_argument(
        "--reproduction",
        action="store_true",
        help="rank candidates by model-written reproduction tests: those failing at the base vote, and the "
        "candidates passing the most of them survive",
    )
    run.add_argument(
        "--reproduction-samples",
        type=positive_int,
        help="with --reproduction: reproduction tests sampled per instance (one greedy, the rest at "
        "--temperature; default: 4)",
    )
    run.add_argument(
        "--feedback-turns",
        type=nonnegative_int,
        default=0,
        metavar="N",
        help="repair in turns: each sample's patch runs on the --regression and --reproduction tests and "
        "their failures go back to the model, up to N times, before rerank (default: 0, one answer)",
    )
    run.add_argument(
        "--feedback-workers",
        type=positive_int,
        default=1,
        metavar="N",
        help="feedback turns: distinct patches whose tests run at once (default: 1)",
    )
    run.add_argument(
        "--feedback-engine",
        choices=("threads", "ray"),
        default="threads",
        help="feedback turns: threads run the tests on this machine; ray makes each distinct patch's run a "
        "Ray task of one CPU and no GPU (the cluster of RAY_ADDRESS, else a local instance of "
        "--feedback-workers CPUs; pip install 'swerl[ray]')",
    )
    run.add_argument(
        "--backend",
        choices=("local", "docker"),
        default="local",
        help="where test filters run: local (venv + pytest in bubblewrap) or docker (official images)",
    )
    _add_local_backend_options(run)
    run.set_defaults(run=_run)

    localize = commands.add_parser(
        "localize",
        help="file and element localization only, with a report against gold patches",
        description="Stages 1-2. Without --model the ranking is model-free (BM25 plus boosts for paths, "
        "modules, stack frames and names the issue mentions).",
        epilog="example: swerl agentless localize --dataset lite_dev.parquet --clones ~/mirrors --offline "
        "--out runs/loc-dev",
    )
    _add_data_options(localize)
    _add_model_options(localize, required=False)
    _add_run_options(localize)
    localize.set_defaults(run=_run_localize)

    report = commands.add_parser(
        "report",
        help="localization report of a run directory against the instances' gold patches",
        description="file hit@1/@3/@5, element coverage and line coverage (see docs/agentless.md).",
        epilog="example: swerl agentless report --dataset lite_dev.parquet --out runs/loc-dev --json",
    )
    _add_data_options(report)
    report.add_argument("--out", required=True, type=existing_dir, help="the run directory")
    report.add_argument("--json", action="store_true", help="print per-instance rows as JSON lines too")
    report.set_defaults(run=_run_report)

    evaluate = commands.add_parser(
        "evaluate",
        help="judge predictions as the SWE-bench harness does: locally, or with its Docker images",
        description="--backend local (default): the SWE-bench harness's rules on this machine, no Docker (a "
        "fresh checkout per instance, the harness's patch commands, its test command, log parser and "
        "grading from the swebench package); writes OUT/report.json, OUT/logs/<id>/ and, for gold, "
        "OUT/env_failures.json. --backend docker: `python -m swebench.harness.run_evaluation` (swebench "
        "5.x) with a fresh run id.",
        epilog="example: swerl agentless evaluate --dataset lite_dev.parquet --predictions gold "
        "--clones ~/mirrors --out runs/eval-gold",
    )
    _add_data_options(evaluate)
    evaluate.add_argument(
        "--predictions",
        required=True,
        type=local_or_name,
        help="predictions file (.jsonl or .json), or gold (the instances' patches) or empty (no patch)",
    )
    evaluate.add_argument(
        "--backend",
        choices=("local", "docker"),
        default="local",
        help="local: the harness's rules in a fresh checkout here (no Docker); docker: the harness itself",
    )
    evaluate.add_argument(
        "--workers",
        "--max-workers",
        type=positive_int,
        default=1,
        dest="workers",
        help="instances judged at once (each runs its tests in its own checkout)",
    )
    evaluate.add_argument(
        "--out", type=output_dir, default=Path("runs/agentless-eval"), help="local backend: report and logs"
    )
    again = evaluate.add_mutually_exclusive_group()
    again.add_argument(
        "--resume",
        action="store_true",
        help="local backend: keep OUT's verdicts and judge only the instances it has none for (or a "
        "different patch); errors are judged again",
    )
    again.add_argument(
        "--overwrite", action="store_true", help="local backend: remove OUT's earlier evaluation first"
    )
    evaluate.add_argument(
        "--env-failures",
        type=existing_file,
        metavar="FILE",
        help="local backend: env_failures.json of a gold run; the report adds the verdict without them",
    )
    _add_local_backend_options(evaluate)
    evaluate.set_defaults(run=_run_evaluate)

    demo = commands.add_parser(
        "demo",
        help="build a tiny offline SWE-bench-style instance (git repo, issue, tests, gold patch)",
        description="Writes DIR/instances.jsonl and DIR/clones/ and prints a command that runs on them.",
        epilog="example: swerl agentless demo --dir runs/agentless-demo",
    )
    demo.add_argument(
        "--dir", type=output_dir, default=Path("runs/agentless-demo"), help="where to write the instance"
    )
    demo.set_defaults(run=_run_demo)


# -- helpers --------------------------------------------------------------------------------------------


_LOCAL_DATASET = "pass a local .parquet/.jsonl file in the SWE-bench schema"


def _instances(args: argparse.Namespace) -> list[Any]:
    from swerl.execution.instances import DATASET_ALIASES, load_instances

    if not Path(args.dataset).exists():
        # Not a file: a hub dataset id or alias, which needs the network. Each way this can fail is said in
        # one line before any hub lookup, whose retries take minutes without a network.
        name = DATASET_ALIASES.get(args.dataset.lower(), args.dataset)
        if Path(args.dataset).suffix.lower() in {".parquet", ".jsonl", ".json", ".ndjson"}:
            raise UserError(f"--dataset {args.dataset}: no such file")
        if "/" not in name:
            raise UserError(
                f"--dataset {args.dataset}: no such file, and not a hub dataset id (owner/name) or alias "
                f"({', '.join(DATASET_ALIASES)})"
            )
        if getattr(args, "offline", False):
            raise UserError(
                f"--dataset {args.dataset}: a hub dataset needs the network, and --offline was given; "
                f"{_LOCAL_DATASET}"
            )
        from swerl.hub import unreachable_hub_dataset

        problem = unreachable_hub_dataset(name, _LOCAL_DATASET)
        if problem:
            raise UserError(f"--dataset {args.dataset}: {problem}")
    return load_instances(args.dataset, split=args.split, instance_ids=args.instance_ids)


def _context(args: argparse.Namespace, sampler: Any, backend: Any) -> Any:
    from agentless.localize.index import IndexCache
    from agentless.pipeline import Context
    from swerl.git.clones import RepoCache

    repos = RepoCache(args.cache_dir / "repos", mirror_dir=args.clones, offline=args.offline)
    _record_repo_options(args)
    return Context(
        repos=repos, indexes=IndexCache(repos, args.cache_dir / "index"), sampler=sampler, backend=backend
    )


REPO_OPTIONS_FILE = "repo_options.json"


def _record_repo_options(args: argparse.Namespace) -> None:
    """OUT/repo_options.json: where this run found its repositories, so `report` on the same --out reads
    them from the same place (it cloned from GitHub, or failed offline, when not told again)."""
    args.out.mkdir(parents=True, exist_ok=True)
    recorded = {
        "cache_dir": str(args.cache_dir.resolve()),
        "clones": str(args.clones.resolve()) if args.clones else None,
        "offline": args.offline,
    }
    (args.out / REPO_OPTIONS_FILE).write_text(json.dumps(recorded, indent=2) + "\n", encoding="utf-8")


def _reuse_repo_options(args: argparse.Namespace) -> None:
    """The run's recorded --cache-dir, --clones and --offline, for each of them left at its default."""
    path = args.out / REPO_OPTIONS_FILE
    if not path.is_file():
        return
    recorded = load_json(path)
    if args.cache_dir == absolute(DEFAULT_CACHE):
        args.cache_dir = Path(recorded.get("cache_dir") or DEFAULT_CACHE)
    if args.clones is None and recorded.get("clones"):
        args.clones = Path(recorded["clones"])
    args.offline = args.offline or bool(recorded.get("offline"))


def _sampler(args: argparse.Namespace) -> Any:
    if not args.model:
        return None
    from agentless.sampling import EngineSampler
    from swerl.hub import model_problem

    # With a server, --model is the served model's name and only a tokenizer is loaded here.
    serving = bool(args.openai_base_url)
    loaded = [("--tokenizer", args.tokenizer, True)]
    if not (serving and args.tokenizer):
        loaded.append(("--model", args.model, serving))
    for option, name, tokenizer in loaded:
        problem = name and model_problem(name, tokenizer=tokenizer)
        if problem:
            raise UserError(f"{option}: {problem}")
    context = None
    if args.openai_base_url:
        from transformers import AutoTokenizer

        from swerl.rollout.openai_client import OpenAIEngine

        tokenizer = AutoTokenizer.from_pretrained(args.tokenizer or args.model)
        context = _local_context(args.tokenizer or args.model)
        engine = OpenAIEngine(
            args.openai_base_url, args.model, protocol=args.openai_protocol, tokenizer=tokenizer
        )
    else:
        from swerl.models.loading import load_model_and_tokenizer
        from swerl.rollout.hf import HFEngine

        model, tokenizer = load_model_and_tokenizer(args.model, dtype=args.dtype, device=args.device)
        if args.tokenizer:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
        engine = HFEngine(model, tokenizer)
        positions = getattr(model.config, "max_position_embeddings", None)
        context = positions if isinstance(positions, int) else None
    longest = max(getattr(args, "max_new_tokens", 0), getattr(args, "localize_max_new_tokens", 0))
    if context is not None and longest >= context:
        print(
            f"swerl: warning: answers of up to {longest} new tokens do not fit {args.model}'s context of "
            f"{context} positions: each stops where prompt and answer fill it",
            file=sys.stderr,
        )
    return EngineSampler(engine, tokenizer, max_prompt_tokens=args.max_prompt_tokens, context=context)


def _local_context(name: str) -> int | None:
    """The context (`max_position_embeddings`) of the model whose local folder also gives the tokenizer.

    The OpenAI API has no field that tells a model's context. Where the folder holds the model's
    `config.json` (the served checkpoint itself), that context bounds prompt and answer as in process: a
    prompt the model cannot hold is skipped rather than sent. A hub id or a tokenizer-only folder leave it
    to the server.
    """
    config = Path(name) / "config.json"
    if not config.is_file():
        return None
    positions = load_json(config).get("max_position_embeddings")
    return positions if isinstance(positions, int) and positions > 0 else None


def _backend(args: argparse.Namespace) -> Any:
    if not (args.regression or args.regression_from_gold_pass_to_pass or args.reproduction):
        return None
    if args.backend == "docker":
        from swerl.execution.docker import DockerBackend

        return DockerBackend()
    return _local_backend(args)


def _local_backend(args: argparse.Namespace) -> Any:
    from swerl.execution.local import RunLimits, cached_backend

    return cached_backend(
        args.cache_dir,
        clones=args.clones,
        offline=args.offline,
        env_specs=args.env_specs,
        python=args.python,
        wheelhouse=args.wheelhouse,
        isolation="none" if args.unsafe_no_isolation else "bwrap",
        timeout_s=args.test_timeout_s,
        limits=RunLimits(memory_mb=args.test_memory_mb, cpu_s=args.test_cpu_s),
    )


def _config(args: argparse.Namespace, **extra: Any) -> Any:
    from agentless.pipeline import RunConfig

    if args.dense:
        from agentless.localize.dense import load_wordllama

        load_wordllama()  # a missing package is one line now, not a failed row per instance
    return RunConfig(
        top_files=args.top_files,
        element_files=args.element_files,
        dense=args.dense,
        context_files=args.context_files,
        num_elements=args.num_elements,
        model_localization=not args.no_model_localization and bool(args.model),
        seed=args.seed,
        **extra,
    )


# -- commands -------------------------------------------------------------------------------------------


def _local_model(args: argparse.Namespace) -> None:
    """--model as the path it names (absolute, like every path of the command line), unless a server
    is given: then it is the served model's name, which the server matches as written."""
    if args.model and not args.openai_base_url:
        args.model = local_or_name(args.model)


def _run(args: argparse.Namespace) -> int:
    from agentless.pipeline import claim_stages, run, run_localization, stage_path
    from agentless.stages import StageFile
    from swerl.execution.dispatch import Dispatch

    _local_model(args)
    if args.regression_model_filter and not (args.regression or args.regression_from_gold_pass_to_pass):
        raise UserError("--regression-model-filter filters the tests of --regression: add --regression")
    if args.reproduction_samples is not None and not args.reproduction:
        raise UserError(
            "--reproduction-samples sets how many tests --reproduction samples: add --reproduction"
        )
    has_tests = args.regression or args.regression_from_gold_pass_to_pass or args.reproduction
    if args.feedback_turns and not has_tests:
        raise UserError(
            "--feedback-turns feeds back the failures of the tests a deployment has: add --regression "
            "and/or --reproduction"
        )
    for flag, given in (
        ("--feedback-workers", args.feedback_workers != 1),
        ("--feedback-engine", args.feedback_engine != "threads"),
    ):
        if given and not args.feedback_turns:
            raise UserError(f"{flag} sets where the tests of --feedback-turns run: add --feedback-turns")
    instances = _instances(args)
    if not args.model:
        print(
            "no --model: localization only (stages 1-2, model-free); pass --model to repair", file=sys.stderr
        )
        cfg = _config(args)
        hold_folder(args.out, "agentless run")  # a second run into the same --out stops at once
        run_localization(instances, args.out, _context(args, None, None), cfg)
        return _print_report(args, instances, as_json=False)
    cfg = _config(
        args,
        model_name=args.model_name or args.model,
        num_samples=args.num_samples,
        temperature=args.temperature,
        max_new_tokens=args.max_new_tokens,
        localize_max_new_tokens=args.localize_max_new_tokens,
        prompt_style=args.prompt_style,
        regression=args.regression or args.regression_from_gold_pass_to_pass,
        regression_from_gold=args.regression_from_gold_pass_to_pass,
        regression_model_filter=args.regression_model_filter,
        reproduction=args.reproduction,
        feedback_turns=args.feedback_turns,
        **({"reproduction_samples": args.reproduction_samples} if args.reproduction_samples else {}),
    )
    hold_folder(args.out, "agentless run")
    # Stage rows of other options are refused before the model loads.
    claim_stages(args.out, cfg, cfg.stages())
    ctx = _context(args, _sampler(args), _backend(args))
    ctx.feedback_dispatch = Dispatch(args.feedback_engine, args.feedback_workers)
    predictions = run(instances, args.out, ctx, cfg)
    with predictions.open(encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    non_empty = sum(1 for r in rows if r["model_patch"])
    repair = StageFile(stage_path(args.out, "repair")).by_id()
    skipped = sorted(i for i, row in repair.items() if row.get("skipped"))
    said = (
        f"; {len(skipped)} skipped, prompt too long (e.g. {skipped[0]}: {repair[skipped[0]]['skipped']})"
        if skipped
        else ""
    )
    print(f"wrote {predictions}: {len(rows)} predictions, {non_empty} with a patch{said}", file=sys.stderr)
    return 0


def _run_localize(args: argparse.Namespace) -> int:
    from agentless.pipeline import claim_stages, run_localization

    _local_model(args)
    instances = _instances(args)
    cfg = _config(args, model_name=args.model or "")
    hold_folder(args.out, "agentless run")  # a second run into the same --out stops at once
    claim_stages(args.out, cfg, ["localize_files", "localize_elements"])  # before a model loads
    run_localization(instances, args.out, _context(args, _sampler(args), None), cfg)
    _fail_if_every_instance_failed(args.out, "localize_files")
    return _print_report(args, instances, as_json=False)


def _fail_if_every_instance_failed(out: Path, stage: str) -> None:
    """A run in which no instance got through `stage` is a failure (exit 1, its first cause shown), not a
    report of zeros."""
    from agentless.pipeline import stage_path
    from agentless.stages import StageFile

    rows = list(StageFile(stage_path(out, stage)).by_id().values())
    errors = [row["stage_error"] for row in rows if "stage_error" in row]
    if rows and len(errors) == len(rows):
        raise UserError(f"{stage} failed for every instance ({len(rows)}); the first: {errors[0]}")


def _run_report(args: argparse.Namespace) -> int:
    from agentless.pipeline import stage_path

    if not stage_path(args.out, "localize_files").exists():
        raise UserError(
            f"--out {args.out}: no {stage_path(args.out, 'localize_files').name} there; give the --out of "
            "a `swerl agentless run` or `localize`"
        )
    _reuse_repo_options(args)
    return _print_report(args, _instances(args), as_json=args.json)


def _print_report(args: argparse.Namespace, instances: list[Any], *, as_json: bool) -> int:
    from agentless.pipeline import stage_path
    from agentless.report import format_summary, missed_instance, score_instance, summarize
    from agentless.stages import StageFile
    from swerl.git.clones import RepoCache

    if not any(inst.patch for inst in instances):
        # Rows of another kind (the data pipeline's) have no gold patch: a report of zeros would read
        # as a localizer that found nothing.
        print(
            f"no gold patch among the {len(instances)} instances: nothing to score the localization against"
        )
        return 0
    repos = RepoCache(args.cache_dir / "repos", mirror_dir=args.clones, offline=args.offline)
    files = StageFile(stage_path(args.out, "localize_files")).by_id()
    elements = StageFile(stage_path(args.out, "localize_elements")).by_id()
    if files and not any(inst.instance_id in files for inst in instances):
        # Another dataset than the run's: a report of zeros would read as a localizer that found nothing.
        raise UserError(
            f"none of the {len(instances)} instances of --dataset was localized in {args.out} (it holds "
            f"{len(files)}, e.g. {next(iter(files))}): give the dataset the run was made from"
        )
    results = []
    errors = [i for i, row in {**files, **elements}.items() if "stage_error" in row]
    unseen = [inst.instance_id for inst in instances if inst.patch and inst.instance_id not in files]
    for inst in instances:
        if not inst.patch or inst.instance_id not in files:
            continue
        row_f, row_e = files[inst.instance_id], elements.get(inst.instance_id, {})
        if "stage_error" in row_f:
            # Nothing was localized (often: the repository itself is unavailable, so reading the gold
            # files would fail too): a miss on every measure.
            result = missed_instance(inst.instance_id, inst.patch)
            results.append(result)
            if as_json:
                print(json.dumps(result.__dict__))
            continue
        result = score_instance(
            inst.instance_id,
            inst.patch,
            row_f.get("files", []),
            row_e.get("elements", []),
            row_e.get("edit_locations", []),
            lambda p, inst=inst: repos.read_file(inst.repo, inst.base_commit, p),
        )
        if result is not None:
            results.append(result)
            if as_json:
                print(json.dumps(result.__dict__))
    print(format_summary(summarize(results)))
    if errors:
        print(f"{len(errors)} with a stage error (scored as misses): {', '.join(sorted(errors)[:10])}")
    if unseen:
        print(f"{len(unseen)} not localized in {args.out}, not scored: {', '.join(unseen[:10])}")
    return 0


def _run_evaluate(args: argparse.Namespace) -> int:
    from swerl.execution.evaluate import (
        GoldChecks,
        evaluate_local,
        evaluate_official,
        predictions_for,
        prepare_out_dir,
    )
    from swerl.execution.instances import DATASET_ALIASES

    if args.backend == "docker":
        dataset = DATASET_ALIASES.get(args.dataset.lower(), args.dataset)
        run_id, status = evaluate_official(
            args.predictions,
            dataset=dataset,
            split=args.split,
            max_workers=args.workers,
            instance_ids=args.instance_ids or (),
        )
        print(f"harness run id: {run_id} (exit status {status})", file=sys.stderr)
        return status
    from swerl.execution.harness import harness_api

    harness_api()  # grading needs the swebench package: say so before reading anything
    prepare_out_dir(args.out, overwrite=args.overwrite, resume=args.resume)
    instances = _instances(args)
    known = None
    if args.env_failures is not None:
        known = load_json(args.env_failures)
    backend = _local_backend(args)
    report = evaluate_local(
        instances,
        predictions_for(args.predictions, instances),
        backend,
        args.out,
        workers=args.workers,
        env_failures=known,
        resume=args.resume,
        gold_checks=GoldChecks(backend, args.cache_dir / "gold"),
    )
    submitted = report["submitted_instances"]
    cannot = report["cannot_judge_instances"]
    print(
        f"resolved {report['resolved_instances']}/{submitted} strictly, "
        f"{report['resolved_without_env_failures']}/{submitted} leaving out the tests listed as environment "
        f"failures ({len(report['env_failure_ids'])} instances have some); "
        f"{cannot} cannot be judged here (the gold patch does not resolve here), "
        f"{report['undecidable_instances']} of them undecidable (a fail-to-pass test cannot run here); "
        f"{len(report['empty_patch_ids'])} empty patches, {len(report['error_ids']) - cannot} other errors; "
        f"report: {args.out / 'report.json'}"
    )
    return 0


def _run_demo(args: argparse.Namespace) -> int:
    from agentless.demo import build_demo

    instance, clones = build_demo(args.dir)
    print(f"instance {instance.instance_id} in {args.dir / 'instances.jsonl'}, clone in {clones}")
    # The hint's --out is localization's own: `agentless run --model` into DIR/run (docs/agentless.md's
    # next command) would refuse stage rows that were made without a model.
    print(
        f"try: swerl agentless localize --dataset {args.dir / 'instances.jsonl'} --clones {clones} --offline "
        f"--cache-dir {args.dir / 'cache'} --out {args.dir / 'loc'}"
    )
    return 0
