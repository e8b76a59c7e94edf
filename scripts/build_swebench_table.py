#!/usr/bin/env python3
"""Rebuild `data_pipeline/filter/swebench_instances.json.gz`, the table of SWE-bench instances that mining
decontaminates against, from the datasets' Parquet files kept in the history of the SWE-bench/SWE-bench
GitHub repository (`data/<dataset>/<split>.parquet`, with the Hugging Face datasets' columns).

    git clone --bare https://github.com/SWE-bench/SWE-bench swe-bench.git
    python scripts/build_swebench_table.py swe-bench.git

For each dataset and split, the newest version of its file that git can read is used (a clone that
lacks a large object, such as a partial clone, falls back to an older version or, failing that, leaves the
split out and says so in the table's `sources`). Per instance the table keeps what decontamination
needs and nothing of the task itself: repository, PR number, base commit, creation time, the files the
gold patch touches and the datasets that hold the instance.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "data_pipeline" / "filter" / "swebench_instances.json.gz"
_SPLIT_FILE = re.compile(r"data/(SWE-bench[\w-]*)/(\w+)\.parquet")
_PATCH_PATH = re.compile(r"^(?:---|\+\+\+) [ab]/(.+?)\t?$", re.MULTILINE)
COLUMNS = ("instance_id", "repo", "pull_number", "base_commit", "created_at", "files", "datasets")


def _git(git_dir: Path, *args: str) -> bytes:
    return subprocess.run(["git", f"--git-dir={git_dir}", *args], capture_output=True, check=True).stdout


def split_versions(git_dir: Path) -> dict[str, list[tuple[str, str]]]:
    """`dataset/split` -> (commit, blob) of each version of its file, newest first."""
    listing = _git(git_dir, "log", "--all", "--format=%x00%H", "--raw", "--no-abbrev", "--", "data/")
    versions: dict[str, list[tuple[str, str]]] = {}
    for record in listing.decode().split("\0")[1:]:
        commit, *lines = record.strip().split("\n")
        for line in lines:
            meta, _, path = line.partition("\t")
            match = _SPLIT_FILE.fullmatch(path)
            if match is None or not meta.startswith(":"):
                continue
            blob = meta.split()[3]
            if set(blob) != {"0"}:  # a deletion names no new blob
                versions.setdefault(f"{match[1]}/{match[2]}", []).append((commit, blob))
    return versions


def read_split(git_dir: Path, blob: str) -> pa.Table | None:
    """The split's table, or None when git lacks the blob or it is not Parquet."""
    try:
        data = _git(git_dir, "cat-file", "blob", blob)
        return pq.read_table(
            pa.BufferReader(data), columns=["instance_id", "repo", "base_commit", "created_at", "patch"]
        )
    except (subprocess.CalledProcessError, pa.ArrowException):
        return None


def touched_files(patch: str) -> list[str]:
    """Paths a unified diff changes, from its `---`/`+++` lines (a deleted or added file appears once)."""
    return sorted({path for path in _PATCH_PATH.findall(patch) if path != "/dev/null"})


def build(git_dir: Path) -> dict:
    instances: dict[str, dict] = {}
    sources: dict[str, dict] = {}
    for split, versions in sorted(split_versions(git_dir).items()):
        readable = ((commit, blob, read_split(git_dir, blob)) for commit, blob in versions)
        commit, blob, table = next((found for found in readable if found[2] is not None), ("", "", None))
        if table is None:
            sources[split] = {"missing": True, "versions": len(versions)}
            print(
                f"{split}: none of its {len(versions)} versions can be read here; left out", file=sys.stderr
            )
            continue
        sources[split] = {"commit": commit, "blob": blob, "rows": table.num_rows}
        print(f"{split}: {table.num_rows} instances (commit {commit[:12]})", file=sys.stderr)
        for row in table.to_pylist():
            found = instances.setdefault(
                row["instance_id"],
                {
                    "instance_id": row["instance_id"],
                    "repo": row["repo"],
                    "pull_number": int(row["instance_id"].rpartition("-")[2]),
                    "base_commit": row["base_commit"],
                    "created_at": str(row["created_at"]),
                    "files": touched_files(row["patch"] or ""),
                    "datasets": [],
                },
            )
            found["datasets"].append(split)
    rows = [[item[column] for column in COLUMNS] for _, item in sorted(instances.items())]
    return {
        "source": "github.com/SWE-bench/SWE-bench data/",
        "splits": sources,
        "columns": COLUMNS,
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("git_dir", type=Path, help="a clone (bare or not) of SWE-bench/SWE-bench")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"default {DEFAULT_OUT}")
    args = parser.parse_args(argv)
    git_dir = args.git_dir / ".git" if (args.git_dir / ".git").exists() else args.git_dir
    table = build(git_dir)
    text = json.dumps(table, separators=(",", ":"), sort_keys=True).encode()
    with open(args.out, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, compresslevel=9) as out:
        out.write(text)  # mtime 0: the same inputs give the same bytes
    print(
        f"wrote {len(table['rows'])} instances to {args.out} ({args.out.stat().st_size} bytes)",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
