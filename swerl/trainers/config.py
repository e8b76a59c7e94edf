"""Run configurations as documented dataclasses, loaded from YAML (names follow TRL where they exist).

A YAML file sets any field by name; unknown keys are an error (a typo must not silently fall back to a
default). `--set key=value` on the command line overrides single fields after the file is read. Every
value is checked against its field's type, range and choices on load (`swerl.configs`), and each class's
`problems()` checks what one field cannot say alone; `missing_inputs()` checks the files a run reads, so
the command line reports all of it before a model is loaded.
"""

from __future__ import annotations

import dataclasses
import glob
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from annotated_types import Ge, Le

from swerl.configs import (
    BelowOne,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    UnitInterval,
    load_config,
    missing_model,
)
from swerl.errors import UserError
from swerl.learner.config import LearnerConfig
from swerl.paths import file_in_the_way, is_mining_output, row_files

C = TypeVar("C", bound="TrainConfig")


@dataclass
class LoRAConfig:
    """LoRA adapters through `peft` (Hu et al., 2021): train two low-rank matrices beside each chosen
    weight and freeze the model itself (field names as in TRL's ModelConfig).

    Attributes:
        use_peft: train LoRA adapters instead of every weight (needs `pip install swerl[lora]`). The KL
            reference is then the same model with its adapters switched off (no second copy), and
            checkpoints and final/ hold the adapters, which `swerl eval` loads onto their base model.
        lora_r: rank of each adapter (the low-rank dimension r).
        lora_alpha: scale of the adapters' output: alpha / r (alpha / sqrt(r) with use_rslora).
        lora_dropout: dropout on the adapters' input during training.
        lora_target_modules: names of the modules that get adapters ("q_proj", "v_proj", ...), or
            "all-linear"; None is peft's default for the architecture (the attention projections).
        lora_modules_to_save: modules trained in full and saved beside the adapters (e.g. "lm_head").
        use_rslora: rank-stabilized LoRA's scale alpha / sqrt(r), which keeps high ranks learning.
    """

    use_peft: bool = False
    lora_r: PositiveInt = 16
    lora_alpha: PositiveFloat = 32.0
    lora_dropout: BelowOne = 0.05
    lora_target_modules: list[str] | Literal["all-linear"] | None = None
    lora_modules_to_save: list[str] | None = None
    use_rslora: bool = False

    def ignored_settings(self, keys: Iterable[str]) -> list[tuple[str, str]]:
        """(field, why) for the LoRA fields among `keys` (those the user set) that have no effect because
        use_peft is off: a run that was meant to train adapters would otherwise train every weight with
        no word (they are warnings, not errors, so one config can switch use_peft off with --set)."""
        if self.use_peft:
            return []
        return [
            (key, "has no effect without use_peft: true")
            for key in keys
            if key.startswith("lora_") or key == "use_rslora"
        ]


@dataclass
class TrainConfig(LoRAConfig, LearnerConfig):
    """What every trainer needs besides optimization and LoRA (inherited from LearnerConfig and LoRAConfig,
    flat in YAML).

    Attributes:
        model_name_or_path: HF model id or local save_pretrained directory (a run's final/ or checkpoint-N/).
        train_file: Parquet or JSONL rows from the data pipeline (problem_statement, code_context,
            oracle_new_content; an optional `prompt` list of chat messages overrides the built prompt).
        eval_file: held-out rows, scored before training and at the end (optional).
        output_dir: run directory: metrics.jsonl, tensorboard/, checkpoint-N/, final/.
        max_steps: optimizer steps (GRPO: rollout batches; each gives num_iterations optimizer steps).
        max_prompt_length: prompts with more tokens are skipped (truncating would cut code out).
        micro_batch_size: sequences per forward/backward; gradients accumulate over the rest.
        logging_steps: write metrics every N steps.
        save_steps: checkpoint every N steps and at the last step (0: only the final model, nothing to
            resume from).
        save_total_limit: keep the newest N checkpoints (None: all).
        resume_from_checkpoint: a checkpoint directory, or "latest" for the newest in output_dir.
        report_to_tensorboard: also write TensorBoard event files (when tensorboard is installed).
        report_to_wandb: also log to Weights & Biases (needs `pip install wandb`; WANDB_MODE=offline
            keeps the run on disk under output_dir/wandb). A resumed run continues the same W&B run.
        wandb_project: the W&B project the run is logged to.
        trust_remote_code: passed to from_pretrained.
        max_train_samples / max_eval_samples: use only the first N rows of train_file / eval_file.
    """

    model_name_or_path: str = ""
    train_file: str = ""
    eval_file: str | None = None
    output_dir: str = "runs/train"
    max_steps: PositiveInt = 100
    max_prompt_length: PositiveInt = 2048
    micro_batch_size: PositiveInt = 4
    logging_steps: PositiveInt = 1
    save_steps: NonNegativeInt = 0
    save_total_limit: PositiveInt | None = 2
    resume_from_checkpoint: str | None = None
    report_to_tensorboard: bool = True
    report_to_wandb: bool = False
    wandb_project: str = "swerl"
    trust_remote_code: bool = False
    max_train_samples: PositiveInt | None = None
    max_eval_samples: PositiveInt | None = None

    @classmethod
    def from_yaml(cls: type[C], path: str | Path | None = None, overrides: list[str] | None = None) -> C:
        """Build from a YAML file plus `key=value` overrides, every value checked (`swerl.configs`)."""
        return load_config(cls, path, overrides or ())

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def problems(self) -> list[tuple[str, str]]:
        """(field, what is wrong) for what a field's type cannot say alone; empty when all is well."""
        found = []
        for name in ("model_name_or_path", "train_file", "output_dir"):
            if not getattr(self, name):
                found.append((name, "required"))
        return found

    def held_out_in_training(self) -> str | None:
        """Why eval_file's rows are trained on too (a file train_file reads as well), or None. A warning,
        not an error: evaluating on training rows can be meant (an overfitting check), but with the split
        folder as train_file it is a mistake that makes every held-out figure a training one."""
        files = [self.train_file, self.eval_file]
        if not all(f and is_local_path(f) for f in files):
            return None
        train_path, eval_path = Path(str(self.train_file)), Path(str(self.eval_file))
        if is_mining_output(train_path) and eval_path.resolve().is_relative_to(train_path.resolve()):
            return (
                f"eval_file: {eval_path} lies inside train_file's mining output {train_path}, whose rows "
                f"it was split from, so the held-out rows are trained on (give train_file "
                f"{train_path / 'split' / 'train.parquet'}, the training side of the split)"
            )
        try:
            train, held_out = ({f.resolve() for f in row_files(p)} for p in (train_path, eval_path))
        except UserError:  # an unfinished mining output: the input check says so
            return None
        shared = train & held_out
        if not shared:
            return None
        return (
            f"eval_file: {sorted(shared)[0]} is read by train_file {self.train_file} too, so the held-out "
            "rows are trained on (give train_file the training file itself, e.g. split/train.parquet)"
        )

    def missing_inputs(self) -> list[tuple[str, str]]:
        """(field, why) for input paths that do not exist, checked before any model loads. A model name
        that is not a path on this machine is taken for a hub id (`owner/name`) unless it cannot be one."""
        found = []
        problem = self.model_name_or_path and missing_model(self.model_name_or_path)
        if problem:
            found.append(("model_name_or_path", problem))
        for name in ("train_file", "eval_file"):
            value = getattr(self, name)
            if value and is_local_path(value) and not _path_or_glob_exists(value):
                found.append((name, f"no such file {value}"))
        if self.deepspeed:
            problem = _json_file_problem(self.deepspeed)
            if problem:
                found.append(("deepspeed", problem))
        if self.report_to_wandb:
            import importlib.util

            if importlib.util.find_spec("wandb") is None:
                found.append(("report_to_wandb", "needs the wandb package: pip install wandb"))
        out = Path(self.output_dir)
        blocking = file_in_the_way(out)
        if blocking is not None:
            found.append(("output_dir", f"{blocking} is a file, so {out} cannot be a directory"))
        return found


def _json_file_problem(path: str) -> str | None:
    """Why a DeepSpeed config at `path` cannot be read as JSON (None when it can)."""
    import json

    try:
        json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return f"no such file {path}"
    except IsADirectoryError:
        return f"{path} is a directory; give a DeepSpeed JSON file"
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        return f"{path} is not a JSON file ({err})"
    return None


def is_local_path(value: str) -> bool:
    """Whether `value` names a local file, folder or glob rather than a data source of another kind
    (`bundled:split`, `hf:name`: any `scheme:` but a drive letter)."""
    return not re.match(r"[A-Za-z][\w+.-]+:", value)


def _path_or_glob_exists(value: str) -> bool:
    if any(ch in value for ch in "*?["):
        return bool(glob.glob(value))
    return all(Path(part.strip()).exists() for part in value.split(",") if part.strip())


@dataclass
class ExecutionConfig:
    """Where and how a repository's tests judge answers (`swerl.reward.execution`): GRPO's execution
    reward and RLEF's repository tasks.

    Attributes:
        execution_workers: test runs at once (a thread pool; each run is a sandboxed process); under
            `execution_engine: ray` without a cluster, the CPUs of the local Ray instance.
        execution_engine: "threads" (tests on this machine's CPUs) or "ray" (each distinct answer a Ray
            task of one CPU and no GPU: the cluster of RAY_ADDRESS, else a local instance; needs
            `pip install 'swerl[ray]'`).
        execution_shaping: "none", or "fail_to_pass" (an unresolved answer that breaks no PASS_TO_PASS
            test gets the share of FAIL_TO_PASS tests it passes; GRPO only).
        execution_min_test_strength: leave out rows whose tests killed less than this share of their gold
            patch's mutants (the `test_strength` column of `swerl data validate`; a row without one is
            left out too); None keeps every executable row.
        execution_strength_weight: a resolved answer earns the row's test strength instead of 1 (rows
            without one: 1; GRPO only). Under `scale_rewards: group` the advantages of a group of only
            resolved and unresolved answers are divided by their spread, which cancels the weight: it
            acts with "batch" or "none", or against malformed answers (-1) in the group.
        execution_cache_dir: bare mirrors and test environments (reused across steps and runs).
        execution_clones: a directory of existing clones to mirror from instead of GitHub.
        execution_offline: never contact GitHub.
        execution_isolation: "bwrap" (tests in bubblewrap) or "none" (unprotected, for machines without it).
        execution_timeout_s: wall clock of one test run; past it the run is an infrastructure error.
        execution_python: the interpreter (with pytest) that inferred environments use instead of the
            running one: for stdlib-only repositories, a venv with pytest alone starts each run in a
            fraction of the time an environment full of pytest plugins takes.
    """

    execution_workers: PositiveInt = 1
    execution_engine: Literal["threads", "ray"] = "threads"
    execution_shaping: Literal["none", "fail_to_pass"] = "none"
    execution_min_test_strength: UnitInterval | None = None
    execution_strength_weight: bool = False
    execution_cache_dir: str = "runs/agentless-cache"
    execution_clones: str | None = None
    execution_offline: bool = False
    execution_isolation: Literal["bwrap", "none"] = "bwrap"
    execution_timeout_s: PositiveInt = 1800
    execution_python: str | None = None


@dataclass
class GRPOConfig(ExecutionConfig, TrainConfig):
    """GRPO on the SWE-RL reward (defaults: the paper's group size, TRL's clipping and std).

    Attributes:
        num_generations: G, answers sampled per prompt; a group always stays on one rank.
        prompts_per_step: prompts in one rollout batch over all ranks (a multiple of the world size).
        max_completion_length: new tokens per answer; longer answers are cut (logged as clipped).
        temperature, top_p, top_k: sampling; log-probs are computed at the same temperature.
        num_iterations: mu, optimizer passes over each rollout batch; passes after the first use the
            log-probs of the policy that sampled (old log-probs) in the clipped ratio.
        epsilon, epsilon_high: clip range [1 - epsilon, 1 + epsilon_high]; epsilon_high None = epsilon.
        beta: weight of the k3 KL to a frozen copy of the initial model; 0 loads no reference model.
        loss_aggregation: "token-mean" over the global batch (default), "seq-mean", "seq-mean-token-sum",
            or "seq-mean-token-sum-norm" (Dr. GRPO: token sums over the constant max_completion_length).
        importance_sampling_level: "token" (PPO/GRPO ratios) or "sequence" (GSPO: one ratio per answer,
            the geometric mean of its token ratios).
        importance_sampling_correction: weight each token by min(learner / sampler probability, cap)
            (truncated importance sampling); "auto" turns it on when the sampler is not the learner
            (rollout_engine "vllm"), where bf16 kernels sample from a slightly different distribution.
        importance_sampling_cap: the cap of that weight (TRL's default 2); at least 1, as a lower cap would
            down-weight every token.
        mask_truncated_completions: leave answers cut at max_completion_length out of the loss (DAPO).
        overlong_buffer_length: DAPO's soft overlong penalty: the last N tokens of the budget cost up to
            overlong_penalty_factor reward, linearly (0: off).
        overlong_penalty_factor: the reward an answer at max_completion_length loses.
        dynamic_sampling: DAPO's dynamic sampling: drop zero-std groups and sample more prompts until the
            batch has prompts_per_step informative groups or max_sampling_rounds rounds were spent.
        max_sampling_rounds: rollout rounds per step that dynamic sampling may spend (the first included).
        scale_rewards: advantage std: "group" (per group), "batch" (global batch) or "none".
        drop_zero_std_groups: leave groups whose rewards are all equal out of the update (they carry no
            signal); `frac_reward_zero_std` is logged either way.
        reward: "similarity" (the SWE-RL reward; "swe_rl" is the same), "execution" (the row's
            FAIL_TO_PASS and PASS_TO_PASS tests, judged as `swerl agentless evaluate` judges: 1 resolved,
            0 not, -1 malformed; every training row must be executable), "hybrid" (execution where the
            row is executable, similarity elsewhere) or "token:N" / "token:LO-HI" (fraction of answer
            tokens with those ids; a smoke-test reward any model can learn).
        reward_strict: the similarity reward's strict format (off in the paper).
        overlap_rewards: score each group on a background thread as soon as the rollout engine has it,
            while the rest of the batch is sampled. `rollout_engine: hf` hands over each decoding batch
            (generation_batch_size sequences), so the rewards of one batch run while the next generates;
            "vllm" and "vllm_server" answer the whole batch at once, so there rewards start when
            generation ends, as with false. The rewards, and so the run, are the same either way.
        eval_temperature: sampling temperature for held-out evaluation (0 = greedy).
        generation_batch_size: sequences (prompts x G) the transformers engine decodes together.
        rollout_engine: "hf" (transformers generate in the training process), "vllm" (vLLM colocated in
            every rank, sleeping during updates) or "vllm_server" (a `swerl vllm-serve` process on other
            GPUs, weights pushed over the network after every step).
        rollout_kwargs: for "vllm", passed to `swerl.rollout.vllm_engine.VLLMEngine` (gpu_memory_utilization,
            tensor_parallel_size, enable_sleep_mode, sleep_level, max_model_len, ...); for "vllm_server",
            to `swerl.rollout.vllm_server.VLLMServerEngine` (base_url, group_port, weight_backend, ...).
    """

    num_generations: PositiveInt = 16
    prompts_per_step: PositiveInt = 8
    max_completion_length: PositiveInt = 1024
    temperature: NonNegativeFloat = 1.0
    top_p: UnitInterval = 1.0
    top_k: NonNegativeInt | None = None
    num_iterations: PositiveInt = 1
    epsilon: BelowOne = 0.2
    epsilon_high: NonNegativeFloat | None = None
    beta: NonNegativeFloat = 0.0
    loss_aggregation: Literal["token-mean", "seq-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"] = (
        "token-mean"
    )
    importance_sampling_level: Literal["token", "sequence"] = "token"
    importance_sampling_correction: bool | Literal["auto"] = "auto"
    importance_sampling_cap: Annotated[float, Ge(1)] = 2.0
    mask_truncated_completions: bool = False
    overlong_buffer_length: NonNegativeInt = 0
    overlong_penalty_factor: NonNegativeFloat = 1.0
    dynamic_sampling: bool = False
    max_sampling_rounds: PositiveInt = 3
    scale_rewards: Literal["group", "batch", "none"] = "group"
    drop_zero_std_groups: bool = False
    reward: str = "swe_rl"
    reward_strict: bool = False
    overlap_rewards: bool = True
    eval_temperature: NonNegativeFloat = 0.0
    generation_batch_size: PositiveInt = 64
    rollout_engine: Literal["hf", "vllm", "vllm_server"] = "hf"
    rollout_kwargs: dict[str, Any] = field(default_factory=dict)

    def problems(self) -> list[tuple[str, str]]:
        found = super().problems()
        if self.num_generations < 2:
            found.append(("num_generations", "must be at least 2: a group of one has no relative advantage"))
        if not re.fullmatch(r"swe_rl|similarity|execution|hybrid|token:\d+(-\d+)?", self.reward):
            found.append(
                (
                    "reward",
                    "expected 'similarity', 'execution', 'hybrid', 'token:N' or 'token:LO-HI', "
                    f"got {self.reward!r}",
                )
            )
        if self.temperature == 0:
            found.append(("temperature", "must be > 0: GRPO samples a group of different answers"))
        if self.overlong_buffer_length > self.max_completion_length:
            found.append(
                (
                    "overlong_buffer_length",
                    f"must be at most max_completion_length ({self.max_completion_length})",
                )
            )
        return found

    def corrects_sampler(self) -> bool:
        """Whether truncated importance sampling is on: "auto" means when the sampler is not the learner."""
        if self.importance_sampling_correction == "auto":
            return self.rollout_engine != "hf"
        return bool(self.importance_sampling_correction)


@dataclass
class SFTConfig(TrainConfig):
    """Supervised fine-tuning on canonical answers (the SWE-RL paper's baseline and a warm-up).

    Attributes:
        per_device_train_batch_size: sequences per rank per optimizer step (micro-batches accumulate).
        max_seq_length: prompt + answer tokens; longer examples are skipped, not truncated.
        num_train_epochs: upper bound on passes over the data (max_steps stops earlier).
        eval_every: sample held-out answers every N steps to report the malformed rate (0: only at end).
        max_completion_length: new tokens when sampling held-out answers.
    """

    per_device_train_batch_size: PositiveInt = 8
    max_seq_length: PositiveInt = 4096
    num_train_epochs: PositiveInt = 1
    eval_every: NonNegativeInt = 0
    max_completion_length: PositiveInt = 1024
    learning_rate: PositiveFloat = 1e-5


@dataclass
class RLEFConfig(ExecutionConfig, TrainConfig):
    """RLEF on CodeContests-shaped problems or executable repository rows (defaults: the paper's turns,
    rewards and beta).

    Attributes:
        task_source: "codecontests" (programs on stdin/stdout tests) or "repository" (validated rows in
            SWE-bench's schema: SEARCH/REPLACE answers judged by the repository's tests through the
            `execution_*` settings; docs/rlef.md, "Repository tasks").
        train_file / eval_file: for codecontests, code_contests JSONL or Parquet files, globs
            ("data/train-*.parquet" for the Hub's shards) or comma-separated lists of them, or
            "bundled:train" / "bundled:valid" / "bundled:test" for the small problem set shipped in
            swerl/data/rlef_problems; for repository, `swerl data validate` output (its test.parquet, a
            folder of Parquet files or JSONL rows).
        public_share: repository tasks: the share of a row's FAIL_TO_PASS tests shown as feedback (at
            least one, never all; a PUBLIC_TESTS column names them instead); rows with one are left out.
        public_pass_to_pass: repository tasks: the PASS_TO_PASS tests (the repository's existing tests)
            are public too.
        feedback_chars: repository tasks: the longest feedback turn in characters (SmolLM2 reads pytest
            reports at about 3 a token).
        generated_tests: also score on the dataset's generated tests (the paper does); False leaves them
            unread, most of the test data, for a faster load and faster judging.
        prompts_per_step: problems per rollout batch over all ranks (a multiple of the world size).
        episodes_per_problem: episodes sampled per problem (a problem's episodes stay on one rank).
        max_turns: answers per episode (feedback follows every failed answer but the last).
        max_completion_length: new tokens per answer.
        max_seq_length: a dialog never grows past this (the episode ends when the next answer won't fit).
        temperature, top_p: sampling; log-probs use the same temperature.
        beta: weight of the per-answer KL penalty log(pi / rho) in the reward (rho: the start model).
        gamma, lam: GAE over turns. gamma = 1 (episodes are at most 3 turns, nothing to discount);
            lam = 0.95 (PPO's usual value: mostly Monte-Carlo, a little bootstrapping from the critic).
        whiten_advantages: whiten the per-answer advantages over the global batch.
        epsilon: policy clip range.
        value_clip: clip range of the value loss.
        critic_learning_rate: the critic's AdamW learning rate (the policy uses learning_rate).
        num_iterations: PPO passes over each rollout batch (each pass: one optimizer step per model).
        feedback: "execution" (RLEF), "random" or "none" (ablations, for training too).
        solved_reward / failed_reward / invalid_code_reward: the task rewards (+1 / -1 / -0.2).
        sft_warmup_steps: before RL, supervised steps on the problems' reference solutions (a repository
            row's: its gold patch as a SEARCH/REPLACE answer) (0: none).
        sft_learning_rate / sft_batch_size: the warm-up's optimizer settings.
        sft_fix_dialogs: the warm-up also trains second turns: a corrupted reference solution, the
            sandbox's real feedback on it, then the reference solution (only the fix is trained on).
        sft_fix_constant: among those corruptions, the last integer constant off by one (whose fix reads
            the constant from the feedback). Off for the hidden-constant demonstration, where reading
            the constant from the feedback is the skill RLEF is to learn, not the warm-up.
        sft_fix_guessed_constants: also that many corruptions per problem whose last integer constant is
            another training problem's (a guess), so a fix must read the constant from the feedback. For
            repository rows these are the only corruptions (`swerl.environments.warmup`).
        sft_fix_feedback_rate: the share of the warm-up's later turns whose target is the fix; the rest
            answer without the feedback (`sft_fix_retry`). Below 1 the start policy uses the feedback
            only sometimes, which RL can amplify (docs/rlef.md, the hidden-constant demonstration).
        sft_fix_turns: repository rows: the warm-up's longest dialog in answers; 2 shows second turns
            only, 3 also third turns after two wrong guesses, so the start policy has seen every turn
            an episode of 3 answers has (at most max_turns).
        sft_fix_retry: repository rows: the target of a later turn that does not show the fix:
            "resubmit" the last wrong answer, or "guess" a constant not tried yet (any of the training
            rows', the right one included), as a policy blind to the feedback would. With "guess" the
            start policy already gets what fresh guesses get, so training can gain only by reading
            the feedback: random feedback has nothing left to teach (docs/rlef.md).
        eval_samples: dialogs per held-out problem for the before/after 1@3 report.
        eval_temperature: sampling temperature of those dialogs.
        eval_random_feedback: also report 1@3 with random feedback (the paper's ablation), before and
            after RLEF: a policy that uses the feedback gains less when the feedback is unrelated.
        generation_batch_size, rollout_engine, rollout_kwargs: as in GRPO.
        sandbox_workers: parallel test runs (None: one per core).
    """

    prompts_per_step: PositiveInt = 8
    episodes_per_problem: PositiveInt = 4
    max_turns: PositiveInt = 3
    max_completion_length: PositiveInt = 512
    max_seq_length: PositiveInt = 8192
    temperature: PositiveFloat = 1.0
    top_p: UnitInterval = 1.0
    beta: NonNegativeFloat = 0.05
    gamma: Annotated[float, Ge(0), Le(1)] = 1.0
    lam: Annotated[float, Ge(0), Le(1)] = 0.95
    whiten_advantages: bool = True
    epsilon: BelowOne = 0.2
    value_clip: PositiveFloat = 0.2
    critic_learning_rate: PositiveFloat = 1e-5
    num_iterations: PositiveInt = 1
    feedback: Literal["execution", "random", "none"] = "execution"
    solved_reward: float = 1.0
    failed_reward: float = -1.0
    invalid_code_reward: float = -0.2
    sft_warmup_steps: NonNegativeInt = 0
    sft_learning_rate: PositiveFloat = 1e-3
    sft_batch_size: PositiveInt = 16
    sft_fix_dialogs: bool = True
    sft_fix_constant: bool = True
    sft_fix_guessed_constants: NonNegativeInt = 0
    sft_fix_feedback_rate: UnitInterval = 1.0
    sft_fix_turns: Annotated[int, Ge(2)] = 2
    sft_fix_retry: Literal["resubmit", "guess"] = "resubmit"
    eval_samples: PositiveInt = 6
    eval_temperature: NonNegativeFloat = 1.0
    eval_random_feedback: bool = False
    generation_batch_size: PositiveInt = 64
    rollout_engine: Literal["hf", "vllm", "vllm_server"] = "hf"
    rollout_kwargs: dict[str, Any] = field(default_factory=dict)
    sandbox_workers: PositiveInt | None = None
    generated_tests: bool = True
    task_source: Literal["codecontests", "repository"] = "codecontests"
    public_share: Annotated[float, Ge(0), Le(1)] = 0.5
    public_pass_to_pass: bool = True
    feedback_chars: PositiveInt = 2400

    def problems(self) -> list[tuple[str, str]]:
        found = super().problems()
        if self.use_peft and self.sft_warmup_steps:
            found.append(
                (
                    "use_peft",
                    "LoRA and sft_warmup_steps together are not supported: rho would not be "
                    "the warmed-up model; warm up in a separate SFT run and start RLEF from its model",
                )
            )
        if self.sft_fix_turns > max(self.max_turns, 2):
            found.append(("sft_fix_turns", f"must be at most max_turns ({self.max_turns})"))
        if self.task_source != "repository":
            if self.sft_fix_turns != 2:
                found.append(("sft_fix_turns", "only repository rows warm up on third turns; leave it at 2"))
            if self.sft_fix_retry != "resubmit":
                found.append(("sft_fix_retry", "only repository rows warm up on fresh guesses"))
        return found

    def missing_inputs(self) -> list[tuple[str, str]]:
        found = super().missing_inputs()
        from swerl.data.rlef_problems import SPLITS

        for name in ("train_file", "eval_file"):
            for part in (getattr(self, name) or "").split(","):
                split = part.strip().removeprefix("bundled:")
                if part.strip().startswith("bundled:") and split not in SPLITS:
                    found.append((name, f"no bundled split {split!r}; choose one of {', '.join(SPLITS)}"))
        return found

    def episode_config(self, **changes: Any) -> Any:
        """The `swerl.environments.codecontests.EpisodeConfig` of these settings (imported here: it needs
        torch)."""
        from swerl.environments.codecontests import EpisodeConfig

        values = {
            "max_turns": self.max_turns,
            "max_new_tokens": self.max_completion_length,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_context_length": self.max_seq_length,
            "feedback": self.feedback,
            "solved_reward": self.solved_reward,
            "failed_reward": self.failed_reward,
            "invalid_code_reward": self.invalid_code_reward,
        }
        values.update(changes)
        return EpisodeConfig(**values)
