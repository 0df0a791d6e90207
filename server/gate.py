"""The gate every HTTP request passes before a handler runs (an ASGI middleware).

FastAPI reads and parses a JSON body before it resolves a handler's dependencies, so neither a
token check nor a body limit in a dependency can come first. The gate finds the route a request
will reach and, in this order and before a byte of the body is read:

1. authenticates it if the route takes a tenant (:func:`server.deps.current_tenant` among its
   dependencies): exactly one ``Authorization: Bearer <token>`` header (RFC 6750), a known,
   unexpired token; else 401 at once. The tenant rides in ``scope["state"]``.
2. refuses a declared ``Content-Length`` over the route's limit (413), and counts the bytes of
   every body as they arrive, chunked ones included: past the limit it answers 413 itself and
   the handler's next read fails, so nothing past the limit is read.

A route's limit is ``max_body_bytes``, or the setting its ``x-body-limit`` OpenAPI extension
names (part uploads: ``max_part_bytes``). Unknown routes and wrong methods pass through to the
router's 404 and 405, which read no body.
"""
from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import anyio
from fastapi.routing import APIRoute
from fastapi.dependencies.models import Dependant
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server.deps import current_tenant
from server.errors import AuthenticationError, PayloadTooLargeError, ServiceError, error_body
from server.tenants import tenant_for_token

# RFC 7235 credentials: the scheme (case-insensitive), one space, an RFC 6750 b64token, nothing after
_BEARER = re.compile(r"(?i:bearer) ([A-Za-z0-9\-._~+/]+=*)")
WWW_AUTHENTICATE = (b"www-authenticate", b'Bearer realm="fhe-ml"')


def bearer_token(headers: Sequence[tuple[bytes, bytes]]) -> str:
    """The token of the request's one ``Authorization: Bearer <token>`` header, or AuthenticationError."""
    values = [value for name, value in headers if name == b"authorization"]
    if not values:
        raise AuthenticationError("missing bearer token (Authorization: Bearer <token>)")
    if len(values) > 1:
        raise AuthenticationError(f"{len(values)} Authorization headers; send exactly one")
    match = _BEARER.fullmatch(values[0].decode("latin-1"))
    if match is None:
        raise AuthenticationError("malformed Authorization header: expected 'Bearer <token>' "
                                  "(one space, the token's characters A-Z a-z 0-9 - . _ ~ + / then any '=')")
    return match.group(1)


def takes_tenant(route: APIRoute) -> bool:
    """Whether the route's handler depends on the authenticated tenant."""

    def uses(dependant: Dependant) -> bool:
        return dependant.call is current_tenant or any(uses(d) for d in dependant.dependencies)

    return uses(route.dependant)


class BodyTooLargeError(PayloadTooLargeError):
    """Raised into the handler by the gate's ``receive`` once a body passes its limit (the gate
    has answered 413 already)."""


class RequestGate:
    """The ASGI middleware (see the module docstring); ``routes``: the app's API routes, in the
    router's order."""

    def __init__(self, app: ASGIApp, routes: Sequence[APIRoute]):
        self.app = app
        # per route: whether it takes a token, and the setting that bounds its body
        self.routes = [(route, takes_tenant(route), (route.openapi_extra or {}).get("x-body-limit", "max_body_bytes"))
                       for route in routes]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = self._route(scope) if scope["type"] == "http" else None
        if found is None:
            await self.app(scope, receive, send)
            return
        needs_token, limit_setting = found
        service = scope["app"].state.service
        headers = scope["headers"]
        limit = getattr(service.settings, limit_setting)
        try:
            if needs_token:
                token = bearer_token(headers)
                scope.setdefault("state", {})["tenant"] = await anyio.to_thread.run_sync(
                    tenant_for_token, service.db, token)
            declared = dict(headers).get(b"content-length")
            if declared is not None and declared.isdigit() and int(declared) > limit:
                raise PayloadTooLargeError(f"body of {int(declared)} bytes exceeds the limit of {limit}")
        except ServiceError as exc:
            await send_error(send, exc)
            return
        await _Limited(self.app, limit)(scope, receive, send)

    def _route(self, scope: Scope) -> tuple[bool, str] | None:
        for route, needs_token, limit_setting in self.routes:
            if route.matches(scope)[0] is Match.FULL:
                return needs_token, limit_setting
        return None


class _Limited:
    """One request through ``app`` with its body counted against ``limit`` as it arrives."""

    def __init__(self, app: ASGIApp, limit: int):
        self.app, self.limit = app, limit
        self.received, self.started, self.refused = 0, False, False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def counted_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                self.received += len(message.get("body", b""))
                if self.received > self.limit:
                    error = BodyTooLargeError(f"body exceeds the limit of {self.limit} bytes")
                    if not self.started:
                        await send_error(send, error)
                        self.refused = True
                    raise error
            return message

        async def tracked_send(message: Message) -> None:
            if self.refused:  # the handler's answer to the failed read: the client has its 413
                return
            self.started = True
            await send(message)

        try:
            await self.app(scope, counted_receive, tracked_send)
        except BodyTooLargeError:
            if not self.refused:
                raise


async def send_error(send: Send, exc: ServiceError) -> None:
    """Answer with ``exc``'s status and the service's error body (401s say the scheme)."""
    data = json.dumps(error_body(exc)).encode()
    headers: list[tuple[bytes, Any]] = [(b"content-type", b"application/json"),
                                        (b"content-length", str(len(data)).encode())]
    if isinstance(exc, AuthenticationError):
        headers.append(WWW_AUTHENTICATE)
    await send({"type": "http.response.start", "status": exc.status, "headers": headers})
    await send({"type": "http.response.body", "body": data})
