"""The Kafka wire protocol as pure functions over bytes: no sockets, no files."""

import sys


def _load_kio_without_hypothesis() -> None:
    """kio imports hypothesis, when installed, only to register test strategies
    for its types: about 0.1 s of import (over 1 s under pytest's assertion
    rewriting without a bytecode cache) that the broker never uses. Load
    kio's type module with hypothesis hidden, unless it is already imported."""
    if "hypothesis" in sys.modules or "kio.static._phantom" in sys.modules:
        return
    sys.modules["hypothesis"] = None  # type: ignore[assignment]  # makes `import hypothesis` fail
    try:
        import kio.static._phantom  # noqa: F401
    finally:
        del sys.modules["hypothesis"]


_load_kio_without_hypothesis()
