"""The test-outcome witness: a pytest plugin that runs inside the sandbox, next to the code under test.

swerl never imports this module. `swerl.execution.witness` copies it into the sandbox and pytest loads
it with `-p swerl_witness` (through PYTEST_ADDOPTS) while it parses its command line: after pytest's own
modules, before any conftest, test module or code under test is imported. It then

1. keeps references to pytest's reporting machinery as it found it (report construction, call info,
   the runtest functions, the hook callers), and records each test phase's outcome from the call's own
   exception info, the moment the phase ends, to a file descriptor the sandbox inherited from swerl (not
   to stdout, which the code under test shares, and closed to the test's own child processes);
2. when the tests start and when the session ends, records what of that machinery was replaced since it
   loaded, and every runtest hook implementation that the code under test registered (one defined in a
   file of the repository that is neither pytest's own, a conftest.py nor a test file, and that the
   answer's patch changed: a plugin the repository itself ships, as the base commit has it, is its own).

swerl compares these records with the statuses the harness parsed from the log. "Replaced since it
loaded" is what makes this hold on pytest's own repository, where pytest *is* the code under test: the
witness trusts the pytest it loads under, whatever its source says, and watches for changes made while
the tests run.

The plugin runs in the test environment's interpreter, which may be as old as Python 2.7 with pytest
4.6 (`recipes.PYTEST_FLOOR`): hence no f-strings and no annotations here.
"""

import fcntl
import json
import os
import sys

import _pytest
import _pytest.outcomes
import _pytest.python
import _pytest.reports
import _pytest.runner
import _pytest.terminal
import _pytest.unittest
import pluggy
import pytest

_FD_VAR = "SWERL_WITNESS_FD"
_CHANGED_VAR = "SWERL_WITNESS_CHANGED"
_ADDOPTS = "-p swerl_witness"
_RUNTEST_HOOKS = (
    "pytest_runtestloop",
    "pytest_runtest_protocol",
    "pytest_runtest_setup",
    "pytest_runtest_call",
    "pytest_runtest_teardown",
    "pytest_runtest_makereport",
    "pytest_runtest_logreport",
    "pytest_report_teststatus",
    "pytest_pyfunc_call",
    "pytest_terminal_summary",
)
"""Hooks whose implementations decide or render a test's outcome."""
_CLASSES = (
    ("_pytest.reports.BaseReport", getattr(_pytest.reports, "BaseReport", None)),
    ("_pytest.reports.TestReport", getattr(_pytest.reports, "TestReport", None)),
    ("_pytest.runner.CallInfo", getattr(_pytest.runner, "CallInfo", None)),
    ("_pytest.python.Function", getattr(_pytest.python, "Function", None)),
    ("_pytest.unittest.TestCaseFunction", getattr(_pytest.unittest, "TestCaseFunction", None)),
    ("_pytest.terminal.TerminalReporter", getattr(_pytest.terminal, "TerminalReporter", None)),
)
"""Classes watched whole: every attribute of their class dictionary (methods, properties)."""
_MODULE_NAMES = (
    (
        _pytest.runner,
        (
            "call_and_report",
            "call_runtest_hook",
            "runtestprotocol",
            "pytest_runtest_protocol",
            "pytest_runtest_call",
            "pytest_runtest_makereport",
            "check_interactive_exception",
            "CallInfo",
            "TestReport",
        ),
    ),
    (_pytest.reports, ("TestReport", "BaseReport")),
    (_pytest.python, ("pytest_pyfunc_call", "Function")),
    (_pytest.unittest, ("pytest_runtest_makereport", "TestCaseFunction")),
    (_pytest.terminal, ("TerminalReporter", "_get_line_with_reprcrash_message", "_get_pos")),
)
_MISSING = object()
_SKIPPED = _pytest.outcomes.Skipped
_XFAILED = getattr(_pytest.outcomes, "XFailed", ())
_write = os.write
_dumps = json.dumps
_isinstance = isinstance


def _open_fd():
    """The inherited descriptor, closed on exec so the test's own child processes cannot write to it;
    -1 outside swerl's sandbox, where nothing is changed. The variables swerl set are removed: the tests
    see the environment the harness gives them."""
    value = os.environ.pop(_FD_VAR, None)
    if value is None:
        return -1
    addopts = os.environ.pop("PYTEST_ADDOPTS", "")
    rest = addopts.replace(_ADDOPTS, "", 1).strip()
    if rest:
        os.environ["PYTEST_ADDOPTS"] = rest
    here = os.path.dirname(os.path.abspath(__file__))
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != here]
    if paths:
        os.environ["PYTHONPATH"] = os.pathsep.join(paths)
    else:
        os.environ.pop("PYTHONPATH", None)
    try:
        fd = int(value)
        fcntl.fcntl(fd, fcntl.F_SETFD, fcntl.fcntl(fd, fcntl.F_GETFD) | fcntl.FD_CLOEXEC)
    except (ValueError, OSError):
        return -1
    return fd


def _changed_files():
    """The files the answer's patch changed (paths in the tree, as swerl names them), or None when swerl
    did not say: then every runtest hook in the repository's own code counts as the code under test's."""
    value = os.environ.pop(_CHANGED_VAR, None)
    try:
        return None if value is None else frozenset(json.loads(value))
    except ValueError:
        return None


_CHANGED = _changed_files()
_FD = _open_fd()
_ROOT = os.path.realpath(os.getcwd())


def _record(**fields):
    if _FD >= 0:
        _write(_FD, (_dumps(fields, sort_keys=True) + "\n").encode("utf-8"))


def _trusted_dirs():
    dirs = [os.path.dirname(os.path.realpath(_pytest.__file__)), os.path.dirname(os.path.realpath(__file__))]
    dirs.append(os.path.dirname(os.path.realpath(pluggy.__file__)))
    if os.path.basename(pytest.__file__).startswith("__init__."):
        dirs.append(os.path.dirname(os.path.realpath(pytest.__file__)))
    return [d for d in dirs if d != _ROOT]


_TRUSTED = _trusted_dirs()
_PYTEST_FILE = os.path.splitext(os.path.realpath(pytest.__file__))[0]


def _watch_class(prefix, cls, watched, inherited):
    """Every attribute of the class dictionary; `inherited` gains the names its bases define, which the
    class gaining later would shadow (a new name of its own is pytest's business: legacypath adds some)."""
    for attr, value in list(vars(cls).items()):
        watched[prefix + "." + attr] = value
    for base in cls.__mro__[1:-1]:
        inherited.update(prefix + "." + attr for attr in vars(base))


def _snapshot(manager):
    """(name -> object of everything watched, names that would shadow an inherited attribute);
    `manager` adds pluggy's hook machinery."""
    watched, inherited = {}, set()
    for name, cls in _CLASSES:
        if cls is not None:
            _watch_class(name, cls, watched, inherited)
    for module, names in _MODULE_NAMES:
        for attr in names:
            watched[module.__name__ + "." + attr] = getattr(module, attr, _MISSING)
    if manager is not None:
        watched["pluginmanager._inner_hookexec"] = getattr(manager, "__dict__", {}).get("_inner_hookexec")
        for cls in type(manager).__mro__[:-1]:
            _watch_class("pluginmanager." + cls.__name__, cls, watched, inherited)
        for hook in _RUNTEST_HOOKS:
            caller = getattr(manager.hook, hook, None)
            watched["hook." + hook] = caller
            if caller is not None:
                watched["hook." + hook + "._hookexec"] = getattr(caller, "_hookexec", None)
                _watch_class("hook." + type(caller).__name__, type(caller), watched, inherited)
    return watched, inherited


_AT_LOAD = _snapshot(None)
_STATE = {"manager": None, "at_register": None}


def _test_code(path):
    """Whether a file of the repository is test code (as swerl's reward guards it) or a conftest.py."""
    parts = os.path.relpath(path, _ROOT).split(os.sep)
    name = parts[-1]
    if name == "conftest.py" or set(parts[:-1]) & {"tests", "test", "testing"}:
        return True
    stem = name[:-3] if name.endswith(".py") else ""
    return stem.startswith("test_") or stem.endswith("_test") or stem.endswith("_tests")


def _foreign(function):
    """Where a hook implementation was defined when that is the code under test, else None."""
    function = getattr(function, "__func__", function)
    code = getattr(function, "__code__", None)
    if code is None:
        return repr(function)
    path = os.path.realpath(code.co_filename)
    if os.path.splitext(path)[0] == _PYTEST_FILE or any(path.startswith(d + os.sep) for d in _TRUSTED):
        return None
    if not path.startswith(_ROOT + os.sep) or (os.path.isfile(path) and _test_code(path)):
        return None  # installed plugins (outside the tree), conftest.py files and test files
    if _CHANGED is not None and os.path.relpath(path, _ROOT).replace(os.sep, "/") not in _CHANGED:
        return None  # the repository's own plugin as the base commit has it (an answer changed other files)
    return os.path.relpath(path, _ROOT) if path.startswith(_ROOT + os.sep) else path


def _tampered():
    """What was replaced since load (or since pytest registered the witness), and foreign hook impls."""
    manager = _STATE["manager"]
    now = _snapshot(manager)[0]
    before, inherited = _STATE["at_register"] or _AT_LOAD
    changed = sorted(k for k in before if before[k] is not now.get(k, _MISSING))
    changed += sorted(k for k in set(now) - set(before) if k in inherited)
    if manager is not None:
        for hook in _RUNTEST_HOOKS:
            caller = getattr(manager.hook, hook, None)
            for impl in caller.get_hookimpls() if caller is not None else ():
                where = _foreign(impl.function)
                if where is not None:
                    changed.append(hook + " implemented in " + where)
    return changed


def _distributed(config):
    """Whether the tests run in pytest-xdist's worker processes, which the witness does not see."""
    return bool(getattr(config.option, "numprocesses", None)) and config.pluginmanager.hasplugin("xdist")


def _xfail_marked(item):
    iter_markers = getattr(item, "iter_markers", None)
    return bool(iter_markers is not None and list(iter_markers(name="xfail")))


def _raised(item, call):
    """The phase's outcome from its own exception info: none, skip, xfail or error."""
    excinfo = call.excinfo
    if excinfo is None:
        return "none"
    value = excinfo.value
    if _XFAILED and _isinstance(value, _XFAILED):
        return "xfail"
    if _isinstance(value, _SKIPPED):
        return "skip"
    return "xfail" if _xfail_marked(item) else "error"


@pytest.hookimpl(trylast=True)
def pytest_plugin_registered(plugin, manager):
    if _STATE["manager"] is None:  # the first call: pytest registering the witness (earlier ones replay)
        _STATE["manager"] = manager
        _STATE["at_register"] = _snapshot(manager)
        _record(e="start", pytest=getattr(pytest, "__version__", "?"), python=sys.version.split()[0])


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session):
    _record(e="check", at="runtestloop", tampered=_tampered(), distributed=_distributed(session.config))


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_makereport(item, call):
    """Innermost of the wrappers: the phase's exception info as the runner's own hooks left it, before
    any outer wrapper sees the report."""
    yield
    test = item.config.cwd_relative_nodeid(item.nodeid)
    _record(e="phase", id=test, when=call.when, raised=_raised(item, call))


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    _record(e="check", at="sessionfinish", tampered=_tampered(), distributed=_distributed(session.config))
