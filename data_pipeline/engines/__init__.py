"""Where shard work runs: local processes or Ray (`pools`), and maps that spill to disk when a run
outgrows memory (`spill`)."""
