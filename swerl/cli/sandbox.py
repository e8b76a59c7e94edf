"""`swerl sandbox ...`: run a solution against a problem's tests in the sandbox, to debug verdicts."""

from __future__ import annotations

import argparse
import json
import os

from swerl.cli.args import existing_file, positive_float, positive_int
from swerl.errors import UserError
from swerl.sandbox.bwrap import WAIVABLE

TEST_SETS = ("public", "private", "generated")


def register(groups: argparse._SubParsersAction) -> None:
    group = groups.add_parser(
        "sandbox",
        help="run untrusted programs in the bubblewrap sandbox",
        description="The sandbox that runs model-written programs for RLEF: no network, read-only system, "
        "private /tmp, resource limits and a wall-clock timeout (see docs/sandbox.md).",
    )
    commands = group.add_subparsers(dest="command", metavar="SUBCOMMAND", required=True)
    run = commands.add_parser(
        "run",
        help="run a solution on a problem's tests and print each verdict",
        description="Run a Python solution on the tests of one problem (a JSON object in the "
        "deepmind/code_contests shape: public_tests / private_tests / generated_tests as "
        "{input: [...], output: [...]}, optional time_limit and memory_limit_bytes) and print one verdict "
        "per test, then the feedback the model would see for the first failing public test. Exit status "
        "0 when every test passed, 1 otherwise.",
        epilog="example: swerl sandbox run --problem problem.json --solution sol.py --tests public",
    )
    run.add_argument("--problem", required=True, type=existing_file, help="problem file (.json)")
    run.add_argument("--solution", required=True, type=existing_file, help="the program to run (.py)")
    run.add_argument(
        "--tests",
        type=test_sets,
        default=TEST_SETS,
        metavar="SETS",
        help="comma-separated test sets to run (default: all of public,private,generated)",
    )
    run.add_argument(
        "--time-limit",
        type=time_limit,
        metavar="S",
        help="seconds per test, at most a day (default: the problem's)",
    )
    run.add_argument(
        "--memory-limit-mb",
        type=memory_limit_mb,
        metavar="MB",
        help="address space, at least 32 (the interpreter's own); default: the problem's",
    )
    run.add_argument(
        "--workers", type=positive_int, metavar="N", help="tests in parallel (default: all cores)"
    )
    run.add_argument("--json", action="store_true", help="print one JSON object per test instead of a table")
    run.add_argument(
        "--unsafe-without",
        action="append",
        default=[],
        choices=WAIVABLE,
        metavar="PROTECTION",
        help="run even where this machine cannot provide PROTECTION (one of: " + ", ".join(WAIVABLE) + "; "
        "repeatable); see `swerl sandbox doctor`",
    )
    run.add_argument(
        "--unsafe-no-isolation",
        action="store_true",
        help="if bubblewrap is unavailable, run the program anyway WITHOUT isolation (it can read and "
        "write your files and use the network); only for programs you trust",
    )
    run.set_defaults(run=_run)
    doctor = commands.add_parser(
        "doctor",
        help="print which sandbox protections this machine provides",
        description="Check each protection of the sandbox on this machine (bubblewrap, seccomp filter, "
        "--disable-userns, per-test memory and process cgroups, uid switching) by trying it, print one "
        "line each, and run one program as a final proof. Exit status 0 when all are active, 1 otherwise.",
        epilog="example: swerl sandbox doctor",
    )
    doctor.set_defaults(run=_doctor)


def _doctor(args: argparse.Namespace) -> int:
    """One line per protection; the cgroup is the only one with an automatic fallback."""
    from swerl.sandbox import cgroups, seccomp
    from swerl.sandbox.bwrap import SandboxConfig, isolation_available, protections, resolve_bwrap
    from swerl.sandbox.pool import TestCase, run_tests

    config = SandboxConfig(waive=frozenset(WAIVABLE))
    problem = isolation_available(config)
    bwrap = None if problem else resolve_bwrap(config)
    guard = protections(config, bwrap)
    layout = cgroups.layout()
    rows = [
        ("bubblewrap", problem is None, problem or "namespaces, read-only system, no network"),
        (
            "seccomp",
            guard.seccomp_filter is not None,
            seccomp.unavailable()
            or f"deny-list of {len(seccomp.DENIED)} calls, namespace clone flags, "
            + ("memfd_create (no cgroup), " if isinstance(layout, str) else "")
            + "non-inet sockets",
        ),
        (
            "userns",
            guard.disable_userns,
            "bubblewrap --disable-userns" if guard.disable_userns else "missing",
        ),
        (
            "cgroup",
            guard.cgroups is not None,
            f"cgroup v{layout.version}: memory + pids per slot under {layout.memory_parent}"
            if not isinstance(layout, str)
            else f"{layout}; fallback: RLIMIT_AS per process, RLIMIT_NPROC per uid, memfd_create refused",
        ),
        (
            "uid",
            os.geteuid() == 0,
            "a uid of its own per slot" if os.geteuid() == 0 else "not root: programs run as this user",
        ),
    ]
    for name, active, detail in rows:
        print(f"{name:<11} {'active' if active else 'MISSING':<8} {detail}")
    if bwrap:
        [result] = run_tests("print(6 * 7)", [TestCase("", "42")], config=config)
        print(f"{'proof':<11} {'ok' if result.passed else 'FAILED':<8} a program ran: {result.verdict}")
        rows.append(("proof", result.passed, ""))
    return 0 if all(active for _, active, _ in rows) else 1


def test_sets(text: str) -> tuple[str, ...]:
    """--tests: a comma-separated choice among TEST_SETS, checked like any other choice (a usage error,
    exit 2) rather than once the problem has been read."""
    sets = tuple(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
    if not sets:
        raise argparse.ArgumentTypeError(f"give one or more of {', '.join(TEST_SETS)}")
    unknown = [name for name in sets if name not in TEST_SETS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown test set {', '.join(map(repr, unknown))}; choose from {', '.join(TEST_SETS)}"
        )
    return sets


def time_limit(text: str) -> float:
    """--time-limit: seconds, more than 0 and at most a day."""
    from swerl.codecontests.problems import MAX_TIME_LIMIT_S

    value = positive_float(text)
    if value > MAX_TIME_LIMIT_S:
        raise argparse.ArgumentTypeError(f"at most {MAX_TIME_LIMIT_S:.0f} seconds (a day), got {text}")
    return value


def memory_limit_mb(text: str) -> int:
    """--memory-limit-mb: enough for Python to start (below ~32 MiB it crashes before the program runs,
    which would read as the program's runtime error)."""
    value = positive_int(text)
    if value < 32:
        raise argparse.ArgumentTypeError(f"at least 32 (below it Python may fail to start), got {text}")
    return value


def _run(args: argparse.Namespace) -> int:
    from swerl.codecontests.checker import outputs_match
    from swerl.codecontests.feedback import render_feedback
    from swerl.codecontests.problems import parse_problem
    from swerl.sandbox.bwrap import SandboxConfig
    from swerl.sandbox.limits import MIB, Limits
    from swerl.sandbox.pool import run_tests

    sets = args.tests
    try:
        problem = parse_problem(json.loads(args.problem.read_text(encoding="utf-8")))
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError, AttributeError) as err:
        raise UserError(f"{args.problem}: not a problem in the code_contests shape ({err})") from None
    try:
        source = args.solution.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{args.solution}: not UTF-8 text; a solution is a Python source file") from None
    limits = problem.limits(Limits()).scaled(
        time_s=args.time_limit, memory_bytes=args.memory_limit_mb * MIB if args.memory_limit_mb else None
    )
    labelled = [(name, i, t) for name in sets for i, t in enumerate(getattr(problem, f"{name}_tests"))]
    if not labelled:
        raise UserError(
            f"{args.problem}: no tests in {', '.join(sets)} (a problem holds public_tests, private_tests "
            'and/or generated_tests, each {"input": [...], "output": [...]})'
        )
    config = SandboxConfig(allow_unisolated=args.unsafe_no_isolation, waive=frozenset(args.unsafe_without))
    tests = [t for _, _, t in labelled]
    results = run_tests(
        source, tests, checker=outputs_match, limits=limits, config=config, workers=args.workers
    )
    for (name, index, _), result in zip(labelled, results, strict=True):
        if args.json:
            print(json.dumps({"test": f"{name}[{index}]", **result.as_dict()}))
        else:
            print(
                f"{name + f'[{index}]':<16} {result.verdict:<14} wall {result.wall_s:6.3f}s  "
                f"cpu {result.cpu_s:6.3f}s  mem {result.peak_memory_bytes / MIB:7.1f} MiB"
            )
    public = [(t, r) for (name, _, t), r in zip(labelled, results, strict=True) if name == "public"]
    feedback = render_feedback([t for t, _ in public], [r for _, r in public]) if public else None
    if feedback and not args.json:
        print("\n--- feedback for the model ---\n" + feedback)
    return 0 if all(r.passed for r in results) else 1
