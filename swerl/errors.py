"""The errors a user can fix, shared by every part of swerl so the command line reports them one way.

Why one class: the `swerl` command prints a `UserError` as a single line (what went wrong and where) and
exits 1, and shows a traceback for anything else, because anything else is a bug in swerl. Library code
raises `UserError` (or a subclass) for bad input: a missing or malformed file, an option out of range, a
run directory that holds the results of other options. Keep the message self-contained: name the file,
key or option and what was expected, so the line alone tells the user what to change.
"""

from __future__ import annotations


class UserError(ValueError):
    """A problem with the user's input or options, reported as one line with exit status 1.

    A ValueError, so library callers that already catch ValueError for bad input keep working."""
