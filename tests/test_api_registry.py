"""One registry per API: each handler module declares its key, versions and error answer, and nothing else does.

The ApiVersions answer, the connection's version check and the test fault
injector derive from the modules' `API` declarations, so adding a Kafka API
is adding one module to kafkacompat/handlers.
"""

from __future__ import annotations

import collections
import importlib
import json
import pkgutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from kafkacompat.protocol.messages import make
from kio.schema.errors import ErrorCode

import kafkacompat.handlers
from kafkacompat.handlers import SUPPORTED, UNADVERTISED
from kafkacompat.handlers.registry import Api, discover
from kafkacompat.testing import Broker
from tests.wire import Wire, request_class

ROOT = Path(__file__).resolve().parents[1]


def _declarations() -> collections.Counter[int]:
    """How many modules of the handlers package declare each API key."""
    package = kafkacompat.handlers
    found: collections.Counter[int] = collections.Counter()
    for info in pkgutil.iter_modules(package.__path__):
        api = getattr(importlib.import_module(f"{package.__name__}.{info.name}"), "API", None)
        if isinstance(api, Api):
            found[api.key] += 1
    return found


def test_every_advertised_api_has_exactly_one_declaration_and_every_declaration_is_served(broker: Broker) -> None:
    with Wire(broker.bootstrap_servers) as wire:
        response = wire.request(18, 4, make(request_class(18, 4), client_software_name="wire",
                                            client_software_version="1"))
    advertised = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    declared = _declarations()
    assert [key for key, count in declared.items() if count != 1] == []
    assert set(declared) == set(advertised) | set(UNADVERTISED)
    assert advertised == SUPPORTED and not set(advertised) & set(UNADVERTISED)


def test_two_modules_declaring_one_key_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "twice"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name in ("first", "second"):
        (package / f"{name}.py").write_text("from kafkacompat.handlers.registry import Api, reads\n"
                                            "API = Api(71, (0, 0), reads())\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(RuntimeError, match="API key 71 declared by twice.first and twice.second"):
        discover("twice")


# A handler for GetTelemetrySubscriptions (key 71, which this broker does not serve), dropped into the handlers
# package of a fresh interpreter: with no other change, it is advertised, served, and can have errors injected.
NEW_HANDLER = '''
"""GetTelemetrySubscriptions: no metrics wanted."""
from kio.schema.errors import ErrorCode
from kafkacompat.protocol.error_answers import filled_response
from kafkacompat.handlers.registry import Api, reads

API = Api(71, (0, 0), reads())


async def handle(ctx, request):
    return filled_response(71, ctx.version, ErrorCode.none)
'''
WITH_NEW_HANDLER = '''
import importlib.util, json, sys
spec = importlib.util.find_spec("kafkacompat.handlers")
spec.submodule_search_locations.append(sys.argv[1])  # as if the module were in kafkacompat/handlers
package = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = package
spec.loader.exec_module(package)

from kafkacompat.protocol.messages import make
from kafkacompat.testing import Broker
from tests.wire import Wire, request_class

with Broker() as broker, Wire(broker.bootstrap_servers) as wire:
    versions = wire.request(18, 3, make(request_class(18, 3), client_software_name="wire", client_software_version="1"))
    served = wire.request(71, 0, make(request_class(71, 0), client_instance_id=None))
    broker.faults.fail("GetTelemetrySubscriptions", "NOT_COORDINATOR")
    injected = wire.request(71, 0, make(request_class(71, 0), client_instance_id=None))
print(json.dumps({"advertised": [[k.api_key, k.min_version, k.max_version] for k in versions.api_keys],
                  "served": served.error_code.value, "injected": injected.error_code.value}))
'''


def test_adding_a_handler_module_is_the_only_step_to_add_an_api(tmp_path: Path) -> None:
    (tmp_path / "get_telemetry_subscriptions.py").write_text(textwrap.dedent(NEW_HANDLER))
    run = subprocess.run([sys.executable, "-c", WITH_NEW_HANDLER, str(tmp_path)], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert [71, 0, 0] in seen["advertised"]
    assert len(seen["advertised"]) == len(SUPPORTED) + 1
    assert seen["served"] == ErrorCode.none.value
    assert seen["injected"] == ErrorCode.not_coordinator.value
