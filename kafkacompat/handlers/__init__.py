"""One module per Kafka API, each declaring at its top what it serves (`API = Api(key, versions, error answer)`).

The registry is found from those declarations (registry.py): adding a Kafka
API is adding one module to this package.
"""

from __future__ import annotations

from types import ModuleType

from kafkacompat.protocol.error_answers import ErrorAnswer

from .registry import registry

REGISTRY = registry()
HANDLERS: dict[int, ModuleType] = REGISTRY.handlers  # api key -> the module serving it
SUPPORTED: dict[int, tuple[int, int]] = REGISTRY.advertised  # api key -> (min, max) that ApiVersions lists
UNADVERTISED: dict[int, tuple[int, int]] = REGISTRY.unadvertised  # private APIs stock clients must not see
ERROR_ANSWERS: dict[int, ErrorAnswer] = REGISTRY.answers  # api key -> how its error answers are built
