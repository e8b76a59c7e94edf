"""The Agentless run: localize files -> elements and edit locations -> repair -> rerank -> predictions.

Each stage reads the previous stage's JSONL and appends one row per instance to its own, so a run is
resumable at instance granularity: finished ids are skipped, and an instance whose stage failed
(`stage_error` in its row) is retried on the next run. An unexpected exception inside one instance is
recorded in its row and the run goes on; only setup errors (no model, no repository cache) stop it, and
a model server that refused every instance of a stage: that is one setup error, not N instance errors.
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentless.localize.dense import dense_scores, load_wordllama
from agentless.localize.elements import (
    EditLocation,
    ElementHit,
    edit_locations,
    element_messages,
    merge_elements,
    parse_element_answer,
    rank_elements,
    skeletons_of,
)
from agentless.localize.files import (
    RankWeights,
    add_dense,
    compact_tree,
    file_ranking_messages,
    merge_rankings,
    parse_file_ranking,
    rank_files,
    rerank_by_elements,
)
from agentless.localize.index import IndexCache
from agentless.localize.signals import extract_signals
from agentless.repair import turns
from agentless.repair.candidates import make_candidate
from agentless.repair.context import build_context
from agentless.rerank.regression import parse_excluded_tests, regression_filter_messages
from agentless.rerank.reproduction import parse_reproductions, reproduction_messages
from agentless.rerank.select import PatchCandidate, related_test_files, select_patch
from agentless.sampling import PromptTooLong, TextSampler, sample_mixed
from agentless.stages import StageFile
from swerl.edit_format import PatchApplyError, PromptStyle, apply_patch_to_contents, build_messages
from swerl.errors import UserError
from swerl.execution.base import ExecutionBackend
from swerl.execution.dispatch import Dispatch
from swerl.execution.instances import Instance
from swerl.git.clones import RepoCache
from swerl.rollout.openai_client import CompletionServerError

STAGES = ("localize_files", "localize_elements", "repair", "rerank", "predictions")
PREDICTION_KEYS = ("instance_id", "model_name_or_path", "model_patch", "metadata")


@dataclass(frozen=True)
class RunConfig:
    """Knobs of a run. Defaults follow Agentless's shape at a size a single GPU handles."""

    model_name: str = "swerl"
    top_files: int = 5
    element_files: int = 20
    """Files of the model-free ranking re-ranked by their best function or class (0: none)."""
    dense: float = 0.0
    """Weight of the dense signal (a static embedding model over paths and defined names) added to the
    model-free ranking before the second stage (0: off; needs the `dense` extra)."""
    context_files: int = 3
    num_elements: int = 8
    num_samples: int = 4
    temperature: float = 0.8
    max_new_tokens: int = 4096
    localize_max_new_tokens: int = 512
    reproduction_max_new_tokens: int = 1024
    seed: int = 0
    model_localization: bool = True
    regression: bool = False
    regression_from_gold: bool = False
    """Use the dataset's PASS_TO_PASS (labels derived from the gold patch) instead of the repository's
    tests passing at the base: not comparable with published scores; recorded in the predictions."""
    regression_model_filter: bool = False
    """Ask the model which passing tests a fix may rightly break, and leave those out (Agentless's
    optional filter; `agentless.rerank.regression`)."""
    reproduction: bool = False
    reproduction_samples: int = 4
    """Reproduction tests sampled per instance (one greedy, the rest at `temperature`), as Agentless Mini
    samples several and ranks candidates by how many of those failing at the base they pass."""
    max_groups: int = 8
    # The repair prompt's style (swerl.edit_format): serve a model with the style it was trained on.
    prompt_style: PromptStyle = "full"
    feedback_turns: int = 0
    """Turns of execution feedback per repair sample before rerank (`agentless.repair.turns`): its patch
    runs on the regression and reproduction tests, and their failures are the model's next user turn."""

    def stages(self) -> tuple[str, ...]:
        """The stages of a run: the feedback stage only with feedback turns (a run without writes the
        files it always wrote)."""
        if self.feedback_turns <= 0:
            return STAGES
        at = STAGES.index("rerank")
        return (*STAGES[:at], "feedback", *STAGES[at:])


@dataclass
class Context:
    """What the stages share: where repositories and indexes come from, the model, the backend."""

    repos: RepoCache
    indexes: IndexCache
    sampler: TextSampler | None = None
    backend: ExecutionBackend | None = None
    feedback_dispatch: Dispatch = field(default_factory=Dispatch)
    """Where the feedback turns' test runs go (threads or Ray tasks, how many at a time): not an option
    of any stage, since it changes where the runs happen, not what they give."""
    log: Callable[[str], None] = lambda message: print(message, file=sys.stderr)


def stage_path(out_dir: Path, stage: str) -> Path:
    return out_dir / f"{stage}.jsonl"


OPTIONS_FILE = "stage_options.json"


def stage_options(cfg: RunConfig) -> dict[str, dict[str, Any]]:
    """The options that shape each stage's rows, its upstream stages' included."""
    files = {
        "model": cfg.model_name if cfg.model_localization else None,
        "top_files": cfg.top_files,
        "element_files": cfg.element_files,
        "dense": cfg.dense or None,  # None when off, as in runs made before the option existed
        "seed": cfg.seed,
        "localize_max_new_tokens": cfg.localize_max_new_tokens if cfg.model_localization else None,
    }
    elements = {**files, "context_files": cfg.context_files, "num_elements": cfg.num_elements}
    repair = {
        **elements,
        "model": cfg.model_name,
        "localization_model": files["model"],
        "num_samples": cfg.num_samples,
        "temperature": cfg.temperature,
        "max_new_tokens": cfg.max_new_tokens,
        "prompt_style": cfg.prompt_style,
        "reproduction": cfg.reproduction,
        "reproduction_samples": cfg.reproduction_samples if cfg.reproduction else None,
        "reproduction_max_new_tokens": cfg.reproduction_max_new_tokens if cfg.reproduction else None,
    }
    # The key only with feedback turns on: the options of runs made before it existed stay equal.
    turns = {**repair, "feedback_turns": cfg.feedback_turns} if cfg.feedback_turns > 0 else repair
    rerank = {
        **turns,
        "regression": cfg.regression,
        "regression_from_gold": cfg.regression_from_gold,
        "regression_model_filter": cfg.regression_model_filter,
        "max_groups": cfg.max_groups,
    }
    return {
        "localize_files": files,
        "localize_elements": elements,
        "repair": repair,
        "feedback": {**turns, "regression": cfg.regression, "regression_from_gold": cfg.regression_from_gold},
        "rerank": rerank,
        "predictions": rerank,
    }


def claim_stages(out_dir: Path, cfg: RunConfig, stages: Sequence[str]) -> None:
    """Record the options of `stages` in the run directory, or refuse if they were made with others.

    Resuming reuses every finished row, so rows made with another model or other options would be passed
    off as this run's: a UserError names the stage and the options that differ instead. Options recorded
    for a stage whose file is absent guard nothing (a run that stopped before writing it, or a file the
    user deleted as the error advises), so they are replaced rather than refused.
    """
    path = out_dir / OPTIONS_FILE
    recorded: dict[str, dict[str, Any]] = (
        json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    )
    wanted = stage_options(cfg)
    for stage in stages:
        old = recorded.get(stage)
        if old is not None and old != wanted[stage] and stage_path(out_dir, stage).exists():
            diff = ", ".join(
                f"{k}: {old.get(k)!r} -> {wanted[stage].get(k)!r}"
                for k in sorted(set(old) | set(wanted[stage]))
                if old.get(k) != wanted[stage].get(k)
            )
            raise UserError(
                f"{out_dir}: {stage}.jsonl was made with other options ({diff}); pass a new --out, or "
                f"delete {stage}.jsonl and the stages after it to redo them"
            )
        recorded[stage] = wanted[stage]
    out_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(recorded, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _finished(row: Mapping[str, Any]) -> bool:
    return "stage_error" not in row


def _pending(
    instances: Sequence[Instance], stage: StageFile, finished: Callable[[Mapping[str, Any]], bool]
) -> list[Instance]:
    done = {iid for iid, row in stage.by_id().items() if finished(row)}
    return [inst for inst in instances if inst.instance_id not in done]


def _run_stage(
    name: str,
    instances: Sequence[Instance],
    out_dir: Path,
    ctx: Context,
    work: Callable[[Instance], dict[str, Any]],
    finished: Callable[[Mapping[str, Any]], bool] = _finished,
) -> None:
    """Append `work`'s row for each instance without a finished row (`finished`: no stage error)."""
    stage = StageFile(stage_path(out_dir, name))
    pending = _pending(instances, stage, finished)
    ctx.log(f"[{name}] {len(instances) - len(pending)} done, {len(pending)} to go")
    refusals: list[CompletionServerError] = []
    for inst in pending:
        try:
            row = {"instance_id": inst.instance_id, **work(inst)}
        except Exception as err:  # one instance must not stop the run; the row says what happened
            ctx.log(f"[{name}] {inst.instance_id}: {type(err).__name__}: {err}")
            if isinstance(err, CompletionServerError):
                refusals.append(err)
            row = {
                "instance_id": inst.instance_id,
                "stage_error": f"{type(err).__name__}: {err}",
                "traceback": traceback.format_exc(limit=8),
            }
        stage.append(row)
    if pending and len(refusals) == len(pending):  # the rows are retried by the next run
        raise UserError(f"{name}: the model server failed every instance ({len(pending)}): {refusals[0]}")


def _sample_text(ctx: Context, messages: list[dict[str, str]], cfg: RunConfig) -> tuple[str, str | None]:
    """One greedy answer for a localization prompt; ("", why) when the model can't be asked."""
    if ctx.sampler is None:
        return "", "no model"
    try:
        out = ctx.sampler.sample(
            [messages], n=1, temperature=0.0, max_new_tokens=cfg.localize_max_new_tokens, seed=cfg.seed
        )
    except PromptTooLong as err:
        return "", str(err)
    return out[0][0].text, None


# -- stage 1: files ------------------------------------------------------------------------------------


def localize_files(inst: Instance, ctx: Context, cfg: RunConfig) -> dict[str, Any]:
    index = ctx.indexes.get(inst.repo, inst.base_commit)
    signals = extract_signals(inst.problem_statement)
    if cfg.dense > 0:
        embedder = load_wordllama()
        ranked = rank_files(index, inst.problem_statement, signals=signals, top=len(index.stats))
        similarity = dense_scores(index, inst.problem_statement, embedder)
        ranked = add_dense(ranked, similarity, weights=RankWeights(dense=cfg.dense))
    else:
        ranked = rank_files(index, inst.problem_statement, signals=signals)
    if cfg.element_files > 0:
        weights = RankWeights(element_files=cfg.element_files)
        head = [r.path for r in ranked[: cfg.element_files]]
        sources = _blob_texts(ctx, inst.repo, {path: index.blobs[path] for path in head})
        ranked = rerank_by_elements(ranked, sources, inst.problem_statement, weights=weights)
    model_free = [r.path for r in ranked]
    model: list[str] = []
    output, skipped = "", None
    if cfg.model_localization:
        tree = compact_tree(index.paths)
        output, skipped = _sample_text(ctx, file_ranking_messages(inst.problem_statement, tree), cfg)
        model = parse_file_ranking(output, index, k=cfg.top_files)
    files = merge_rankings(model_free[: cfg.top_files * 4], model)[: cfg.top_files]
    return {
        "files": files,
        "model_free": [[r.path, round(r.score, 4), r.reasons] for r in ranked[:20]],
        "model_files": model,
        "model_output": output,
        "model_skipped": skipped,
    }


# -- stage 2: elements and edit locations ---------------------------------------------------------------


def _blob_texts(ctx: Context, repo: str, blobs: Mapping[str, str]) -> dict[str, str]:
    """Texts of the files `blobs` maps to blob ids, read through one `git cat-file --batch`."""
    by_blob = {blob: data for blob, data in ctx.repos.read_blobs(repo, blobs.values())}
    texts = {path: by_blob.get(blob) for path, blob in blobs.items()}
    return {path: data.decode("utf-8", errors="replace") for path, data in texts.items() if data is not None}


def _sources(ctx: Context, inst: Instance, paths: Iterable[str]) -> dict[str, str]:
    out = {}
    for path in paths:
        text = ctx.repos.read_file(inst.repo, inst.base_commit, path)
        if text is not None:
            out[path] = text
    return out


def localize_elements(
    inst: Instance, files_row: dict[str, Any], ctx: Context, cfg: RunConfig
) -> dict[str, Any]:
    files = list(files_row.get("files", []))[: cfg.context_files]
    sources = _sources(ctx, inst, files)
    signals = extract_signals(inst.problem_statement)
    model_free = rank_elements(sources, inst.problem_statement, signals, file_order=files)
    model: list[ElementHit] = []
    output, skipped = "", None
    if cfg.model_localization and sources:
        messages = element_messages(inst.problem_statement, skeletons_of(sources), k=cfg.num_elements)
        output, skipped = _sample_text(ctx, messages, cfg)
        model = parse_element_answer(output, sources, k=cfg.num_elements)
    chosen = merge_elements(model, model_free, k=cfg.num_elements)
    locations = edit_locations(chosen, signals, sources)
    return {
        "files": files,
        "elements": [h.to_row() for h in chosen],
        "edit_locations": [loc.to_row() for loc in locations],
        "model_output": output,
        "model_skipped": skipped,
    }


# -- stage 3: repair ------------------------------------------------------------------------------------


def _repair_prompt(
    inst: Instance, loc_row: Mapping[str, Any], ctx: Context, cfg: RunConfig
) -> tuple[dict[str, str], dict[str, str], list[dict[str, str]]]:
    """(the localized files' sources, the code context, the repair prompt's messages)."""
    files = list(loc_row.get("files", []))
    locations = [
        EditLocation(str(r["path"]), int(r["start"]), int(r["end"])) for r in loc_row["edit_locations"]
    ]
    sources = _sources(ctx, inst, files)
    context = build_context(sources, files, locations, max_files=cfg.context_files)
    return sources, context, build_messages(inst.problem_statement, context, style=cfg.prompt_style)


def _base_reader(inst: Instance, ctx: Context, sources: Mapping[str, str]) -> Callable[[str], str | None]:
    """A file's text at the base commit, from the already read `sources` first."""

    def read(path: str) -> str | None:
        if path in sources:
            return sources[path]
        return ctx.repos.read_file(inst.repo, inst.base_commit, path)

    return read


def repair(inst: Instance, loc_row: dict[str, Any], ctx: Context, cfg: RunConfig) -> dict[str, Any]:
    if ctx.sampler is None:
        raise RuntimeError("repair needs a model")
    sources, context, messages = _repair_prompt(inst, loc_row, ctx, cfg)
    row: dict[str, Any] = {
        "context_files": list(context),
        "prompt_chars": sum(len(m["content"]) for m in messages),
    }
    try:
        samples = sample_mixed(
            ctx.sampler,
            messages,
            num_samples=cfg.num_samples,
            temperature=cfg.temperature,
            max_new_tokens=cfg.max_new_tokens,
            seed=cfg.seed,
        )
    except PromptTooLong as err:
        return {**row, "samples": [], "skipped": str(err), "reproduction_tests": []}

    read = _base_reader(inst, ctx, sources)
    candidates = [
        make_candidate(i, s.text, read, temperature=s.temperature, finish_reason=s.finish_reason)
        for i, s in enumerate(samples)
    ]
    reproductions: list[str] = []
    if cfg.reproduction:
        try:
            answers = sample_mixed(
                ctx.sampler,
                reproduction_messages(inst.problem_statement, context),
                num_samples=cfg.reproduction_samples,
                temperature=cfg.temperature,
                max_new_tokens=cfg.reproduction_max_new_tokens,
                seed=cfg.seed,
            )
        except PromptTooLong:
            answers = []
        reproductions = parse_reproductions([a.text for a in answers])
    errors: dict[str, int] = {}
    for cand in candidates:
        if cand.error:
            errors[cand.error] = errors.get(cand.error, 0) + 1
    return {
        **row,
        "samples": [c.to_row() for c in candidates],
        "errors": errors,
        "reproduction_tests": reproductions,
    }


# -- stage 3b: feedback turns ---------------------------------------------------------------------------


def feedback(
    inst: Instance,
    loc_row: dict[str, Any],
    repair_row: dict[str, Any],
    prior: dict[str, Any] | None,
    ctx: Context,
    cfg: RunConfig,
    save: Callable[[dict[str, Any]], None],
) -> dict[str, Any]:
    """Every repair sample's episode of feedback turns (`agentless.repair.turns`), from `prior` (the
    instance's last saved state) on; `save` is called with the state after each phase."""
    if ctx.sampler is None or ctx.backend is None:
        raise RuntimeError("feedback turns need a model and a test backend")
    state: dict[str, Any] = (
        {k: v for k, v in prior.items() if k != "instance_id"}
        if prior is not None
        else {"tests": None, "notes": [], "episodes": turns.first_turns(repair_row), "done": False}
    )
    if not state["episodes"]:
        return {**state, "done": True}
    if state["tests"] is None:
        first = {"samples": [{"index": e["index"], **e["turns"][0]} for e in state["episodes"]]}
        candidates = _patch_candidates(inst, first, ctx)
        reproductions = list(repair_row.get("reproduction_tests", [])) if cfg.reproduction else []
        found = turns.public_tests(
            inst, ctx.backend, regression_tests(inst, candidates, ctx, cfg), reproductions, state["notes"]
        )
        state["tests"] = found.to_row()
        save(state)
    tests = turns.PublicTests.from_row(state["tests"])
    sources, _, messages = _repair_prompt(inst, loc_row, ctx, cfg)
    read = _base_reader(inst, ctx, sources)
    episodes = state["episodes"]
    # Each phase saves its state when it moved an episode on (a resumed phase may have nothing to do).
    while any(e["stopped"] is None for e in episodes):
        if turns.give_feedback(inst, ctx.backend, tests, episodes, cfg.feedback_turns, ctx.feedback_dispatch):
            save(state)
        sampler, new_tokens = ctx.sampler, cfg.max_new_tokens
        if turns.answer_again(sampler, messages, episodes, read, max_new_tokens=new_tokens, seed=cfg.seed):
            save(state)
    return {**state, "done": True}


def final_answers(feedback_row: Mapping[str, Any], repair_row: Mapping[str, Any]) -> dict[str, Any]:
    """The repair row rerank reads, with each sample's last answer in place of its first."""
    samples = [{"index": e["index"], **e["turns"][-1]} for e in feedback_row.get("episodes", [])]
    return {**repair_row, "samples": samples}


# -- stage 4: rerank ------------------------------------------------------------------------------------


def _patch_candidates(inst: Instance, repair_row: dict[str, Any], ctx: Context) -> list[PatchCandidate]:
    out = []
    for sample in repair_row.get("samples", []):
        patch = sample.get("patch") or ""
        if not patch:
            continue
        paths = list(sample.get("paths") or [])
        old = {p: ctx.repos.read_file(inst.repo, inst.base_commit, p) for p in paths}
        try:
            new = apply_patch_to_contents({p: t for p, t in old.items() if t is not None}, patch)
        except PatchApplyError:
            continue
        out.append(PatchCandidate(int(sample["index"]), patch, old, new))
    return out


def regression_tests(
    inst: Instance, candidates: Sequence[PatchCandidate], ctx: Context, cfg: RunConfig
) -> list[str] | None:
    """The tests of the regression filter (None: the filter is off); see `agentless.rerank.select`."""
    if not cfg.regression:
        return None
    if cfg.regression_from_gold:
        return list(inst.pass_to_pass)
    edited = sorted({path for cand in candidates for path in cand.old})
    paths = [entry.path for entry in ctx.repos.files_at(inst.repo, inst.base_commit)]
    return related_test_files(paths, edited)


def rerank(inst: Instance, repair_row: dict[str, Any], ctx: Context, cfg: RunConfig) -> dict[str, Any]:
    candidates = _patch_candidates(inst, repair_row, ctx)
    tests = regression_tests(inst, candidates, ctx, cfg) if ctx.backend is not None else None
    reproductions = list(repair_row.get("reproduction_tests", [])) if cfg.reproduction else []

    def ask_model(passing: list[str]) -> list[str]:
        text, _ = _sample_text(ctx, regression_filter_messages(inst.problem_statement, passing), cfg)
        return parse_excluded_tests(text, passing)

    use_model = cfg.regression_model_filter and ctx.sampler is not None
    selection = select_patch(
        inst,
        candidates,
        backend=ctx.backend,
        regression_tests=tests,
        reproduction_tests=reproductions,
        exclude_regression=ask_model if use_model else None,
        max_groups=cfg.max_groups,
    )
    return {**selection.to_row(), "regression_tests": tests, "reproduction_parsed": len(reproductions)}


def prediction_metadata(cfg: RunConfig, rerank_row: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What shaped a prediction, kept with it: above all whether it used labels derived from the gold
    patch (the harness reads only instance_id, model_name_or_path and model_patch), and with reproduction
    tests on, how many were sampled, parsed and kept (failing at the base), and how many the chosen
    patch passes."""
    regression = (
        ("gold PASS_TO_PASS" if cfg.regression_from_gold else "repository tests") if cfg.regression else None
    )
    meta: dict[str, Any] = {
        "uses_gold_labels": cfg.regression and cfg.regression_from_gold,
        "regression": regression,
        "reproduction": cfg.reproduction,
        "num_samples": cfg.num_samples,
    }
    if cfg.feedback_turns > 0:
        meta["feedback_turns"] = cfg.feedback_turns
    if cfg.regression and cfg.regression_model_filter:
        meta["regression_model_filter"] = True
    if cfg.reproduction:
        row = rerank_row or {}
        chosen = next((g for g in row.get("groups", []) if row.get("chosen") in g["members"]), None)
        meta["reproduction_tests"] = {
            "sampled": cfg.reproduction_samples,
            "parsed": row.get("reproduction_parsed", 0),
            "kept": len(row.get("reproduction_kept", [])),
            "passed_by_chosen": chosen.get("reproduction_passed") if chosen else None,
        }
    return meta


# -- the whole run --------------------------------------------------------------------------------------


def _rows(out_dir: Path, stage: str) -> dict[str, dict[str, Any]]:
    return StageFile(stage_path(out_dir, stage)).by_id()


def _needs(rows: dict[str, dict[str, Any]], inst: Instance, stage: str) -> dict[str, Any]:
    row = rows.get(inst.instance_id)
    if row is None:
        raise RuntimeError(f"the {stage} stage has no row for this instance")
    if "stage_error" in row:  # the cause, not only that a stage before failed
        raise RuntimeError(f"the {stage} stage failed for this instance: {row['stage_error']}")
    return row


def run_localization(instances: Sequence[Instance], out_dir: Path, ctx: Context, cfg: RunConfig) -> None:
    """Stages 1 and 2 only (localization reports and benchmarks need nothing more)."""
    claim_stages(out_dir, cfg, ["localize_files", "localize_elements"])
    _run_stage("localize_files", instances, out_dir, ctx, lambda i: localize_files(i, ctx, cfg))
    files = _rows(out_dir, "localize_files")
    _run_stage(
        "localize_elements",
        instances,
        out_dir,
        ctx,
        lambda i: localize_elements(i, _needs(files, i, "localize_files"), ctx, cfg),
    )


def _run_feedback(
    instances: Sequence[Instance],
    out_dir: Path,
    ctx: Context,
    cfg: RunConfig,
    elements: dict[str, dict[str, Any]],
    repairs: dict[str, dict[str, Any]],
) -> None:
    """The feedback stage: an instance is finished when its row says `done`; an unfinished one goes on
    from its last saved state (a stage error's row is no state: the state before it is)."""
    stage = StageFile(stage_path(out_dir, "feedback"))
    saved = {row["instance_id"]: row for row in stage.rows() if "stage_error" not in row}

    def work(inst: Instance) -> dict[str, Any]:
        def save(state: dict[str, Any]) -> None:
            stage.append({"instance_id": inst.instance_id, **state})

        loc_row = _needs(elements, inst, "localize_elements")
        repair_row = _needs(repairs, inst, "repair")
        return feedback(inst, loc_row, repair_row, saved.get(inst.instance_id), ctx, cfg, save)

    _run_stage("feedback", instances, out_dir, ctx, work, finished=lambda row: bool(row.get("done")))


def run(instances: Sequence[Instance], out_dir: Path, ctx: Context, cfg: RunConfig) -> Path:
    """Every stage; returns the path of predictions.jsonl (one row per instance, empty patch if none)."""
    claim_stages(out_dir, cfg, cfg.stages())
    run_localization(instances, out_dir, ctx, cfg)
    elements = _rows(out_dir, "localize_elements")
    _run_stage(
        "repair",
        instances,
        out_dir,
        ctx,
        lambda i: repair(i, _needs(elements, i, "localize_elements"), ctx, cfg),
    )
    repairs = _rows(out_dir, "repair")
    if cfg.feedback_turns > 0:
        _run_feedback(instances, out_dir, ctx, cfg, elements, repairs)
        finals = _rows(out_dir, "feedback")
        repairs = {
            i.instance_id: final_answers(_needs(finals, i, "feedback"), _needs(repairs, i, "repair"))
            for i in instances
            if finals.get(i.instance_id, {}).get("done")
        }
    _run_stage("rerank", instances, out_dir, ctx, lambda i: rerank(i, _needs(repairs, i, "repair"), ctx, cfg))
    reranked = _rows(out_dir, "rerank")
    predictions = StageFile(stage_path(out_dir, "predictions"))
    done = predictions.finished_ids()
    for inst in instances:
        if inst.instance_id in done:
            continue
        row = reranked.get(inst.instance_id, {})
        if "stage_error" in row:
            continue  # retried on the next run rather than frozen as an empty prediction
        patch = str(row.get("patch") or "")
        predictions.append(
            {
                "instance_id": inst.instance_id,
                "model_name_or_path": cfg.model_name,
                "model_patch": patch,
                "metadata": prediction_metadata(cfg, row),
            }
        )
    return predictions.path
