"""`swerl data stats`: where the PRs went (the funnel) and what the rows look like (histograms).

The funnel is read from the manifest, so it is exact and instant however large the run. Histograms read
two small columns of the final shards. PNGs are drawn by matplotlib when it is installed; otherwise by a
tiny built-in PNG writer (bars and axes, no text; the numbers are printed alongside), so the command
never needs a plotting stack on a mining machine.
"""

from __future__ import annotations

import json
import statistics
import struct
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

from data_pipeline.shards import MANIFEST

_STAGE_ORDER = ("collect", "filter", "decontaminate", "extract", "context", "render", "dedup")


@dataclass
class Funnel:
    commits_scanned: int | None = None
    candidates: int = 0
    rows: int = 0
    drops: dict[str, Counter[str]] = field(default_factory=dict)
    complete: bool = False

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
        lines.append(
            f"rows                   {self.rows:>8}{'' if self.complete else '  (run not finished)'}"
        )
        return "\n".join(lines)


def funnel(out: Path) -> Funnel:
    """Counts per stage and drop reason, from the manifest and the drop shards."""
    path = out / MANIFEST
    if not path.exists():
        raise FileNotFoundError(f"{out} is not a mining output directory (no {MANIFEST})")
    manifest = json.loads(path.read_text(encoding="utf-8"))
    stages = manifest["stages"]
    result = Funnel()
    result.commits_scanned = stages.get("collect", {}).get("commits_scanned")
    result.candidates = sum(info["rows"] for info in stages.get("collect", {}).get("shards", {}).values())
    result.rows = sum(info["rows"] for info in stages.get("dedup", {}).get("shards", {}).values())
    result.complete = bool(stages.get("dedup", {}).get("done"))
    for stage, folder in (("collect", "collect"), ("build", "build"), ("dedup", "dedup")):
        for name in stages.get(stage, {}).get("shards", {}):
            drops = out / folder / name.replace("shard-", "drops-")
            for record in pq.read_table(drops, columns=["stage", "reason"]).to_pylist():
                result.drops.setdefault(record["stage"], Counter())[record["reason"]] += 1
    return result


def _column(out: Path, name: str) -> list[int]:
    values: list[int] = []
    for shard in sorted((out / "data").glob("shard-*.parquet")):
        values += pq.read_table(shard, columns=[name]).column(name).to_pylist()
    return values


def _bins(values: list[int], count: int = 20) -> tuple[list[int], float, float]:
    low, high = min(values), max(values)
    width = (high - low) / count or 1.0
    bins = [0] * count
    for value in values:
        bins[min(count - 1, int((value - low) / width))] += 1
    return bins, low, high


def write_png(path: Path, bins: list[int], width: int = 640, height: int = 400) -> None:
    """A bar chart as an RGB PNG, drawn pixel by pixel: white background, black axes, blue bars."""
    margin = 40
    pixels = [[(255, 255, 255)] * width for _ in range(height)]
    for x in range(margin, width - margin // 2):
        pixels[height - margin][x] = (0, 0, 0)
    for y in range(margin // 2, height - margin + 1):
        pixels[y][margin] = (0, 0, 0)
    top = max(bins) or 1
    span = (width - margin - margin // 2) / len(bins)
    for i, count in enumerate(bins):
        bar = int((height - margin - margin // 2) * count / top)
        for x in range(int(margin + 1 + i * span + 1), int(margin + (i + 1) * span)):
            for y in range(height - margin - bar, height - margin):
                pixels[y][x] = (52, 101, 164)
    raw = b"".join(b"\0" + bytes(c for pixel in row for c in pixel) for row in pixels)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    png = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw, 9))
        + chunk(b"IEND", b"")
    )
    path.write_bytes(png)


def _plot(path: Path, values: list[int], title: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        write_png(path, _bins(values)[0])
        return
    fig, ax = plt.subplots(figsize=(6.4, 4))
    ax.hist(values, bins=20)
    ax.set_title(title)
    ax.set_ylabel("instances")
    fig.savefig(path)
    plt.close(fig)


def write_histograms(out: Path, plots: Path) -> list[Path]:
    """prompt_tokens.png and files_per_instance.png (context files shown); prints their summaries."""
    plots.mkdir(parents=True, exist_ok=True)
    written = []
    for column, name, title in (
        ("prompt_tokens", "prompt_tokens.png", "prompt tokens per instance"),
        ("num_context_files", "files_per_instance.png", "context files per instance"),
    ):
        values = _column(out, column)
        if not values:
            continue
        print(
            f"{title}: n={len(values)} min={min(values)} "
            f"median={statistics.median(values):g} max={max(values)}"
        )
        _plot(plots / name, values, title)
        written.append(plots / name)
    return written
