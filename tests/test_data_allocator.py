"""`allocator.keep_freed_memory`: freed large buffers stay in the process and are reused."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from data_pipeline.engines import allocator

# Page faults while a 40 MiB buffer (past glibc's adaptive mmap threshold, whose ceiling is 32 MiB) is
# allocated, filled and freed five times: the kernel faults a fresh mapping in every time, unless the
# block comes from a heap that kept it.
_FAULTS = """
import resource, sys
from data_pipeline.engines.allocator import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
bytearray(40 << 20)  # the first one faults in either case
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    bytearray(40 << 20)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    out = subprocess.run(
        [sys.executable, "-c", _FAULTS, mode], capture_output=True, text=True, env=env, check=True
    )
    return int(out.stdout)


@pytest.mark.skipif(not os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc"), reason="glibc malloc only")
def test_freed_large_buffers_are_reused_without_page_faults():
    pages = (40 << 20) // os.sysconf("SC_PAGE_SIZE")
    assert _faults("default") >= 5 * pages * 0.9  # each buffer faulted in afresh
    assert _faults("keep") < pages // 10


def test_keep_freed_memory_leaves_other_c_libraries_alone(monkeypatch):
    monkeypatch.setattr(allocator.os, "confstr", lambda name: "musl")
    assert allocator.keep_freed_memory() is False
