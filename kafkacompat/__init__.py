"""kafkacompat: a Kafka wire-protocol broker with MapR-style streams."""

# First, before any module imports kio: the protocol package loads kio with hypothesis hidden (see
# protocol/__init__.py). A module that imported kio itself first (the CLI's security client does) made
# every `kafkacompat` command and broker process import hypothesis where it is installed: 0.15-0.3 s of
# each start, which the test suite's thousands of processes paid in full.
from . import protocol  # noqa: F401

__version__ = "0.1.0"
