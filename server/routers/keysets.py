"""/keysets: evaluation keys (relinearization, Galois, bootstrapping), uploaded once in parts.

A secret key, keys of other parameters, or bytes that are not a complete EvalKeySet record are
refused with 4xx and nothing is kept (see :mod:`server.uploads`).
"""
from __future__ import annotations

from fastapi import APIRouter, Request, Response, status

from server.deps import ServiceDep, TenantDep
from server.routers import _uploads
from server.schemas import KeysetStatus, PartReceipt, UploadCreate, TENANT_ERRORS, error_responses

router = APIRouter(prefix="/keysets", tags=["keysets"], responses=error_responses(*TENANT_ERRORS, 408, 409))
KIND = "keyset"


def _status(service, upload, model: str | None = None) -> KeysetStatus:
    missing = None
    if model is not None and upload.state == "ready":
        missing = service.models.missing_keys(model, upload)
    return KeysetStatus(**_uploads.status_fields(service, upload), missing_keys=missing)


@router.post("", status_code=status.HTTP_201_CREATED, response_model=KeysetStatus)
def create_keyset(body: UploadCreate, service: ServiceDep, tenant: TenantDep) -> KeysetStatus:
    """Declare a key set (parameters, part hashes and sizes); ready at once if the same bytes
    were verified before (nothing to send)."""
    return _status(service, _uploads.create(service, tenant, KIND, body))


@router.get("", response_model=list[KeysetStatus])
def list_keysets(service: ServiceDep, tenant: TenantDep) -> list[KeysetStatus]:
    return [_status(service, u) for u in service.uploads.list(tenant.id, KIND)]


@router.get("/{keyset_id}", response_model=KeysetStatus)
def get_keyset(keyset_id: str, service: ServiceDep, tenant: TenantDep, model: str | None = None) -> KeysetStatus:
    """Status: missing parts while uploading; with ``?model=NAME`` also the keys that model
    needs and this set lacks."""
    return _status(service, service.uploads.get(tenant.id, KIND, keyset_id), model)


@router.put("/{keyset_id}/parts/{n}", response_model=PartReceipt, **_uploads.PART_ROUTE)
async def put_keyset_part(keyset_id: str, n: int, request: Request, service: ServiceDep,
                          tenant: TenantDep) -> PartReceipt:
    """Part ``n`` as the raw body (application/octet-stream), streamed to disk and hashed."""
    return await _uploads.receive_part(service, tenant, KIND, keyset_id, n, request)


@router.post("/{keyset_id}/complete", response_model=KeysetStatus)
def complete_keyset(keyset_id: str, service: ServiceDep, tenant: TenantDep) -> KeysetStatus:
    """Join and verify the parts (an EvalKeySet of the declared parameters); then the set is
    usable, and loads into the device cache in the background."""
    upload = service.uploads.get(tenant.id, KIND, keyset_id)
    params = service.params(upload.params_json)
    done = service.uploads.complete(upload, params, service.verify_keyset)
    service.warm_keyset(done)
    return _status(service, done)


@router.delete("/{keyset_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete_keyset(keyset_id: str, service: ServiceDep, tenant: TenantDep) -> Response:
    upload = _uploads.discard(service, tenant, KIND, keyset_id)
    if not service.blobs.exists(upload.sha256):  # no other key set has these bytes: free the device too
        service.keysets.discard(upload.sha256)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
