"""A mining run: the stages over shards, resumable at every shard (`runner`: the driver; `stages`: the
per-shard work of extract and render; `schedule`: which worker gets which shard; `shards`: the Parquet
files and the manifest)."""
