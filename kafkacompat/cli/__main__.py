"""`python -m kafkacompat.cli`, as `python -m kafkacompat` and the `kafkacompat` script."""

import sys

from . import main

sys.exit(main())
