"""Where shard work runs: local processes or Ray (`pools`), the heap setting of a mining process
(`allocator`), and maps that spill to disk when a run outgrows memory (`spill`)."""
