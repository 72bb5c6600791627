"""Checks shared by the command lines' argument types.

An argument type raises argparse.ArgumentTypeError, whose message argparse
prints as the one line of a usage error; the number types of the admin,
console and replication commands differ only in their bound and wording.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeVar

Number = TypeVar("Number", int, float)


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
