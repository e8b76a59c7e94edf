"""How tests/test_docs.py runs each runnable code block of the manual (README.md and docs/*.md).

Adding a block to the docs means adding one line here, keyed by the block's id (the test names the id
of every block that has neither a case nor a marker; tests/docs_blocks.py says how ids are made):

    "docs/page.md#heading-anchor": Case(),                                     # runs exactly as written
    "docs/page.md#heading-anchor/2": Case(fill={"path/to/checkpoint": "{model}"}),

or, for a block that cannot run on a CPU-only machine without network, a marker right before it in
the docs: `<!-- not-runnable-here: REASON -->` (`<!-- not-a-command: WHAT -->` for output, diagrams
and config fragments).

A Case's fields:
- fill: text of the block -> the text that runs: a placeholder (`PATH`, `~/src/project`) and its value,
  or a size the docs show -> the small one a test can afford (each such option is documented). Values
  may name the session's fixtures: {model} (a tiny save_pretrained model), {project} (a git repository
  with a few dozen fix PRs), {repo} (the repository root), {tmp} (the test's own folder) and {port}
  (a free TCP port, for a server the block starts).
- setup: shell lines (Python for a Python block) run just before the block, in the same directory: what
  a reader already has (a model where the docs' config expects one).
- status: the exit status the docs say the block ends with.
- outputs: files or folders the docs say the block writes, relative to the directory it runs in.
- timeout_s: the block's wall-clock limit.

Blocks of one page run in order in one directory, as a reader runs them.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Case:
    """How one block runs (see the module docstring)."""

    fill: dict[str, str] = field(default_factory=dict)
    setup: str = ""
    status: int = 0
    outputs: tuple[str, ...] = ()
    timeout_s: float = 600


# The RLEF configs' run, one step of each part.
_RLEF_SMALL = (
    " --set max_steps=1 --set sft_warmup_steps=1 --set eval_samples=1 --set max_eval_samples=2"
    " --set prompts_per_step=2 --set episodes_per_problem=2"
)
# A training run in two steps, evaluated on two held-out rows.
_TRAIN_SMALL = " --set max_steps=2 --set max_eval_samples=2"
# Where the tiny CPU configs expect `swerl quickstart`'s model: a reader who has run it has one there.
_QUICKSTART_MODEL = "mkdir -p runs/quickstart && ln -sfn {model} runs/quickstart/tiny-model"

CASES: dict[str, Case] = {
    "docs/agentless.md#agentless-solving-swe-bench-instances-with-a-swerl-model/2": Case(
        fill={
            "path/to/checkpoint": "{model} --num-samples 1 --max-new-tokens 16 --localize-max-new-tokens 16 "
            "--reproduction-samples 1"
        },
        outputs=(
            "runs/agentless-demo/instances.jsonl",
            "runs/agentless-demo/loc",
            "runs/agentless-demo/run/predictions.jsonl",
        ),
    ),
    "docs/agentless.md#benchmark-model-free-localization-benchlocalizepy": Case(
        fill={"bench/localize.py ": "bench/localize.py --repos 1 --per-repo 3 "}
    ),
    "docs/benchmarks.md#rewards-overlapped-with-generation-benchgrpo_overlappy--2026-12-03/2": Case(
        fill={
            "--busy-seconds 1.0 --rounds 4 --completion-length 128": "--busy-seconds 0.05 --rounds 1 "
            "--prompts 2 --generations 2 --completion-length 8"
        }
    ),
    "docs/data_pipeline.md#commands": Case(
        fill={"~/src/project": "{project}"},
        outputs=("runs/mined/manifest.json", "runs/mined/split/train.parquet"),
    ),
    "docs/data_pipeline.md#commands/3": Case(fill={"/tmp/": "{tmp}/"}),
    "docs/data_pipeline.md#commands/4": Case(fill={"/tmp/": "{tmp}/"}),
    "docs/data_pipeline.md#training-and-held-out-files-swerl-data-split": Case(
        fill={
            "--eval-size 50": "--eval-size 4",
            "split-50/eval.parquet": "split-50/eval.parquet" + _TRAIN_SMALL,
        },
        setup=_QUICKSTART_MODEL,
        outputs=("runs/sft-tiny-cpu/final",),
    ),
    "docs/data_pipeline.md#row-schema-data_pipelineschemapy-row_schema": Case(
        setup="import datasets\n"
        'row = datasets.load_dataset("parquet", data_dir="runs/mined/data", split="train")[0]'
    ),
    "docs/integrations.md#served-models-any-openai-compatible-server": Case(
        fill={
            "8011": "{port}",
            "--num-samples 2 --max-new-tokens 64": "--num-samples 1 --max-new-tokens 16 "
            "--localize-max-new-tokens 16",
        },
        outputs=("runs/agentless-served/predictions.jsonl",),
    ),
    "docs/integrations.md#trl-grpotrainer-on-mined-rows-with-swerls-rewards": Case(
        fill={"path/to/clone": "{project}"}
    ),
    "docs/integrations.md#trl-grpotrainer-on-mined-rows-with-swerls-rewards/2": Case(),
    "docs/integrations.md#verl-the-rl-dataset-and-compute_score": Case(
        outputs=("runs/verl/train.parquet", "runs/verl/test.parquet")
    ),
    "docs/rlef.md#evaluation/2": Case(
        fill={"PATH": "{model}", "--nk ": "--limit 2 --max-new-tokens 16 --nk "}
    ),
    "docs/rlef.md#the-cpu-learning-run": Case(
        fill={"rlef_tiny_cpu.yaml": "rlef_tiny_cpu.yaml" + _RLEF_SMALL}
    ),
    "docs/rlef.md#showing-what-rlef-is-for-the-hidden-constant-problems": Case(
        fill={
            "--steps 325": "--steps 2",
            "sft/model ": "sft/model --every 14 ",
            "rlef_hidden_cpu.yaml": "rlef_hidden_cpu.yaml" + _RLEF_SMALL,
        }
    ),
    "docs/sandbox.md#try-it": Case(status=1),
    "docs/training.md#a-real-model-smollm2-135m-instruct/2": Case(
        outputs=("models/smollm2-135m-instruct/conversion.json",)
    ),
    "docs/training.md#training-grpo-sft-the-learner": Case(
        fill={
            "swerl quickstart ": "swerl quickstart --size small --minutes 0.2 --eval-size 2 --grpo-steps 1 ",
            "--set max_steps=40": _TRAIN_SMALL + " --set save_steps=1",
            "--resume ": "--resume --set max_steps=3 --set max_eval_samples=2 --set save_steps=1 ",
        },
        outputs=("runs/quickstart/summary.json", "runs/grpo-tiny-cpu/final"),
    ),
}
