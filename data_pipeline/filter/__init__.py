"""Stage 2, filter (`rules`: which PRs and files are kept; `decontam`: benchmark instances and repositories
removed), and stage 4, dedup (`dedup`: near-duplicate oracle patches across the run)."""
