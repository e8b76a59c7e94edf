"""swerl: reinforcement learning for code LLMs on real software-engineering data.

Subpackages: `swerl.edit_format` (the SWE-RL action format), `swerl.fastdiff` (exact, compiled difflib
equivalents), `swerl.reward` (rewards), `swerl.cli` (the `swerl` command).
"""

__version__ = "0.1.0"
