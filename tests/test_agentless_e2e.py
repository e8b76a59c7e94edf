"""End to end on a real git repository built by the test: localize, repair, rerank, predictions, and
the prediction checked with the local backend (bubblewrap + pytest)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from agentless.demo import GOLD_ANSWER, build_demo
from agentless.localize.index import IndexCache
from agentless.pipeline import PREDICTION_KEYS, Context, RunConfig, run, stage_path
from agentless.rerank.select import PatchCandidate, select_patch
from agentless.sampling import EngineSampler
from swerl.edit_format import build_git_patch
from swerl.execution.envs import EnvManager
from swerl.execution.evaluate import evaluate_local, read_predictions
from swerl.execution.instances import Instance
from swerl.execution.local import LocalBackend
from swerl.git.clones import RepoCache
from swerl.rollout.base import Completion, SamplingParams
from swerl.sandbox.bwrap import isolation_available


class CharTokenizer:
    """Just enough tokenizer for a scripted engine: one id per character, a plain chat rendering."""

    def apply_chat_template(
        self, messages: list[dict[str, str]], tokenize: bool = False, add_generation_prompt: bool = True
    ) -> str:
        return "".join(f"<{m['role']}>\n{m['content']}\n" for m in messages) + "<assistant>\n"

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict[str, list[int]]:
        return {"input_ids": [ord(c) for c in text]}


class ScriptedEngine:
    """A `RolloutEngine` whose answers are a function of the prompt text (decoded from the char ids)."""

    def __init__(self, answer: Callable[[str, int], str]) -> None:
        self.answer = answer
        self.calls: list[SamplingParams] = []

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[list[Completion]]:
        self.calls.append(params)
        out = []
        for ids in prompts:
            text = "".join(chr(i) for i in ids)
            group = []
            for j in range(params.n):
                reply = self.answer(text, j + (0 if params.greedy else 1))
                group.append(Completion(list(ids), [1], [0.0], "stop", reply))
            out.append(group)
        return out

    def sync_weights(self, model: object) -> None:
        pass

    def close(self) -> None:
        pass


MALFORMED = "I think the bug is in mean."
UNKNOWN_PATH = GOLD_ANSWER.replace("calc/stats.py", "calc/nowhere.py")
NOT_FOUND = GOLD_ANSWER.replace("(len(values) - 1)", "(len(values) - 2)", 1)
FIXED_LINE = "    return total / len(values)\n"
EQUIVALENT = GOLD_ANSWER.replace(FIXED_LINE, FIXED_LINE.rstrip() + "  # fixed\n")
REPRO_TEST = "from calc.stats import mean\n\n\ndef test_repro():\n    assert mean([2, 4]) == 3\n"
PASSES_AT_BASE = "from calc.stats import median\n\n\ndef test_median():\n    assert median([1, 2, 3]) == 2\n"
SINGLE_VALUE = "from calc.stats import mean\n\n\ndef test_single():\n    assert mean([5]) == 5\n"
# Reproduction answers by sample: a real one, one that passes before any fix (not kept), prose (not
# parsed), a second real one.
REPRO_ANSWERS = [
    f"```python\n{t}```" if t.startswith("from") else t
    for t in (REPRO_TEST, PASSES_AT_BASE, "It fails.", SINGLE_VALUE)
]


def _repair_answer(prompt: str, sample: int) -> str:
    if "Which files would have to change" in prompt:
        return "```\ncalc/stats.py\n```"
    if "Which functions, methods or classes" in prompt:
        return "```\ncalc/stats.py\nfunction: mean\n```"
    if "could rightly fail after it" in prompt:  # the regression tests' model filter
        return "```\ntests/test_stats.py::test_empty\n```"
    if "Write a pytest test file" in prompt:
        return REPRO_ANSWERS[sample % len(REPRO_ANSWERS)]
    return [GOLD_ANSWER, MALFORMED, UNKNOWN_PATH, NOT_FOUND, EQUIVALENT, GOLD_ANSWER][sample % 6]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Instance, Path, Path]:
    root = tmp_path_factory.mktemp("demo")
    instance, clones = build_demo(root)
    return instance, clones, root


def _context(root: Path, clones: Path, engine: object, tokenizer: object, backend: bool) -> Context:
    repos = RepoCache(root / "cache" / "repos", mirror_dir=clones, offline=True)
    be = LocalBackend(repos, EnvManager(root / "envs")) if backend else None
    return Context(
        repos=repos,
        indexes=IndexCache(repos, root / "cache" / "index"),
        sampler=EngineSampler(engine, tokenizer),  # type: ignore[arg-type]
        backend=be,
        log=lambda _: None,
    )


needs_bwrap = pytest.mark.skipif(isolation_available() is not None, reason="bubblewrap unusable here")


@needs_bwrap
def test_scripted_engine_fixes_the_failing_test(demo: tuple[Instance, Path, Path], tmp_path: Path) -> None:
    instance, clones, root = demo
    engine = ScriptedEngine(_repair_answer)
    ctx = _context(root, clones, engine, CharTokenizer(), backend=True)
    cfg = RunConfig(
        model_name="scripted", num_samples=6, regression=True, regression_model_filter=True, reproduction=True
    )
    out = tmp_path / "run"
    predictions = run([instance], out, ctx, cfg)

    rows = [json.loads(line) for line in predictions.read_text().splitlines()]
    assert len(rows) == 1 and tuple(rows[0]) == PREDICTION_KEYS
    assert rows[0]["model_name_or_path"] == "scripted"
    assert "return total / len(values)" in rows[0]["model_patch"]

    files = json.loads(stage_path(out, "localize_files").read_text())
    assert files["files"][0] == "calc/stats.py"
    repair_row = json.loads(stage_path(out, "repair").read_text())
    assert repair_row["errors"] == {"tag_count": 1, "unknown_path": 1, "search_not_found": 1}
    rerank_row = json.loads(stage_path(out, "rerank").read_text())
    # The gold answer (twice) and the commented variant normalize to one group of three.
    assert rerank_row["groups"][0]["members"] == [0, 4, 5]
    assert rerank_row["groups"][0]["regression_failures"] == 0
    # The regression tests are the repository's own for the edited module, not the dataset's labels.
    assert rerank_row["regression_tests"] == ["tests/test_stats.py"]
    assert rows[0]["metadata"]["uses_gold_labels"] is False
    assert rows[0]["metadata"]["regression_model_filter"] is True
    assert (
        "regression tests left out by the model filter: tests/test_stats.py::test_empty"
        in rerank_row["notes"]
    )
    # 4 reproduction tests sampled, 3 parsed, 2 fail at the base and vote; the fix passes both.
    assert rerank_row["reproduction_kept"] == [0, 2]
    assert rerank_row["groups"][0]["reproduction_passed"] == 2
    assert rows[0]["metadata"]["reproduction_tests"] == {
        "sampled": 4,
        "parsed": 3,
        "kept": 2,
        "passed_by_chosen": 2,
    }
    repair_calls = [c for c in engine.calls if c.max_new_tokens == cfg.max_new_tokens]
    assert [(c.n, c.temperature) for c in repair_calls] == [(1, 0.0), (5, cfg.temperature)]

    preds = read_predictions(predictions)
    report = evaluate_local([instance], preds, ctx.backend, tmp_path / "eval")  # type: ignore[arg-type]
    assert report["resolved_ids"] == [instance.instance_id]


@needs_bwrap
def test_reproduction_consensus_outvotes_the_majority(demo: tuple[Instance, Path, Path]) -> None:
    """Two samples agree on a fix that breaks single values, one sample has the real fix: the majority
    vote picks the pair, the reproduction tests that fail at the base pick the fix that passes more."""
    instance, clones, root = demo
    ctx = _context(root, clones, ScriptedEngine(_repair_answer), CharTokenizer(), backend=True)
    path = "calc/stats.py"
    old = ctx.repos.read_file(instance.repo, instance.base_commit, path) or ""
    buggy = "    return total / (len(values) - 1)\n"
    half = old.replace(buggy, "    return total / len(values) if len(values) > 1 else 0.0\n")
    fixed = old.replace(buggy, FIXED_LINE)
    candidates = [
        PatchCandidate(i, build_git_patch({path: old}, {path: new}), {path: old}, {path: new})
        for i, new in enumerate([half, half, fixed])
    ]
    assert select_patch(instance, candidates).chosen == 0  # plain majority
    tests = [REPRO_TEST, PASSES_AT_BASE, SINGLE_VALUE]
    chosen = select_patch(instance, candidates, backend=ctx.backend, reproduction_tests=tests)
    assert chosen.chosen == 2
    assert chosen.reproduction_kept == [0, 2]  # the median test passes at the base: it cannot vote
    assert {g.group.representative: g.reproduction_passed for g in chosen.groups} == {0: 1, 2: 2}


def test_resume_skips_finished_instances(demo: tuple[Instance, Path, Path], tmp_path: Path) -> None:
    instance, clones, root = demo
    engine = ScriptedEngine(_repair_answer)
    ctx = _context(root, clones, engine, CharTokenizer(), backend=False)
    cfg = RunConfig(num_samples=2, model_localization=False)
    out = tmp_path / "run"
    run([instance], out, ctx, cfg)
    calls = len(engine.calls)
    sizes = {stage: stage_path(out, stage).stat().st_size for stage in ("repair", "rerank", "predictions")}
    run([instance], out, ctx, cfg)
    assert len(engine.calls) == calls  # nothing sampled again
    assert {stage: stage_path(out, stage).stat().st_size for stage in sizes} == sizes


def test_tiny_model_run_completes_with_valid_output(
    demo: tuple[Instance, Path, Path], tmp_path: Path
) -> None:
    from swerl.models.loading import load_model_and_tokenizer
    from swerl.models.tiny import build_tiny_model
    from swerl.rollout.hf import HFEngine

    instance, clones, root = demo
    model_dir = build_tiny_model(tmp_path / "tiny", hidden_size=32, intermediate_size=64, num_layers=1)
    model, tokenizer = load_model_and_tokenizer(model_dir)
    ctx = _context(root, clones, HFEngine(model, tokenizer), tokenizer, backend=False)
    cfg = RunConfig(
        model_name="tiny", num_samples=2, max_new_tokens=24, localize_max_new_tokens=16, top_files=3
    )
    predictions = run([instance], tmp_path / "run", ctx, cfg)
    rows = [json.loads(line) for line in predictions.read_text().splitlines()]
    assert [tuple(r) for r in rows] == [PREDICTION_KEYS]
    assert rows[0]["instance_id"] == instance.instance_id
    assert isinstance(rows[0]["model_patch"], str)
    repair_row = json.loads(stage_path(tmp_path / "run", "repair").read_text())
    assert len(repair_row["samples"]) == 2
    assert all(s["error"] for s in repair_row["samples"])  # random weights: malformed, and recorded


@needs_bwrap
def test_an_interpreter_under_tmp_stays_visible_in_the_sandbox(tmp_path: Path) -> None:
    """CI clones (and their venvs) may live under /tmp, where the sandbox mounts a fresh tmpfs: the
    interpreter's directories must be bound after it, or the tests cannot even start."""
    import shutil
    import subprocess
    import venv

    from swerl.execution.local import bwrap_command

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(env_dir)
    python = str(env_dir / "bin" / "python")
    workdir = tmp_path / "work"
    workdir.mkdir()
    argv = [python, "-c", "import sys; print(sys.prefix)"]
    cmd = bwrap_command(shutil.which("bwrap") or "bwrap", python, workdir, argv, {"PATH": "/usr/bin:/bin"})
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(env_dir)


def test_repair_prompt_uses_the_configured_style(demo: tuple[Instance, Path, Path], tmp_path: Path) -> None:
    from swerl.edit_format import COMPACT_SYSTEM_PROMPT, SYSTEM_PROMPT

    instance, clones, root = demo
    seen: list[str] = []

    def record(prompt: str, k: int) -> str:
        seen.append(prompt)
        return _repair_answer(prompt, k)

    ctx = _context(root, clones, ScriptedEngine(record), CharTokenizer(), backend=False)
    cfg = RunConfig(num_samples=1, model_localization=False, prompt_style="compact")
    run([instance], tmp_path / "run", ctx, cfg)
    repair_prompts = [p for p in seen if "SEARCH" in p]
    assert repair_prompts and all(COMPACT_SYSTEM_PROMPT in p for p in repair_prompts)
    assert not any(SYSTEM_PROMPT in p or "Rules:" in p for p in repair_prompts)
    predictions = (tmp_path / "run" / "predictions.jsonl").read_text()
    assert "return total / len(values)" in predictions  # the compact prompt still gets the fix through


def test_answers_stop_at_the_models_context_and_longer_prompts_are_skipped() -> None:
    """A 2,048-position model with --max-new-tokens 4096 generated filler for minutes past its context."""
    from agentless.sampling import PromptTooLong

    engine = ScriptedEngine(lambda prompt, sample: "ok")
    sampler = EngineSampler(engine, CharTokenizer(), context=100)  # type: ignore[arg-type]
    short = [{"role": "user", "content": "x" * 40}]  # 40 characters + 20 of the chat rendering
    assert sampler.sample([short], n=1, temperature=0.0, max_new_tokens=4096, seed=0)[0][0].text == "ok"
    assert engine.calls[-1].max_new_tokens == 100 - 60
    sampler.sample([short], n=1, temperature=0.0, max_new_tokens=8, seed=0)
    assert engine.calls[-1].max_new_tokens == 8
    with pytest.raises(PromptTooLong, match=r"prompt 0 has 120 tokens > 99, the model's context of 100"):
        sampler.sample(
            [[{"role": "user", "content": "x" * 100}]], n=1, temperature=0.0, max_new_tokens=8, seed=0
        )
