"""The console's SCRAM users page: list users, add one (or set a new password), remove one.

Each is a Kafka request through the broker's own handler as the logged-in
principal (DescribeUserScramCredentials, AlterUserScramCredentials), so it
needs DESCRIBE or ALTER on the cluster, as kafka-configs.sh --alter
--add-config SCRAM-SHA-256=... does. As that tool, the console salts and
hashes the password itself and sends only the salted password; the
password never reaches the store. Changes are offered only to who may
ALTER the cluster.
"""

from __future__ import annotations

import secrets
from typing import Any
from urllib.parse import urlencode

from aiohttp import web
from kio.schema.errors import ErrorCode

from ...handlers.describe_user_scram_credentials import MECHANISM_CODES
from ...security.acls import Operation
from ...security.scram import DEFAULT_ITERATIONS, salted_password
from ..kafka_calls import build, call
from ..principal import caller
from .pages import cluster_of
from .permission import authorizing, form_refusal
from .render import render

DESCRIBE_USERS, ALTER_USERS = 50, 51
MECHANISMS = sorted(MECHANISM_CODES)
MAX_FORM_BYTES = 64 * 1024


async def _listing(request: web.Request) -> tuple[list[dict[str, Any]], str | None]:
    answer = await call(cluster_of(request), DESCRIBE_USERS, build(DESCRIBE_USERS, users=None))
    if answer.error_code:
        return [], answer.error_message or ErrorCode(answer.error_code).name
    names = {code: name for name, code in MECHANISM_CODES.items()}
    rows = [{"user": r.user, "mechanisms": [(names.get(c.mechanism, str(c.mechanism)), c.iterations)
                                            for c in r.credential_infos]}
            for r in answer.results if not r.error_code]
    return sorted(rows, key=lambda r: r["user"]), None


def _may_alter(request: web.Request) -> bool:
    if not authorizing(request):
        return False
    who = caller(request)
    return bool(who.cluster.authorizer.cluster(who, Operation.ALTER, log_denied=False))


async def page(request: web.Request, error: str | None = None, status: int = 200) -> web.Response:
    """GET /console/users: the SCRAM users with their mechanisms, and the forms that change them."""
    rows, refused = await _listing(request)
    if refused is not None and status == 200 and "authoriz" in refused.lower():
        status = 403
    return render(request, "users.html", status=status, title="Users", users=rows, refused=refused,
                  may_alter=_may_alter(request) and await form_refusal(request, None) is None,
                  mechanisms=MECHANISMS, error=error, done=request.query.get("done"))


async def change(request: web.Request) -> web.Response:
    """POST /console/users/add (user, password, mechanism) or /console/users/remove (user, mechanism)."""
    if request.content_length is not None and request.content_length > MAX_FORM_BYTES:
        raise web.HTTPRequestEntityTooLarge(max_size=MAX_FORM_BYTES, actual_size=request.content_length)
    form = {k: v for k, v in (await request.post()).items() if isinstance(v, str)}
    denied = await form_refusal(request, None)
    if denied is not None:
        return await page(request, error=denied, status=403)
    user, mechanism = form.get("user", "").strip(), form.get("mechanism", "")
    if not user or mechanism not in MECHANISM_CODES:
        return await page(request, error=f"give a user name and one of {', '.join(MECHANISMS)}", status=400)
    adding = request.path.endswith("/add")
    code = MECHANISM_CODES[mechanism]
    deletions: tuple[Any, ...] = ()
    upsertions: tuple[Any, ...] = ()
    if adding:
        password = form.get("password", "")
        if not password:
            return await page(request, error="give the user a password", status=400)
        salt = secrets.token_bytes(32)
        upsertions = (build(ALTER_USERS, "ScramCredentialUpsertion", name=user, mechanism=code,
                            iterations=DEFAULT_ITERATIONS, salt=salt,
                            salted_password=salted_password(mechanism, password, salt, DEFAULT_ITERATIONS)),)
    else:
        deletions = (build(ALTER_USERS, "ScramCredentialDeletion", name=user, mechanism=code),)
    answer = await call(cluster_of(request), ALTER_USERS,
                        build(ALTER_USERS, deletions=deletions, upsertions=upsertions))
    (result,) = answer.results
    if result.error_code:
        status = 403 if ErrorCode(result.error_code) == ErrorCode.cluster_authorization_failed else 400
        return await page(request, error=result.error_message or ErrorCode(result.error_code).name, status=status)
    raise web.HTTPSeeOther("/console/users?" + urlencode({"done": f"{user}: {mechanism} "
                                                                  f"{'set' if adding else 'removed'}"}))
