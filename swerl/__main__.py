"""`python -m swerl ...`: the same as the `swerl` command (also what launchers run: `torchrun -m swerl`)."""

import sys

from swerl.cli.main import entry

sys.exit(entry())
