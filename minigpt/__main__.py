"""`python -m minigpt`: the command line (minigpt/cli/)."""
import sys

from .cli import main

sys.exit(main())
