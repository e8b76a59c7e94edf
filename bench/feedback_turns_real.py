"""Feedback turns on real SWE-bench Lite rows, with a scripted model whose answers are known.

A small model's answers rarely parse, so they cannot show what the feedback stage does with a patch. Here
the model is a script: its first repair answer applies and fixes nothing (the gold patch's first file
with a comment added), its reproduction test is written here from the issue (one per instance, as a
model would write it), and any answer after a feedback turn is the gold patch as SEARCH/REPLACE edits.
The run is `agentless.pipeline.run` with `--regression --reproduction --feedback-turns 2`, as the CLI
runs it: real regression tests chosen and run at the base, the reproduction test kept if it fails there,
the first answers' real pytest runs rendered as feedback, the answers to it run again, rerank over the
last answers. Prints each instance's turns and the prediction's verdict of the local harness.

    python bench/feedback_turns_real.py --dataset SWE-bench_Lite_test.parquet --clones DIR \
        --cache-dir runs/agentless-cache --out runs/feedback-real
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from agentless.localize.index import IndexCache
from agentless.pipeline import Context, RunConfig, run, stage_path
from agentless.sampling import Messages, Sample
from swerl.edit_format import apply_patch_to_contents, patch_paths
from swerl.edit_format.inverse import canonical_answer
from swerl.execution.evaluate import evaluate_local, read_predictions
from swerl.execution.instances import Instance, load_instances
from swerl.execution.local import LocalBackend, cached_backend

REPRODUCTIONS = {
    "pallets__flask-4992": """\
import tomllib

import flask


def test_from_file_in_binary_mode(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('TEST_KEY = "foo"\\n')
    app = flask.Flask(__name__)
    assert app.config.from_file(str(path), tomllib.load, text=False)
    assert app.config["TEST_KEY"] == "foo"
""",
    "pytest-dev__pytest-7373": """\
pytest_plugins = "pytester"


TEMPLATE = "import pytest\\nskip = {}\\n@pytest.mark.skipif('skip')\\ndef test_{}():\\n    assert 0\\n"


def test_skipif_string_condition_is_evaluated_per_module(testdir):
    testdir.makepyfile(test_one=TEMPLATE.format(True, "a"), test_two=TEMPLATE.format(False, "b"))
    result = testdir.runpytest()
    result.assert_outcomes(skipped=1, failed=1)
""",
}


class ScriptedModel:
    """A `TextSampler` with the answers of the module docstring."""

    def __init__(self, backend: LocalBackend, instances: Sequence[Instance]) -> None:
        self.answers: dict[str, tuple[str, str, str]] = {}
        for inst in instances:
            paths = patch_paths(inst.patch)
            old = {p: backend.repos.read_file(inst.repo, inst.base_commit, p) or "" for p in paths}
            gold = apply_patch_to_contents(dict(old), inst.patch)
            first = paths[0]
            wrong = canonical_answer({first: old[first]}, {first: old[first] + "\n# unrelated\n"})
            reproduction = f"```python\n{REPRODUCTIONS[inst.instance_id]}```"
            self.answers[inst.problem_statement.strip()] = (wrong, canonical_answer(old, gold), reproduction)

    def sample(
        self, prompts: Sequence[Messages], *, n: int, temperature: float, max_new_tokens: int, seed: int
    ) -> list[list[Sample]]:
        return [[Sample(self._answer(m), "stop", temperature)] * n for m in prompts]

    def _answer(self, messages: Messages) -> str:
        first = messages[0]["content"] if messages[0]["role"] == "user" else messages[1]["content"]
        wrong, gold, reproduction = next(a for issue, a in self.answers.items() if issue in first)
        if "Write a pytest test file" in first:
            return reproduction
        return gold if any(m["role"] == "assistant" for m in messages) else wrong


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--clones", type=Path, required=True)
    parser.add_argument("--cache-dir", type=Path, default=Path("runs/agentless-cache"))
    parser.add_argument("--instance-ids", nargs="+", default=sorted(REPRODUCTIONS))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--feedback-turns", type=int, default=2, help="0: the same run without feedback")
    args = parser.parse_args()
    backend = cached_backend(args.cache_dir, clones=args.clones, offline=True)
    instances = load_instances(args.dataset, instance_ids=args.instance_ids)
    ctx = Context(
        repos=backend.repos,
        indexes=IndexCache(backend.repos, args.cache_dir / "index"),
        sampler=ScriptedModel(backend, instances),
        backend=backend,
    )
    cfg = RunConfig(
        model_name="scripted",
        num_samples=2,
        model_localization=False,
        regression=True,
        reproduction=True,
        reproduction_samples=1,
        feedback_turns=args.feedback_turns,
    )
    predictions = run(instances, args.out, ctx, cfg)
    report = evaluate_local(instances, read_predictions(predictions), backend, args.out / "eval")
    if args.feedback_turns == 0:
        print(f"resolved without feedback: {report['resolved_ids']}")
        return
    feedback = {
        row["instance_id"]: row
        for row in map(json.loads, stage_path(args.out, "feedback").read_text().splitlines())
    }
    rerank = {
        row["instance_id"]: row
        for row in map(json.loads, stage_path(args.out, "rerank").read_text().splitlines())
    }
    columns = ["instance", "public tests (regression + reproduction)", "answers per sample"]
    columns += ["first answers' failures", "stopped", "rerank group", "resolved"]
    print(f"| {' | '.join(columns)} |\n|{'---|' * len(columns)}")
    for inst in instances:
        row = feedback[inst.instance_id]
        tests = row["tests"]
        failed = sorted({len(e["turns"][0].get("tests", {}).get("failed", [])) for e in row["episodes"]})
        groups = rerank[inst.instance_id]["groups"]
        print(
            f"| {inst.instance_id} | {len(tests['regression'])} + {len(tests['reproduction'])} "
            f"| {[len(e['turns']) for e in row['episodes']]} | {failed} "
            f"| {sorted({e['stopped'] for e in row['episodes']})} "
            f"| {groups[0]['members'] if groups else None} "
            f"| {inst.instance_id in report['resolved_ids']} |"
        )


if __name__ == "__main__":
    main()
