"""DescribeUserScramCredentials: which SCRAM mechanisms (and iteration counts) each user has; never the keys."""

from __future__ import annotations

from typing import Any

from ..security.scram import MECHANISMS
from ..services import Request, Security
from .common import NO_THROTTLE, ErrorCode, make, schema_of
from .registry import Api, reads

# DescribeUserScramCredentials v0
API = Api(50, (0, 0), reads())

MECHANISM_CODES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}  # Kafka's ScramMechanism type bytes
assert set(MECHANISM_CODES) == set(MECHANISMS)


async def handle(ctx: Request[Security], request: Any) -> Any:
    m = schema_of(ctx)
    users = ctx.cluster.credentials.users()
    asked = [u.name for u in request.users] if request.users else sorted(users)  # null or empty: every user
    results = []
    for name in dict.fromkeys(asked):
        if asked.count(name) > 1:
            results.append(make(m.DescribeUserScramCredentialsResult, user=name,
                                error_code=ErrorCode.duplicate_resource, credential_infos=(),
                                error_message="Cannot describe SCRAM credentials for the same user twice in a "
                                              "single request"))
        elif not users.get(name):
            results.append(make(m.DescribeUserScramCredentialsResult, user=name,
                                error_code=ErrorCode.resource_not_found, credential_infos=(),
                                error_message=f"Attempt to describe a user credential that does not exist: {name}"))
        else:
            infos = tuple(make(m.CredentialInfo, mechanism=MECHANISM_CODES[mech], iterations=cred.iterations)
                          for mech, cred in sorted(users[name].items()))
            results.append(make(m.DescribeUserScramCredentialsResult, user=name, error_code=ErrorCode.none,
                                error_message=None, credential_infos=infos))
    return make(m.DescribeUserScramCredentialsResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                error_message=None, results=tuple(results))
