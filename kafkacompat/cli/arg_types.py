"""Checks shared by the command lines' argument types.

An argument type raises argparse.ArgumentTypeError, whose message argparse
prints as the one line of a usage error. The admin, console and replication
commands' types either parse with a function that raises its own error
(`parsed`) or read a number with a lower bound (`number_at_least`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeVar

Number = TypeVar("Number", int, float)
Parsed = TypeVar("Parsed")


def parsed(parse: Callable[[str], Parsed], text: str,
           errors: type[Exception] | tuple[type[Exception], ...] = ValueError) -> Parsed:
    """parse(text); the `errors` it raises become a usage error with the same message."""
    try:
        return parse(text)
    except errors as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def number_at_least(text: str, convert: Callable[[str], Number], minimum: Number,
                    not_a_number: str, too_small: str) -> Number:
    """`text` as a number no smaller than `minimum`, or a usage error saying why.

    `not_a_number` follows the quoted text ("'x' is not a whole number");
    `too_small` is a format string given the parsed `value`.
    """
    try:
        value = convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} {not_a_number}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(too_small.format(value=value))
    return value


def count(text: str) -> int:
    """A whole number of at least 1 (partitions, messages)."""
    return number_at_least(text, int, 1, "is not a whole number", "must be at least 1, not {value}")


def partition_number(text: str) -> int:
    return number_at_least(text, int, 0, "is not a partition number", "partition numbers start at 0, not {value}")


def name_value(text: str) -> tuple[str, str]:
    """NAME=VALUE, as --config takes it; the value may be empty."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE")
    return name, value
