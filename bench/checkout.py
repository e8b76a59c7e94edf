"""What a history-free test tree costs: `RepoCache.checkout` against a shared clone of the mirror.

A shared clone (`git clone --shared` and a checkout: the mirror's objects through an alternates file) is
the cheapest work tree git makes, and it exposes every later commit to the code under test;
`RepoCache.checkout` copies the base commit's objects into a repository of their own. The two run
alternately on the same commit, so a busy machine slows both alike; wall-clock and CPU seconds (of the
git processes) are medians over `--repeat` rounds.

    python bench/checkout.py --clones /work/data/clones --repo pytest-dev/pytest \
        --commit 7b77fc086aab8b3a8ebc890200371884555eea1e
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from swerl.git import run_git
from swerl.git.clones import RepoCache


def shared_clone(repos: RepoCache, repo: str, commit: str, dest: Path) -> None:
    run_git(None, "clone", "--quiet", "--shared", "--no-checkout", str(repos.bare_path(repo)), str(dest))
    run_git(dest / ".git", "-c", "advice.detachedHead=false", "checkout", "-q", "--detach", commit, cwd=dest)


def timed(make: Callable[[Path], object], scratch: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds of child processes) of one `make` into a fresh directory."""
    dest = Path(tempfile.mkdtemp(dir=scratch)) / "tree"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    make(dest)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    shutil.rmtree(dest.parent)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clones", type=Path, required=True)
    parser.add_argument("--repo", required=True)
    parser.add_argument("--commit", required=True)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        repos = RepoCache(scratch / "repos", mirror_dir=args.clones, offline=True)
        repos.ensure(args.repo, args.commit)
        ways: dict[str, Callable[[Path], object]] = {
            "shared clone": lambda d: shared_clone(repos, args.repo, args.commit, d),
            "RepoCache.checkout": lambda d: repos.checkout(args.repo, args.commit, d),
        }
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
        for _ in range(args.repeat):
            for name, make in ways.items():
                runs[name].append(timed(make, scratch))
    print(f"{args.repo} @ {args.commit[:12]}, {args.repeat} rounds")
    print("| tree | wall, median ms | CPU, median ms |")
    print("|---|---|---|")
    medians = {}
    for name, seconds in runs.items():
        medians[name] = [statistics.median(s[i] for s in seconds) * 1000 for i in (0, 1)]
        print(f"| {name} | {medians[name][0]:.0f} | {medians[name][1]:.0f} |")
    wall, cpu = (medians["RepoCache.checkout"][i] / medians["shared clone"][i] for i in (0, 1))
    print(f"ratio: {wall:.2f}x wall, {cpu:.2f}x CPU")


if __name__ == "__main__":
    main()
