"""GitHub issues and merged pull requests -> Parquet SWE-RL training prompts.

The folders are the stages, in the order a row meets them:

1. `sources/` collect: merged PRs and their problem texts (local history, GitHub REST API, GH Archive).
2. `filter/` filter: the rules on a candidate (`rules`) and decontamination against benchmarks
   (`decontam`).
3. `extract/` extract: the oracle patch and the contents of the files it touches, from the git objects.
4. `filter/dedup` dedup: near-duplicate oracle patches removed across the whole run.
5. `context/` context: the files a prompt shows, within the token budget.
6. `render/` render: the prompt and the training row (`swerl.edit_format`).

`run/` runs them over shards (manifest keys and folders of the output: collect, extract, dedup, render),
on the engines of `engines/`; `report/` reads a finished run (statistics, splits).
"""
