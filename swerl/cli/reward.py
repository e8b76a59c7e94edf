"""`swerl reward ...`: score answers with the SWE-RL similarity reward, the tests (execution), or both."""

from __future__ import annotations

import argparse
import json
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from swerl.cli.args import existing_dir, existing_file, output_dir, output_file, positive_int, unit_interval
from swerl.errors import UserError

SAMPLE = "reward_sample.jsonl"
# Kept equal to swerl.reward.similarity.DEFAULT_MAX_DIFF_CHARS (a test checks): importing the reward here
# would load it for every command's --help.
DEFAULT_MAX_DIFF_CHARS = 200_000


def _cap(value: str) -> int | None:
    """--max-diff-chars: a positive size, or none/off/0 for no cap."""
    if value.lower() in {"none", "0", "off"}:
        return None
    try:
        cap = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a size in characters or 'none', got {value!r}") from None
    if cap < 0:
        raise argparse.ArgumentTypeError(
            f"must be a number of characters (0 for no cap) or 'none', got {value}"
        )
    return cap


def _add_reward_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--strict",
        action="store_true",
        help="tighten the format: every search must match exactly once and name a file in the context "
        "(the paper's reward, the default, allows replace-all and new files)",
    )
    parser.add_argument(
        "--max-diff-chars",
        type=_cap,
        default=DEFAULT_MAX_DIFF_CHARS,
        metavar="N",
        help="files whose predicted or oracle diff exceeds N characters score 0 "
        f"(default {DEFAULT_MAX_DIFF_CHARS:,}; 'none', 'off' or 0 disables the cap)",
    )
    parser.add_argument(
        "--workers",
        type=positive_int,
        default=None,
        metavar="N",
        help="processes to use (default: all cores; one for inputs under 256 rows)",
    )


def _add_execution_options(parser: argparse.ArgumentParser) -> None:
    from swerl.cli.agentless import DEFAULT_CACHE, _add_local_backend_options

    group = parser.add_argument_group("execution reward")
    group.add_argument(
        "--reward",
        choices=("similarity", "execution", "hybrid"),
        default="similarity",
        help="similarity: the SWE-RL reward; execution: the row's FAIL_TO_PASS/PASS_TO_PASS tests judged as "
        "`swerl agentless evaluate` judges (1 resolved, 0 not, -1 malformed; null and an error for a row "
        "that cannot be executed); hybrid: execution where the row is executable, similarity elsewhere "
        "(each row's `reward_kind` says which)",
    )
    group.add_argument(
        "--shaping",
        choices=("none", "fail_to_pass"),
        default="none",
        help="execution: fail_to_pass gives an unresolved answer that breaks no PASS_TO_PASS test the share "
        "of FAIL_TO_PASS tests it passes",
    )
    group.add_argument(
        "--execution-workers", type=positive_int, default=1, metavar="N", help="test runs at once"
    )
    group.add_argument(
        "--execution-engine",
        choices=("threads", "ray"),
        default="threads",
        help="threads: the tests run on this machine; ray: each distinct answer of a row is a Ray task of "
        "one CPU (the cluster of RAY_ADDRESS, else a local instance of --execution-workers CPUs; "
        "pip install 'swerl[ray]')",
    )
    group.add_argument(
        "--execution-min-test-strength",
        type=unit_interval,
        metavar="X",
        help="a row whose test_strength (swerl data validate --mutants: the share of altered gold patches "
        "its tests reject) is below X, or that has none, is not executable (weak_tests): reward null under "
        "--reward execution, the similarity reward under hybrid (default: off)",
    )
    group.add_argument(
        "--execution-strength-weight",
        action="store_true",
        help="a resolved answer earns its row's test_strength instead of 1 (a row without one: 1)",
    )
    group.add_argument(
        "--cache-dir",
        type=output_dir,
        default=DEFAULT_CACHE,
        help=f"bare repository mirrors and test environments (default: {DEFAULT_CACHE})",
    )
    group.add_argument(
        "--clones", type=existing_dir, metavar="DIR", help="directory of existing clones to mirror from"
    )
    group.add_argument("--offline", action="store_true", help="never contact GitHub")
    group.add_argument("--log-dir", type=output_dir, metavar="DIR", help="keep each test run's log here")
    _add_local_backend_options(parser)


def register(groups: argparse._SubParsersAction) -> None:
    group = groups.add_parser(
        "reward",
        help="score model answers with the SWE-RL similarity reward or the execution reward",
        description="The SWE-RL reward: -1 for a malformed answer, else the difflib similarity between the "
        "predicted and the developers' diffs, averaged over changed files. The execution reward "
        "(--reward execution|hybrid): the row's tests, 1 resolved, 0 not, -1 malformed.",
    )
    commands = group.add_subparsers(dest="command", metavar="SUBCOMMAND", required=True)

    score = commands.add_parser(
        "score",
        help="score a JSONL or Parquet file of answers",
        description="Read rows with `output` (the model's answer), `code_context` and `oracle_new_content` "
        "(path -> file content, as an object, JSON string, Parquet map or list of {path, content}) and write "
        "each row back with `reward` and `reward_info` (the error kind, or per-file similarities; a JSON "
        "string in Parquet). A bad row gets reward null and an error; no row is ever dropped. The output "
        "appears only when complete. An input with no rows, or in which no row could be scored (a file of "
        "another kind, missing columns), is an error and writes nothing. --reward execution reads rows in "
        "SWE-bench's schema (instance_id, repo, base_commit, FAIL_TO_PASS, PASS_TO_PASS, test_patch) whose "
        "answer is `model_patch` (a unified diff) or `output`; reward_info then says resolved or why not "
        "(e.g. empty_patch, witness_veto).",
        epilog="example: swerl reward score --input answers.jsonl --output scored.jsonl --workers 2\n"
        "         swerl reward score --reward hybrid --input rows.jsonl --output scored.jsonl "
        "--clones ~/mirrors --offline",
    )
    score.add_argument(
        "--input", required=True, type=existing_file, help="rows to score (.jsonl or .parquet)"
    )
    score.add_argument(
        "--output", required=True, type=output_file, help="where to write (same format as input)"
    )
    score.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_reward_options(score)
    _add_execution_options(score)
    score.set_defaults(run=_run_score)

    demo = commands.add_parser(
        "demo",
        help="score the bundled sample answers and explain each reward",
        description="Score the sample that ships with swerl (one issue, several answers from perfect to "
        "malformed) and print what the reward said about each.",
        epilog="example: swerl reward demo",
    )
    demo.add_argument(
        "--output",
        type=output_file,
        default=Path("runs/reward-demo/scored.jsonl"),
        help="where to write the rows",
    )
    _add_reward_options(demo)
    demo.set_defaults(run=_run_demo)


def _config(args: argparse.Namespace) -> Any:
    from swerl.reward.similarity import RewardConfig

    return RewardConfig(strict=args.strict, max_diff_chars=args.max_diff_chars)


def _refuse_execution_options(args: argparse.Namespace) -> None:
    """The similarity reward runs no test, so an option that changes how tests pay would be silently
    ignored: the user would read similarity scores as if the option had acted."""
    given = [
        flag
        for flag, on in (
            ("--shaping", args.shaping != "none"),
            ("--execution-min-test-strength", args.execution_min_test_strength is not None),
            ("--execution-strength-weight", args.execution_strength_weight),
            ("--execution-engine", args.execution_engine != "threads"),
        )
        if on
    ]
    if given:
        raise UserError(
            f"{' and '.join(given)} {'act' if len(given) > 1 else 'acts'} on the tests, which "
            "--reward similarity (the default) does not run: add --reward execution or --reward hybrid"
        )


def _run_score(args: argparse.Namespace) -> int:
    from swerl.reward.files import score_file

    if args.output.exists() and args.output.resolve() == args.input.resolve():
        raise UserError(f"--output {args.output} is the --input file; write the scores to another file")
    if args.reward == "similarity":
        _refuse_execution_options(args)
    else:
        from swerl.cli.agentless import _local_backend
        from swerl.reward.execution import ExecutionReward
        from swerl.reward.hybrid import score_file_mixed

        execution = ExecutionReward(
            _local_backend(args),
            shaping=args.shaping,
            workers=args.execution_workers,
            log_dir=args.log_dir,
            engine=args.execution_engine,
            min_test_strength=args.execution_min_test_strength,
            strength_weight=args.execution_strength_weight,
        )
        summary = score_file_mixed(args.input, args.output, args.reward, _config(args), execution)
        print(summary.report(), file=sys.stderr)
        print(f"wrote {args.output}", file=sys.stderr)
        return 0
    summary = score_file(
        args.input, args.output, _config(args), workers=args.workers, progress=not args.quiet
    )
    print(summary.report(), file=sys.stderr)
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


def _run_demo(args: argparse.Namespace) -> int:
    from swerl.reward.files import score_file

    with resources.as_file(resources.files("swerl.data") / SAMPLE) as sample:
        summary = score_file(sample, args.output, _config(args), workers=args.workers, progress=False)
    with args.output.open(encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    print(f"{'answer':<28} {'reward':>7}  why")
    for row in rows:
        info = row["reward_info"]
        if "error" in info:
            why = f"malformed: {info['error']}"
        else:
            why = ", ".join(f"{path} {sim:.3f}" for path, sim in info["similarities"].items())
        print(f"{row.get('name', '?'):<28} {row['reward']:>7.3f}  {why}")
    print(summary.report())
    print(f"wrote {args.output}")
    return 0
