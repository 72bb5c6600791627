"""Entry point of `python -m kafkacompat.chaos` (see kafkacompat/cli/chaos.py)."""

import sys

from ..cli.chaos import main

sys.exit(main())
