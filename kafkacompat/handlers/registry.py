"""The API registry, found from the handler modules' own declarations.

Each handler module states at its top what its API is, as franz-go's kfake
does: `API = Api(key, (min, max), error answer)`. The registry, the
ApiVersions answer, the connection's version check, refusals and the test
fault injector all derive from those declarations, so adding a Kafka API is
adding one module to this package; nothing else lists API keys.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import pkgutil
from types import ModuleType

from kafkacompat.protocol.error_answers import ErrorAnswer, changes, reads

__all__ = ["Api", "ErrorAnswer", "Registry", "changes", "discover", "reads", "registry"]


@dataclasses.dataclass(frozen=True, slots=True)
class Api:
    """What one handler module serves."""

    key: int
    versions: tuple[int, int]  # (min, max) served
    answer: ErrorAnswer | None  # how a refusal or an injected error is answered; None: no injected errors
    advertised: bool = True  # False: a private API stock clients must never see in ApiVersions


@dataclasses.dataclass(frozen=True)
class Registry:
    handlers: dict[int, ModuleType]  # api key -> the module serving it
    apis: dict[int, Api]

    @functools.cached_property
    def advertised(self) -> dict[int, tuple[int, int]]:
        """api key -> (min, max): what ApiVersions lists."""
        return {key: api.versions for key, api in sorted(self.apis.items()) if api.advertised}

    @functools.cached_property
    def unadvertised(self) -> dict[int, tuple[int, int]]:
        """Private APIs served but never advertised (the admin CLI's stream API, replication links)."""
        return {key: api.versions for key, api in sorted(self.apis.items()) if not api.advertised}

    @functools.cached_property
    def answers(self) -> dict[int, ErrorAnswer]:
        """api key -> its error answer's shape (APIs that can have errors injected)."""
        return {key: api.answer for key, api in sorted(self.apis.items()) if api.answer is not None}

    def versions(self, key: int) -> tuple[int, int] | None:
        api = self.apis.get(key)
        return None if api is None else api.versions


def discover(package: str) -> Registry:
    """The registry of every module in `package` that declares an `API`."""
    root = importlib.import_module(package)
    handlers: dict[int, ModuleType] = {}
    apis: dict[int, Api] = {}
    for info in sorted(pkgutil.iter_modules(root.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        api = getattr(module, "API", None)
        if not isinstance(api, Api):
            continue  # a helper shared by handlers
        if api.key in handlers:
            raise RuntimeError(f"API key {api.key} declared by {handlers[api.key].__name__} and {module.__name__}")
        handlers[api.key] = module
        apis[api.key] = api
    return Registry(handlers, apis)


@functools.cache
def registry() -> Registry:
    """This broker's registry (found once, on first use)."""
    return discover(__package__ or "kafkacompat.handlers")
