"""Stage 7, validate: rows run before and after their fix, kept when their tests prove it
(`rows`: input and output rows; `outcomes`: the verdict from the runs; `runner`: the resumable driver)."""
