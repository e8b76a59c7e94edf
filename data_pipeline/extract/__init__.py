"""Stage 3, extract: each candidate's oracle patch and the contents of its files before and after, read
from the repository's objects (`commits`: history and patches; `contents`: the files; `edges`: line
counts carried from one version to the next)."""
