"""`swerl data stats`: where the PRs went (the funnel) and what the rows look like (histograms).

The funnel is read from the manifest, so it is exact and instant however large the run. Histograms read
two small columns of the final shards, one shard at a time, and are drawn by matplotlib with the Agg
backend (no display needed on a mining machine), with the count written on each bar so the picture can
be read without guessing from the axis.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from data_pipeline.run.shards import read_drops, read_table, stage_dir, upgraded
from swerl.paths import data_shards, read_manifest

_STAGE_ORDER = ("collect", "filter", "decontaminate", "extract", "dedup", "context", "render")


@dataclass
class Funnel:
    commits_scanned: int | None = None
    candidates: int = 0
    rows: int = 0
    drops: dict[str, Counter[str]] = field(default_factory=dict)
    complete: bool = False
    # CPU seconds the workers spent per shard stage ("extract": filter, decontaminate, extract;
    # "render": context and prompts), summed over the shards this output's runs finished.
    cpu: dict[str, float] = field(default_factory=dict)

    def text(self) -> str:
        lines = []
        if self.commits_scanned is not None:
            lines.append(f"commits scanned        {self.commits_scanned:>8}")
        lines.append(f"candidate PRs          {self.candidates:>8}")
        remaining = self.candidates
        for stage in _STAGE_ORDER:
            reasons = self.drops.get(stage)
            if not reasons:
                continue
            if stage == "collect":  # repeats of an instance id never became candidates
                lines.append("dropped before candidates")
            else:
                remaining -= sum(reasons.values())
                lines.append(f"after {stage:<16} {remaining:>8}")
            for reason, n in reasons.most_common():
                lines.append(f"  - {reason:<28} {n:>6}")
        if not self.complete and remaining > self.rows:
            # Candidates of shards a stopped run had not got through yet: not dropped, not rows either.
            lines.append(f"  - not yet through every stage {remaining - self.rows:>5}")
        lines.append(
            f"rows                   {self.rows:>8}{'' if self.complete else '  (run not finished)'}"
        )
        if self.cpu:
            spent = ", ".join(f"{stage} {seconds:.1f} s" for stage, seconds in self.cpu.items())
            lines.append(f"worker CPU             {spent} (git's own CPU not included)")
        return "\n".join(lines)


def funnel(out: Path) -> Funnel:
    """Counts per stage and drop reason, from the manifest and the drop shards."""
    stages = upgraded(read_manifest(out))["stages"]
    result = Funnel()
    result.commits_scanned = stages.get("collect", {}).get("commits_scanned")
    result.candidates = sum(info["rows"] for info in stages.get("collect", {}).get("shards", {}).values())
    result.rows = sum(info["rows"] for info in stages.get("render", {}).get("shards", {}).values())
    result.complete = bool(stages.get("render", {}).get("done"))
    for stage in ("extract", "render"):
        shards = stages.get(stage, {}).get("shards", {}).values()
        if any("cpu_s" in info for info in shards):
            result.cpu[stage] = sum(info.get("cpu_s", 0.0) for info in shards)
    for stage in ("collect", "extract", "dedup", "render"):
        for name in stages.get(stage, {}).get("shards", {}):
            drops = stage_dir(out, stage) / name.replace("shard-", "drops-")
            for record in read_drops(drops, ["stage", "reason"]):
                result.drops.setdefault(record["stage"], Counter())[record["reason"]] += 1
    return result


def validation_funnel(out: Path) -> tuple[str, Counter[str]]:
    """The funnel of a `swerl data validate` output, as text and as counts per verdict: rows per
    verdict in the order `REASONS` gives, each with the share of the rows that change tests and the
    first line of one example's detail, and the flaky tests left out."""
    from data_pipeline.validate.outcomes import REASONS
    from data_pipeline.validate.runner import read_results

    results = list(read_results(out).values())
    counts = Counter(record["reason"] for record in results)
    tested = len(results) - counts["no_test_change"]
    lines = [f"rows                         {len(results):>6}"]
    lines.append(f"  no test change             {counts['no_test_change']:>6}")
    lines.append(f"rows that change tests       {tested:>6}")
    for reason in REASONS[2:]:
        if counts[reason]:
            example = next(r for r in results if r["reason"] == reason)
            said = (example["detail"].strip().splitlines() or [""])[0][:100]
            share = f"{counts[reason] / tested:>5.0%}" if tested else ""
            lines.append(
                f"  - {reason:<24} {counts[reason]:>6} {share}  e.g. {example['instance_id']}: {said}"
            )
    share = f" ({counts['executable'] / tested:.0%} of the rows that change tests)" if tested else ""
    lines.append(f"executable                   {counts['executable']:>6}{share}")
    flaky = sum(len(record["flaky"]) for record in results)
    lines.append(f"flaky tests left out         {flaky:>6}")
    network = [record for record in results if record.get("network")]
    in_rows = f" (in {len(network)} rows)" if network else ""
    lines.append(f"tests needing the network    {sum(len(r['network']) for r in network):>6}{in_rows}")
    seconds = sum(record["seconds"] for record in results)
    lines.append(f"time in validation           {seconds:>6.0f} s (summed over rows)")
    lines += strength_lines(results)
    return "\n".join(lines), counts


STRENGTH_BINS = ((0.0, 0.5), (0.5, 0.75), (0.75, 1.0), (1.0, 1.0))
"""The test strength table's bins: [low, high), the last one exactly 1 (every mutant killed)."""


def strength_bands(values: list[float]) -> list[tuple[str, int]]:
    """(label, rows) per `STRENGTH_BINS` band."""
    bands = []
    for low, high in STRENGTH_BINS:
        inside = sum(1 for v in values if (v == 1.0 if low == high else low <= v < high))
        bands.append(("1.00 (all killed)" if low == high else f"{low:.2f}-{high:.2f}", inside))
    return bands


def plot_strength(path: Path, values: list[float], title: str) -> None:
    """Rows per test strength band as bars, each with its count (matplotlib, Agg)."""
    bands = strength_bands(values)
    axis = "test strength (share of the gold patch's mutants the tests kill)"
    _bars(path, [label for label, _ in bands], [n for _, n in bands], ["tab:blue"] * len(bands), axis, title)


def _bars(
    path: Path,
    labels: list[str],
    counts: list[int],
    colors: list[str],
    axis: str,
    title: str,
    *,
    rows: bool = False,
) -> None:
    """A bar chart PNG with each bar's count written on it; `rows`: one horizontal bar per label, top
    down (matplotlib, Agg: no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 0.5 * len(labels) + 1.5 if rows else 4), layout="constrained")
    try:
        bars = (ax.barh if rows else ax.bar)(labels, counts, color=colors)
        ax.bar_label(bars, padding=3)
        if rows:
            ax.invert_yaxis()
        else:
            ax.set_ylabel("rows")
        ax.set_xlabel(axis)
        ax.set_title(title)
        ax.margins(**({"x": 0.12} if rows else {"y": 0.15}))
        fig.savefig(path, dpi=100)
    finally:
        plt.close(fig)


def strength_lines(results: list[dict]) -> list[str]:
    """The test strength of the executable rows that measured it (`validate --mutants`): how many rows
    per bin, the median, how many rows let a mutant survive, the mutants and the time they took."""
    executable = [r for r in results if r["reason"] == "executable"]
    measured = [r for r in executable if r.get("test_strength") is not None]
    unmeasured = sum(1 for r in executable if "mutants_run" not in r)
    no_mutant = sum(1 for r in executable if r.get("mutants_run") == 0)
    if not measured:
        return [f"test strength not measured ({unmeasured} executable rows)"] if unmeasured else []
    values = [r["test_strength"] for r in measured]
    lines = [f"test strength: {len(values)} rows, median {statistics.median(values):.2f}"]
    for label, inside in strength_bands(values):
        lines.append(f"  {label:<26} {inside:>6} {inside / len(values):>5.0%}")
    weak = sum(1 for r in measured if r["surviving_mutants"])
    lines.append(f"rows with a surviving mutant {weak:>6} {weak / len(values):>5.0%}")
    run = sum(r["mutants_run"] for r in measured)
    killed = sum(r["mutants_killed"] for r in measured)
    lines.append(f"mutants killed / run         {killed:>6} / {run}")
    if no_mutant:
        lines.append(f"executable, no mutant to run {no_mutant:>6}")
    if unmeasured:
        lines.append(f"executable, not measured     {unmeasured:>6}")
    seconds = sum(r["mutation_seconds"] for r in measured)
    lines.append(f"time in mutation testing     {seconds:>6.0f} s (summed over rows, part of the above)")
    return lines


def plot_validation_funnel(path: Path, counts: Counter[str], title: str) -> None:
    """The rows that change tests per verdict as horizontal bars, executable first, each with its count
    (matplotlib, Agg: no display needed)."""
    from data_pipeline.validate.outcomes import REASONS

    reasons = [reason for reason in REASONS if reason != "no_test_change" and counts[reason]]
    colors = ["tab:green" if reason == "executable" else "tab:gray" for reason in reasons]
    _bars(path, reasons, [counts[r] for r in reasons], colors, "rows that change tests", title, rows=True)


def _column(out: Path, name: str) -> list[int]:
    """`name` of every row in the data shards the manifest records (`data_shards`)."""
    values: list[int] = []
    for shard in data_shards(out, read_manifest(out)):
        values += read_table(shard, [name]).column(name).to_pylist()
    return values


def plot_histogram(path: Path, values: list[int], title: str, xlabel: str, bins: int = 20) -> None:
    """A histogram PNG with title, axis labels, the count on each non-empty bar and n/median in a note."""
    import matplotlib

    matplotlib.use("Agg")  # before pyplot: no display, no GUI toolkit
    import matplotlib.pyplot as plt

    low, high = min(values), max(values)
    # Integer data over a short range: one bar per value, centred on it (not bins straddling values).
    edges: int | list[float] = bins
    if high - low < bins:
        edges = [v - 0.5 for v in range(low, high + 2)]
    fig, ax = plt.subplots(figsize=(8, 4.5), layout="constrained")
    try:
        counts, _, bars = ax.hist(values, bins=edges, edgecolor="white")
        ax.bar_label(bars, labels=[str(int(c)) if c else "" for c in counts], fontsize=8, padding=2)
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("instances")
        ax.margins(y=0.12)
        ax.annotate(
            f"n={len(values)}  median={statistics.median(values):g}  max={high}",
            xy=(0.99, 0.97),
            xycoords="axes fraction",
            ha="right",
            va="top",
            fontsize=9,
        )
        fig.savefig(path, dpi=100)
    finally:
        plt.close(fig)


def write_histograms(out: Path, plots: Path) -> list[Path]:
    """prompt_tokens.png and files_per_instance.png (context files shown); prints their summaries."""
    plots.mkdir(parents=True, exist_ok=True)
    written = []
    for column, name, title, xlabel in (
        ("prompt_tokens", "prompt_tokens.png", "prompt tokens per instance", "prompt tokens"),
        ("num_context_files", "files_per_instance.png", "context files per instance", "files shown"),
    ):
        values = _column(out, column)
        if not values:
            continue
        print(
            f"{title}: n={len(values)} min={min(values)} "
            f"median={statistics.median(values):g} max={max(values)}"
        )
        plot_histogram(plots / name, values, title, xlabel)
        written.append(plots / name)
    return written
