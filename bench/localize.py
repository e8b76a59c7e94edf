"""Benchmark: model-free file localization (hit@1/3/5) and seconds per instance, cold and warm index.

Default (offline): NOT SWE-bench Lite. It builds real git repositories from this interpreter's standard
library (`swerl.synth_repo`: ~150 modules each, a few fix-like commits), and for each instance picks a
function at one commit, writes a gold patch that changes a line in it, and an issue of one of three
kinds, each written from what a user would see:
* traceback: a stack trace whose frames run from a caller in another module into the function;
* named: prose naming the function (or Class.method) in backticks, plus words from its docstring;
* vague: prose built only from words of the function's body and docstring, with no identifier at all.
Numbers are reported per kind, since the mix decides the total. They measure the ranking code on
realistic code bases, not the difficulty of real issues.

With network: `--dataset lite` (or a local SWE-bench file) runs the same model-free localization on real
instances, mirroring repositories from GitHub into --cache-dir.

    python bench/localize.py [--repos 3] [--per-repo 30] [--seed 0]
    python bench/localize.py --dataset lite --cache-dir runs/agentless-cache
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

from agentless.localize.index import IndexCache
from agentless.localize.skeleton import elements_of
from agentless.pipeline import Context, RunConfig, run_localization, stage_path
from agentless.report import KS, score_instance, summarize
from agentless.stages import StageFile
from swerl.edit_format import build_git_patch
from swerl.execution.instances import Instance, load_instances
from swerl.git.clones import RepoCache
from swerl.synth_repo import build_history, git, stdlib_sources

_WORD = re.compile(r"[A-Za-z]{4,}")
_BORING = {
    "self",
    "return",
    "none",
    "true",
    "false",
    "elif",
    "else",
    "import",
    "from",
    "with",
    "pass",
    "raise",
}


def _words(text: str, rng: random.Random, k: int) -> list[str]:
    words = [w.lower() for w in _WORD.findall(text) if w.lower() not in _BORING]
    # identifiers are split the way people write them in prose: parse_header -> "parse header"
    words = [p for w in words for p in w.split("_") if len(p) > 3]
    uniq = list(dict.fromkeys(words))
    return rng.sample(uniq, min(k, len(uniq)))


def _issue(
    kind: str, path: str, name: str, body: str, caller: tuple[str, str] | None, line: int, rng: random.Random
) -> str:
    words = _words(body, rng, 6)
    module = path.removesuffix(".py").replace("/", ".")
    if kind == "traceback" and caller is not None:
        cpath, cname = caller
        return (
            f"Unexpected error when using {' '.join(words[:3])}\n\n```\nTraceback (most recent call last):\n"
            f'  File "/srv/app/main.py", line 12, in <module>\n    run()\n'
            f'  File "/usr/lib/python3/site-packages/{cpath}", line 40, in {cname}\n    result = helper(x)\n'
            f'  File "/usr/lib/python3/site-packages/{path}", line {line}, in {name.rsplit(".", 1)[-1]}\n'
            f"    value = compute(item)\nTypeError: unsupported operand type(s)\n```\n"
        )
    if kind == "named":
        return (
            f"`{name}` gives a wrong result\n\nCalling `{module}`'s `{name}` with {' '.join(words[:2])} "
            f"returns something unexpected. I expected the {' '.join(words[2:5])} to be handled.\n"
        )
    return (
        f"Wrong behaviour with {' '.join(words[:2])}\n\nWhen the {' '.join(words[2:4])} is involved the "
        f"{' '.join(words[4:6])} comes out wrong. This used to work in the previous release.\n"
    )


def build_synthetic(root: Path, repos: int, per_repo: int, seed: int) -> tuple[list[Instance], Path]:
    rng = random.Random(seed)
    clones = root / "clones"
    instances: list[Instance] = []
    kinds = ["traceback", "named", "vague"]
    for r in range(repos):
        name = f"bench-org/stdlib{r}"
        repo = clones / name.replace("/", "__")
        sources = stdlib_sources(150, rng)
        build_history(repo, sources, commits=4, rng=rng)
        shas = git(repo, "rev-list", "--reverse", "HEAD").split()
        for i in range(per_repo):
            sha = rng.choice(shas)
            paths = sorted(
                p for p in git(repo, "ls-tree", "-r", "--name-only", sha).split() if p.endswith(".py")
            )
            for _ in range(50):
                path = rng.choice(paths)
                text = git(repo, "show", f"{sha}:{path}")
                funcs = [e for e in elements_of(text) if e.kind != "class" and e.end - e.start >= 4]
                if funcs:
                    break
            element = rng.choice(funcs)
            lines = text.split("\n")
            target = rng.randrange(element.start, element.end)  # a body line (0-based index start..end-1)
            new_lines = list(lines)
            new_lines[target] = new_lines[target] + "  # fixed"
            if new_lines[target].strip().startswith("#") or not lines[target].strip():
                new_lines[target] = lines[target] + "\n" + " " * 8 + "pass"
            patch = build_git_patch({path: text}, {path: "\n".join(new_lines)})
            other = rng.choice([p for p in paths if p != path])
            ofuncs = [e for e in elements_of(git(repo, "show", f"{sha}:{other}")) if e.kind == "function"]
            caller = (other, ofuncs[0].name) if ofuncs else None
            body = "\n".join(lines[element.start - 1 : element.end])
            kind = kinds[i % 3]
            issue = _issue(kind, path, element.name, body, caller, target + 1, rng)
            instances.append(
                Instance(
                    f"{name.replace('/', '__')}-{i}", name, sha, issue, patch=patch, extra={"kind": kind}
                )
            )
    return instances, clones


def _score(instances: list[Instance], out: Path, repos: RepoCache) -> dict[str, dict[str, float | int]]:
    rows = StageFile(stage_path(out, "localize_files")).by_id()
    elements = StageFile(stage_path(out, "localize_elements")).by_id()
    groups: dict[str, list] = {"all": []}
    for inst in instances:
        row, erow = rows[inst.instance_id], elements.get(inst.instance_id, {})
        result = score_instance(
            inst.instance_id,
            inst.patch,
            row.get("files", []),
            erow.get("elements", []),
            erow.get("edit_locations", []),
            lambda p, inst=inst: repos.read_file(inst.repo, inst.base_commit, p),
        )
        if result is None:
            continue
        groups["all"].append(result)
        groups.setdefault(str(inst.extra.get("kind", "real")), []).append(result)
    return {kind: summarize(results) for kind, results in groups.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", help="SWE-bench file / hub id / alias (needs network for GitHub)")
    parser.add_argument("--split", default="test")
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--repos", type=int, default=3)
    parser.add_argument("--per-repo", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--element-files", type=int, default=20, help="files the second stage re-ranks (0: first stage only)"
    )
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="swerl-bench-localize-"))
    try:
        if args.dataset:
            instances, clones = load_instances(args.dataset, split=args.split), None
        else:
            t0 = time.perf_counter()
            instances, clones = build_synthetic(tmp / "data", args.repos, args.per_repo, args.seed)
            print(
                f"built {len(instances)} synthetic instances in {time.perf_counter() - t0:.1f}s",
                file=sys.stderr,
            )
        cache = args.cache_dir or tmp / "cache"
        repos = RepoCache(cache / "repos", mirror_dir=clones, offline=clones is not None)
        for inst in instances:  # mirror first, so the timings below are localization only
            repos.ensure(inst.repo, inst.base_commit)
        cfg = RunConfig(model_localization=False, element_files=args.element_files)
        timings = {}
        for label in ("cold", "warm"):
            indexes = IndexCache(repos, cache / "index")
            ctx = Context(repos=repos, indexes=indexes, log=lambda _: None)
            out = tmp / f"run-{label}"
            t0 = time.perf_counter()
            run_localization(instances, out, ctx, cfg)
            timings[label] = (time.perf_counter() - t0) / len(instances), indexes.blobs_indexed
        results = _score(instances, tmp / "run-warm", repos)
        header = "| issues | n | " + " | ".join(f"hit@{k}" for k in KS) + " | element cov. | line cov. |"
        print(header)
        print("|" + "---|" * (header.count("|") - 1))
        for kind, s in results.items():
            hits = " | ".join(f"{float(s[f'file_hit@{k}']):.1%}" for k in KS)
            print(
                f"| {kind} | {s['instances']} | {hits} | {float(s['element_coverage']):.1%} "
                f"| {float(s['line_coverage']):.1%} |"
            )
        for label, (per, blobs) in timings.items():
            print(f"{label} index: {per * 1000:.0f} ms/instance (files + elements), {blobs} blobs tokenized")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
