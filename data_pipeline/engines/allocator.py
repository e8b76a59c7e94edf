"""C heap settings for a mining process: keep the memory of freed large buffers for the next shard.

Every shard allocates and frees buffers of megabytes: the blobs and rebuilt files of its PRs, the
prompts, the Arrow columns of its Parquet file. glibc's malloc serves blocks past a threshold with a
fresh `mmap` and gives them back to the kernel when freed, and trims the top of its heap once enough of
it is free; the next shard's buffers then fault every page in again (the kernel zeroes each one). On
the mining benchmark about a tenth of the run's CPU was the kernel handling such faults, and raising
both thresholds saved ~0.1 s of ~3.2 s CPU: the memory stays in the process, bounded by the trim
threshold, and is reused.

Process-wide, so the command line (`swerl data mine`) sets it for its own process before the worker
processes fork from it (they inherit the heap's settings); a program that calls `runner.mine` decides
for itself. Elsewhere than glibc nothing is changed.
"""

from __future__ import annotations

import ctypes
import os

# mallopt parameters, from glibc's malloc.h.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

# Blocks up to MMAP_THRESHOLD come from the heap (glibc's own adaptive threshold stops at 32 MiB), and up
# to TRIM_THRESHOLD of free memory at its top is kept instead of returned.
MMAP_THRESHOLD = 64 << 20
TRIM_THRESHOLD = 128 << 20


def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds for this process; False where the C library is not glibc
    (or refuses), which changes nothing but speed."""
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc"):
            return False
        mallopt = ctypes.CDLL(None).mallopt
    except (ValueError, OSError, AttributeError):  # no such confstr name, no C library handle, no mallopt
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
