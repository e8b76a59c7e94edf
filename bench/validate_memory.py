"""`swerl data validate`'s peak memory on a large input, and its wall time, for one or more code trees.

The input: the rows of mining outputs (`--rows`, each a `swerl data mine` output), `--copies` times
with the instance ids made unique and the test patches removed, so that every row is judged without
running anything (`no_test_change`) and what is measured is the reading, the bookkeeping and the
writing. With `--executable`, OUT is first given a results.jsonl that calls every row executable, as a
resumed run finds it: the run then writes test.parquet of every row.

Each code tree (`--code`, a checkout of this repository; the current one without it) runs
`python -m swerl data validate INPUT --out OUT --offline --quiet` in a process of its own, `--rounds`
times, the trees alternating; peak RSS is the process's own (VmHWM), wall time the command's.
Medians. The test.parquet files of the trees are compared: the same rows, and whether the same bytes.

    python bench/validate_memory.py --rows runs/mined-* --copies 10 --code ../main --code . --executable
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from swerl.paths import row_files


def make_input(sources: list[Path], copies: int, folder: Path) -> int:
    """A folder of Parquet files: each source's rows `copies` times, ids suffixed, no test patch.
    Returns the number of rows."""
    folder.mkdir(parents=True)
    files = [file for source in sources for file in row_files(source)]
    total = 0
    for copy in range(copies):
        for k, file in enumerate(files):
            table = pq.read_table(file)
            ids = pc.binary_join_element_wise(table["instance_id"], pa.scalar(f"-copy{copy}"), "")
            table = table.set_column(table.schema.get_field_index("instance_id"), "instance_id", ids)
            blank = pa.array([""] * len(table))
            table = table.set_column(table.schema.get_field_index("test_patch"), "test_patch", blank)
            pq.write_table(table, folder / f"rows-{copy:03d}-{k:04d}.parquet")
            total += len(table)
    return total


def call_executable(rows: Path, out: Path) -> None:
    """OUT as a killed run would leave it had it judged every row of ROWS executable."""
    out.mkdir(parents=True)
    run = {"kind": "validate", "input": str(rows.resolve()), "repeats": 2}
    (out / "run.json").write_text(json.dumps(run) + "\n")
    with (out / "results.jsonl").open("w") as handle:
        for file in sorted(rows.glob("*.parquet")):
            for iid in pq.read_table(file, columns=["instance_id"]).column(0).to_pylist():
                record = {
                    "instance_id": iid,
                    "reason": "executable",
                    "detail": "",
                    "FAIL_TO_PASS": ["tests/test_a.py::test_fix"],
                    "PASS_TO_PASS": ["tests/test_a.py::test_keep"],
                    "flaky": [],
                    "env_recipe": "{}",
                    "version": "1.0",
                    "seconds": 1.0,
                }
                handle.write(json.dumps(record, sort_keys=True) + "\n")


# The command's own high-water mark, written as it exits: a child's ru_maxrss (wait4, /usr/bin/time
# from a large parent) counts the parent's pages it was forked with, this process's hundreds of MiB.
_PEAK = """import atexit, runpy, sys
def peak(path):
    with open("/proc/self/status") as status, open(path, "w") as out:
        out.write(next(line.split()[1] for line in status if line.startswith("VmHWM:")))
atexit.register(peak, sys.argv.pop(1))
sys.argv[0] = "swerl"
runpy.run_module("swerl", run_name="__main__", alter_sys=True)
"""


def run_once(code: Path, rows: Path, out: Path, cache: Path, executable: bool) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one `swerl data validate` in a fresh OUT."""
    shutil.rmtree(out, ignore_errors=True)
    if executable:
        call_executable(rows, out)
    peak = out.with_name(out.name + ".peak")
    argv = [sys.executable, "-W", "ignore", "-c", _PEAK, str(peak), "data", "validate", str(rows)]
    argv += ["--out", str(out), "--cache-dir", str(cache), "--offline", "--quiet"]
    env = {**os.environ, "PYTHONPATH": str(code)}
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, stderr=subprocess.PIPE, cwd=code, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{code}: validate failed: {done.stderr.decode()[-2000:]}")
    return wall, int(peak.read_text()) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=Path, nargs="+", required=True, help="swerl data mine outputs")
    parser.add_argument("--copies", type=int, default=10)
    parser.add_argument("--code", type=Path, action="append", help="a checkout to run (repeatable)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--executable", action="store_true", help="every row executable: test.parquet of all")
    args = parser.parse_args()
    codes = [path.resolve() for path in args.code or [Path.cwd()]]
    with tempfile.TemporaryDirectory(prefix="validate-memory-") as tmp:
        root = Path(tmp)
        rows = root / "rows"
        n = make_input(args.rows, args.copies, rows)
        size = sum(file.stat().st_size for file in rows.iterdir()) / 2**20
        print(f"{n} rows, {size:.0f} MiB of Parquet; load average {os.getloadavg()[0]:.1f}")
        walls: dict[Path, list[float]] = {code: [] for code in codes}
        peaks: dict[Path, list[float]] = {code: [] for code in codes}
        for round_ in range(args.rounds):
            order = codes if round_ % 2 == 0 else codes[::-1]
            for code in order:
                out = root / f"out-{codes.index(code)}"
                wall, peak = run_once(code, rows, out, root / "cache", args.executable)
                walls[code].append(wall)
                peaks[code].append(peak)
        print(f"load average after: {os.getloadavg()[0]:.1f}")
        print("| code | wall, median s (runs) | peak RSS, median MiB (runs) |")
        print("|---|---|---|")
        for code in codes:
            runs_wall = ", ".join(f"{w:.1f}" for w in walls[code])
            runs_peak = ", ".join(f"{p:.0f}" for p in peaks[code])
            print(
                f"| {code} | {statistics.median(walls[code]):.1f} ({runs_wall}) | "
                f"{statistics.median(peaks[code]):.0f} ({runs_peak}) |"
            )
        outputs = [root / f"out-{i}" / "test.parquet" for i in range(len(codes))]
        digests = {hashlib.sha256(path.read_bytes()).hexdigest()[:16] for path in outputs}
        same_rows = all(pq.read_table(path).equals(pq.read_table(outputs[0])) for path in outputs)
        groups = [pq.ParquetFile(path).metadata.num_row_groups for path in outputs]
        print(f"test.parquet: same rows {same_rows}, same bytes {len(digests) == 1}, row groups {groups}")


if __name__ == "__main__":
    main()
