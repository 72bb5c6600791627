"""Broker loggers (ConfigResource BROKER_LOGGER): Python logging levels under Kafka's level names.

`kafka-configs --entity-type broker-loggers` lists this process's loggers
(the root logger as "root", then every kafkacompat.* logger) with their
effective levels, and sets or resets (DELETE: back to inheriting) a level
at once. As on Kafka, levels are not persisted: a restart starts from the
configured log_level.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping

from .topic_configs import InvalidConfigError

DYNAMIC_BROKER_LOGGER_CONFIG = 6
ROOT = "root"
_PREFIX = "kafkacompat"
# Kafka (log4j) level names -> Python levels; Python's own names map back to Kafka's.
_TO_PYTHON = {"TRACE": 5, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
              "ERROR": logging.ERROR, "FATAL": logging.CRITICAL, "OFF": logging.CRITICAL + 10}
_TO_KAFKA = {level: name for name, level in _TO_PYTHON.items()}


def _logger(name: str) -> logging.Logger:
    return logging.getLogger() if name == ROOT else logging.getLogger(name)


def _names() -> list[str]:
    """kafkacompat's loggers: those made so far and one per loaded module (made on first use)."""
    made = logging.Logger.manager.loggerDict
    modules = [name for name in sys.modules if name == _PREFIX or name.startswith(_PREFIX + ".")]
    return sorted({*modules, *(n for n in made if n == _PREFIX or n.startswith(_PREFIX + "."))})


def _known(name: str) -> bool:
    return name == ROOT or name in _names()


def level_name(level: int) -> str:
    """The Kafka name of a Python level (the nearest one at or below it)."""
    at_or_below = [value for value in _TO_KAFKA if value <= level]
    return _TO_KAFKA[max(at_or_below)] if at_or_below else "TRACE"


def describe() -> dict[str, str]:
    """Logger name -> effective level, root first."""
    return {name: level_name(_logger(name).getEffectiveLevel()) for name in [ROOT, *_names()]}


def check_changes(changes: Mapping[str, str | None]) -> None:
    for name, level in changes.items():
        if not _known(name):
            raise InvalidConfigError(f"Logger {name} does not exist!")
        if level is not None and level.upper() not in _TO_PYTHON:
            raise InvalidConfigError(f"Cannot set the log level of {name} to {level} as it is not a supported "
                                     f"log level. Valid log levels are {', '.join(_TO_PYTHON)}")
        if level is None and name == ROOT:
            raise InvalidConfigError("Removing the log level of the root logger is not allowed")


def apply(changes: Mapping[str, str | None]) -> None:
    """Set (a level) or reset (None: inherit from the parent) each named logger."""
    for name, level in changes.items():
        _logger(name).setLevel(_TO_PYTHON[level.upper()] if level is not None else logging.NOTSET)
