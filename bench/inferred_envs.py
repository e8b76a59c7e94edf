"""Environments inferred without a spec, on real repositories at base commits of different ages.

For each repository (a directory of clones, as `--clones` takes them) and each target year, the first
commit of that year that changed a test file is taken as a base commit, dated by its committer date (no
PR date exists for a bare commit); its environment is built by `EnvManager` from the inferred recipes,
then the test files that commit changed are run in the local backend's sandbox. One JSON line per
(repository, commit): date, Python, recipe kept, build seconds, tests collected and passed, or the
environment's error. A second run over the same cache builds nothing (build seconds near 0).

    python bench/inferred_envs.py --clones /work/data/repos --cache /tmp/envs-bench \\
        --out bench-envs.jsonl --years 2016,2020,2024
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from swerl.execution.envs import EnvManager, EnvSetupError
from swerl.execution.instances import Instance
from swerl.execution.local import LocalBackend
from swerl.execution.recipes import recipe_from_json
from swerl.git.clones import RepoCache
from swerl.path_kinds import is_test_module


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def base_commits(mirror: Path, years: list[int]) -> list[tuple[str, str, list[str]]]:
    """(commit, date, test files it added or changed) for the first test-changing commit of each year; a
    year the history does not reach takes the nearest such commit not already taken."""
    log = _git(
        mirror,
        "log",
        "--first-parent",
        "--reverse",
        "--diff-filter=AM",
        "--name-only",
        "--format=%x00%H %cs",
        "HEAD",
    )
    commits = []
    for chunk in filter(None, log.split("\0")):
        head, *names = chunk.strip().splitlines()
        tests = [n for n in names if is_test_module(n)]
        if tests:
            sha, date = head.split()
            commits.append((sha, date, tests))
    chosen: list[tuple[str, str, list[str]]] = []
    for year in years:
        free = [c for c in commits if c not in chosen]
        in_year = [c for c in free if c[1].startswith(str(year))]
        if in_year or free:
            chosen.append(in_year[0] if in_year else min(free, key=lambda c: abs(int(c[1][:4]) - year)))
    return chosen


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clones", type=Path, required=True)
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--years", default="2016,2020,2024")
    parser.add_argument("--only", default="", help="comma-separated repository names to keep")
    args = parser.parse_args()
    years = [int(y) for y in args.years.split(",")]
    skipped: list[str] = []  # the recipes tried before the one kept, and why they failed
    handler = logging.Handler()
    handler.emit = lambda record: skipped.append(record.getMessage()[-1500:])  # type: ignore[method-assign]
    logging.getLogger("swerl.execution.envs").addHandler(handler)
    logging.getLogger("swerl.execution.envs").setLevel(logging.INFO)
    repos = RepoCache(args.cache / "repos", mirror_dir=args.clones, offline=True)
    envs = EnvManager(args.cache / "envs")
    backend = LocalBackend(repos, envs, timeout_s=600)
    done = set()
    if args.out.exists():
        done = {(r["repo"], r["commit"]) for r in map(json.loads, args.out.read_text().splitlines())}
    for mirror in sorted(args.clones.glob("*.git")):
        repo = mirror.name.removesuffix(".git").replace("+", "/", 1)
        if args.only and repo.split("/")[1] not in args.only.split(","):
            continue
        for sha, date, files in base_commits(mirror, years):
            if (repo, sha[:12]) in done:
                continue
            instance = Instance(
                f"{repo.replace('/', '__')}-{sha[:8]}",
                repo,
                sha,
                "",
                pass_to_pass=tuple(files),
                extra={"created_at": date},
            )
            row: dict[str, object] = {"repo": repo, "commit": sha[:12], "date": date, "tests": len(files)}
            skipped.clear()
            with tempfile.TemporaryDirectory() as scratch:
                tree = repos.checkout(repo, sha, Path(scratch) / "tree")
                start = time.perf_counter()
                try:
                    env = envs.env_for(instance, tree)
                except EnvSetupError as err:
                    row |= {"build_s": round(time.perf_counter() - start, 1), "error": str(err)[-3000:]}
                    env = None
                else:
                    row["build_s"] = round(time.perf_counter() - start, 1)
                    recipe = recipe_from_json(env.recipe)
                    row |= {
                        "python": recipe.python,
                        "recipe": recipe.name,
                        "requirements": recipe.requirements,
                    }
            if env is not None and files:
                start = time.perf_counter()
                run = backend.run_tests(instance, files)
                statuses = list(run.results.values())
                row |= {
                    "run_status": run.status,
                    "run_s": round(time.perf_counter() - start, 1),
                    "collected": len(statuses),
                    "passed": statuses.count("PASSED"),
                    "failed": statuses.count("FAILED") + statuses.count("ERROR"),
                }
                if not statuses:
                    row["log_tail"] = run.log[-1500:]
            row["skipped"] = list(skipped)
            with args.out.open("a") as out:
                out.write(json.dumps(row) + "\n")
            print(
                json.dumps({k: v for k, v in row.items() if k not in ("error", "log_tail", "skipped")}),
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
