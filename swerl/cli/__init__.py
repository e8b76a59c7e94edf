"""The `swerl` command line: one entry point, a module per command group."""

from __future__ import annotations

import gc


def silence_library_progress() -> None:
    """For --quiet: transformers and huggingface_hub draw bars of their own (loading weights, writing
    shards) that the command's own --quiet would not reach."""
    from huggingface_hub.utils import disable_progress_bars
    from transformers.utils import logging

    disable_progress_bars()
    logging.disable_progress_bar()


def exiting(code: int) -> int:
    """`code`, with everything the process holds moved out of the garbage collector's sight, for a
    command whose process exits next: the interpreter's last collections then skip it (after `swerl
    data mine`, ~20 ms of its exit walked the objects of numpy, pyarrow and the run), and memory is
    still freed as it always is at exit. Not for in-process callers of `main`, which keep running."""
    gc.freeze()
    return code
