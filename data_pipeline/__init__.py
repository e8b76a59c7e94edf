"""GitHub issues and merged pull requests -> Parquet SWE-RL training prompts (stages: collect, checkout,
extract, filter, context, render). Built on `swerl.edit_format` for prompt rendering."""
