"""Localization: which files, which functions/classes, which line ranges a fix should touch.

`signals` reads hints out of the issue text, `index` caches per-(repository, commit) term statistics,
`files` ranks files (model-free and with a model, then merged), `skeleton` compresses files to
signatures, `elements` picks functions/classes and their line ranges.
"""
