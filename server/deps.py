"""Typed dependencies: a handler's signature states the service, the tenant and the limits it uses."""
from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from server.errors import AuthenticationError, ForbiddenError
from server.service import Service
from server.tenants import Tenant

_bearer = HTTPBearer(auto_error=False, description="a token from `python -m server create-token`")


def get_service(request: Request) -> Service:
    return request.app.state.service


ServiceDep = Annotated[Service, Depends(get_service)]


def current_tenant(request: Request,
                   _: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> Tenant:
    """The tenant :class:`server.gate.RequestGate` authenticated before the body was read (the
    bearer scheme is declared here for the OpenAPI document)."""
    tenant = request.scope.get("state", {}).get("tenant")
    if tenant is None:  # an app without the gate
        raise AuthenticationError("missing bearer token (Authorization: Bearer <token>)")
    return tenant


TenantDep = Annotated[Tenant, Depends(current_tenant)]


def admin_tenant(tenant: TenantDep) -> Tenant:
    if not tenant.is_admin:
        raise ForbiddenError(f"tenant {tenant.name!r} is not an administrator")
    return tenant


AdminDep = Annotated[Tenant, Depends(admin_tenant)]


async def read_body(request: Request) -> bytearray:
    """The whole body in one buffer (no second copy); the gate has bounded it."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
    return body
