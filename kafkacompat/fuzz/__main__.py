"""Coverage-guided fuzzing (atheris, libFuzzer) of what the broker reads from the network.

Two targets, each the broker's own code path for untrusted bytes:

- `frames`: a byte stream split into size-prefixed frames (FrameDecoder),
  each frame's request header, then the decode of the handler its API key
  names (kio through the bounds check, or Produce's own parser);
- `records`: a produce request's records field: batch headers and CRC
  (the CRC is recomputed first, so mutations reach past it), then Kafka's
  record validation, compressed bodies included.

Refusals (MalformedRequestError, FrameError, InvalidBatchError) are the
expected outcome; any other exception, or the process dying (as kio's
allocation failure did), is a finding. libFuzzer writes it as crash-<sha1>;
keep it under tests/fuzz_corpus/<target>/ so tests/test_fuzz.py replays
it forever.

    python -m kafkacompat.fuzz frames tests/fuzz_corpus/frames -max_total_time=3600
    python -m kafkacompat.fuzz records tests/fuzz_corpus/records -runs=100000

Arguments after the target are libFuzzer's (corpus directories, -runs,
-max_total_time, -artifact_prefix=...). atheris is installed with the
`fuzz` extra: pip install -e '.[fuzz]'.
"""

from __future__ import annotations

import sys

TARGET_NAMES = ("frames", "records")


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in TARGET_NAMES:
        sys.exit(f"usage: python -m kafkacompat.fuzz {{{','.join(TARGET_NAMES)}}} [libFuzzer arguments]")
    import atheris  # a fuzzing dependency only (the `fuzz` extra)

    # Instrument kafkacompat's modules only: all of them (asyncio, kio's hundreds
    # of schema modules) took minutes before the first input on a busy machine.
    with atheris.instrument_imports(include=["kafkacompat"]):
        from . import targets

    target = targets.TARGETS[argv.pop(0)]
    atheris.Setup([sys.argv[0], *argv], target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
