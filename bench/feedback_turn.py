"""A feedback turn's cost against the bare test run it makes (`swerl agentless run --feedback-turns`).

On a real SWE-bench row, a wrong answer (the gold patch's first file with an unrelated comment added:
it applies and fixes nothing) is taken through one turn's work, as the feedback stage does it: its
public tests run through the turn's machinery (`agentless.repair.turns.give_feedback`: distinct patches
once, infrastructure errors retried and left out), the failures rendered as the feedback, the dialog
that follows (the repair prompt, the answer, the feedback) tokenized with the model's chat template, and
the episode's row serialized as the stage saves it. The floor is the bare run of the same tests on the
same patch: `LocalBackend.run_tests` called directly. The public tests are the repository's tests of
the gold patch's modules that pass at the base and the row's FAIL_TO_PASS tests (with its test patch),
so the answer fails some and the feedback has tracebacks to show. Alternated, after a warm-up; medians
of `--repeat` rounds. The goal is at most 1.3x.

    python bench/feedback_turn.py --dataset SWE-bench_Lite_test.parquet --clones DIR \
        --cache-dir runs/agentless-cache --tokenizer MODEL_DIR --instance-ids pallets__flask-4992
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from transformers import AutoTokenizer

from agentless.repair import turns
from agentless.rerank.select import passing_at_base, related_test_files
from agentless.sampling import prompt_ids
from swerl.edit_format import build_git_patch, build_messages, patch_paths
from swerl.execution.instances import Instance, load_instances
from swerl.execution.local import LocalBackend, cached_backend


def wrong_answer(backend: LocalBackend, instance: Instance) -> tuple[str, dict[str, str]]:
    """(a patch that applies and fixes nothing, the files it touches at the base)."""
    path = patch_paths(instance.patch)[0]
    old = backend.repos.read_file(instance.repo, instance.base_commit, path) or ""
    return build_git_patch({path: old}, {path: old + "\n# unrelated\n"}), {path: old}


def public_tests(backend: LocalBackend, instance: Instance) -> turns.PublicTests:
    paths = [e.path for e in backend.repos.files_at(instance.repo, instance.base_commit)]
    related = related_test_files(paths, patch_paths(instance.patch))
    _, passing = passing_at_base(instance, backend, related)
    return turns.PublicTests((*passing, *instance.fail_to_pass), (), instance.test_patch)


def one_turn(
    backend: LocalBackend,
    instance: Instance,
    tests: turns.PublicTests,
    patch: str,
    prompt: list[dict[str, str]],
    tokenizer: object,
) -> tuple[float, str, int]:
    """(seconds, the feedback, dialog tokens) of one turn's work on `patch`."""
    start = time.perf_counter()
    turn = {"answer": "answer", "patch": patch, "paths": [], "error": None, "message": ""}
    episode = {"index": 0, "temperature": 0.0, "stopped": None, "turns": [turn]}
    turns.give_feedback(instance, backend, tests, [episode], max_turns=2)
    ids = prompt_ids(tokenizer, turns.dialog(prompt, episode))
    json.dumps({"instance_id": instance.instance_id, "episodes": [episode]})
    seconds = time.perf_counter() - start
    return seconds, str(episode["turns"][-1].get("feedback")), len(ids)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--clones", type=Path, required=True)
    parser.add_argument("--cache-dir", type=Path, default=Path("runs/agentless-cache"))
    parser.add_argument("--tokenizer", required=True, help="a model folder (its chat template)")
    parser.add_argument("--instance-ids", nargs="+", required=True)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--show-feedback", action="store_true", help="print each instance's feedback text")
    args = parser.parse_args()
    backend = cached_backend(args.cache_dir, clones=args.clones, offline=True)
    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    columns = ["instance", "public tests", "failed", "feedback tokens", "dialog tokens", "turn, median s"]
    columns += ["bare run, median s", "ratio"]
    print(f"| {' | '.join(columns)} |")
    print("|---|---|---|---|---|---|---|---|")
    for instance in load_instances(args.dataset, instance_ids=args.instance_ids):
        patch, files = wrong_answer(backend, instance)
        tests = public_tests(backend, instance)
        ids = [*tests.regression, *tests.reproduction]
        prompt = build_messages(instance.problem_statement, files)
        backend.run_tests(instance, ids, [patch, tests.reproduction_patch])  # warm
        turn_s, bare_s = [], []
        failed = 0
        dialog_tokens, feedback = 0, ""
        for _ in range(args.repeat):
            start = time.perf_counter()
            run = backend.run_tests(instance, ids, [patch, tests.reproduction_patch])
            bare_s.append(time.perf_counter() - start)
            failed = len(tests.failures(run))
            seconds, feedback, dialog_tokens = one_turn(backend, instance, tests, patch, prompt, tokenizer)
            turn_s.append(seconds)
        t, b = statistics.median(turn_s), statistics.median(bare_s)
        feedback_tokens = len(tokenizer(feedback, add_special_tokens=False)["input_ids"])
        print(
            f"| {instance.instance_id} | {len(ids)} | {failed} | {feedback_tokens} | {dialog_tokens} | "
            f"{t:.2f} | {b:.2f} | {t / b:.2f}x |",
            flush=True,
        )
        if args.show_feedback:
            print(f"\n{feedback}\n", flush=True)


if __name__ == "__main__":
    main()
