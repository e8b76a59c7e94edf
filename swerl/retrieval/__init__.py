"""Retrieval shared by mining and localization: BM25 over code (`bm25`), and the file paths a model's
answer names (`answers`). Both rank the files of a repository against an issue's text."""
