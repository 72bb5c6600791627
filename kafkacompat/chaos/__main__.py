"""Entry point of `python -m kafkacompat.chaos` (see cli.py)."""

import sys

from ..cli.chaos import main

sys.exit(main())
