"""Fuzzing the broker's handling of untrusted bytes: `python -m kafkacompat.fuzz` (coverage-guided)
and `python -m kafkacompat.fuzz.network` (mutated client frames against a running broker).

Imports nothing at package level, so the coverage-guided run can instrument
the broker's modules as it imports them.
"""
