"""Typed dependencies: a handler's signature states the service, the tenant and the limits it uses."""
from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from server.errors import AuthenticationError, ForbiddenError, PayloadTooLargeError
from server.service import Service
from server.tenants import Tenant, tenant_for_token

_bearer = HTTPBearer(auto_error=False, description="a token from `python -m server create-token`")


def get_service(request: Request) -> Service:
    return request.app.state.service


ServiceDep = Annotated[Service, Depends(get_service)]


def current_tenant(service: ServiceDep,
                   credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> Tenant:
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise AuthenticationError("missing bearer token (Authorization: Bearer <token>)")
    return tenant_for_token(service.db, credentials.credentials)


TenantDep = Annotated[Tenant, Depends(current_tenant)]


def admin_tenant(tenant: TenantDep) -> Tenant:
    if not tenant.is_admin:
        raise ForbiddenError(f"tenant {tenant.name!r} is not an administrator")
    return tenant


AdminDep = Annotated[Tenant, Depends(admin_tenant)]


async def read_body(request: Request, limit: int) -> bytearray:
    """The whole body (one buffer, no second copy), refused with 413 as soon as it passes
    ``limit`` (the declared Content-Length is checked first, so an honest oversized request is
    refused unread)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLargeError(f"body of {declared} bytes exceeds the limit of {limit}")
    body = bytearray()
    async for chunk in request.stream():
        if len(body) + len(chunk) > limit:
            raise PayloadTooLargeError(f"body exceeds the limit of {limit} bytes")
        body += chunk
    return body
