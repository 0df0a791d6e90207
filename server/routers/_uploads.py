"""What the key-set and dataset routers share: manifest in, status out, parts streamed."""
from __future__ import annotations

from fastapi import Request

from server.schemas import PartReceipt, UploadCreate, UploadStatus
from server.service import Service
from server.tenants import Tenant
from server.uploads import PartSpec, Upload

# a part's route: its body is raw bytes, bounded by max_part_bytes (server.gate reads x-body-limit)
PART_ROUTE = {"openapi_extra": {"x-body-limit": "max_part_bytes", "requestBody": {
    "required": True, "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}}}


def create(service: Service, tenant: Tenant, kind: str, body: UploadCreate) -> Upload:
    params = service.params(body.params)
    parts = [PartSpec(p.sha256, p.size) for p in body.parts]
    return service.uploads.create(tenant.id, kind, params, parts, body.sha256, body.size)


def status_fields(service: Service, upload: Upload) -> dict:
    return dict(id=upload.id, state=upload.state, params_id=upload.params_id, sha256=upload.sha256,
                size=upload.size, parts=len(upload.parts), missing_parts=service.uploads.missing_parts(upload),
                info=upload.info)


def status(service: Service, upload: Upload) -> UploadStatus:
    return UploadStatus(**status_fields(service, upload))


async def receive_part(service: Service, tenant: Tenant, kind: str, upload_id: str, n: int,
                       request: Request) -> PartReceipt:
    upload = service.uploads.get(tenant.id, kind, upload_id)
    stored = await service.uploads.receive_part(upload, n, request.stream())
    return PartReceipt(part=n, stored=stored, missing_parts=service.uploads.missing_parts(upload))


def discard(service: Service, tenant: Tenant, kind: str, upload_id: str) -> Upload:
    """Remove the tenant's upload (see :meth:`UploadStore.discard`); returns what was removed."""
    upload = service.uploads.get(tenant.id, kind, upload_id)
    service.uploads.discard(upload)
    return upload
