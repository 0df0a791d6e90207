"""/datasets: encrypted training sets, uploaded in parts like key sets, verified on completion
by the training app (every ciphertext of the declared parameters)."""
from __future__ import annotations

from fastapi import APIRouter, Request, Response, status

from server.deps import ServiceDep, TenantDep
from server.routers import _uploads
from server.schemas import PartReceipt, UploadCreate, UploadStatus, TENANT_ERRORS, error_responses

router = APIRouter(prefix="/datasets", tags=["datasets"], responses=error_responses(*TENANT_ERRORS, 408, 409))
KIND = "dataset"


@router.post("", status_code=status.HTTP_201_CREATED, response_model=UploadStatus)
def create_dataset(body: UploadCreate, service: ServiceDep, tenant: TenantDep) -> UploadStatus:
    """Declare an encrypted dataset (parameters, part hashes and sizes)."""
    return _uploads.status(service, _uploads.create(service, tenant, KIND, body))


@router.get("", response_model=list[UploadStatus])
def list_datasets(service: ServiceDep, tenant: TenantDep) -> list[UploadStatus]:
    return [_uploads.status(service, u) for u in service.uploads.list(tenant.id, KIND)]


@router.get("/{dataset_id}", response_model=UploadStatus)
def get_dataset(dataset_id: str, service: ServiceDep, tenant: TenantDep) -> UploadStatus:
    return _uploads.status(service, service.uploads.get(tenant.id, KIND, dataset_id))


@router.put("/{dataset_id}/parts/{n}", response_model=PartReceipt, **_uploads.PART_ROUTE)
async def put_dataset_part(dataset_id: str, n: int, request: Request, service: ServiceDep,
                           tenant: TenantDep) -> PartReceipt:
    """Part ``n`` as the raw body, streamed to disk and hashed."""
    return await _uploads.receive_part(service, tenant, KIND, dataset_id, n, request)


@router.post("/{dataset_id}/complete", response_model=UploadStatus)
def complete_dataset(dataset_id: str, service: ServiceDep, tenant: TenantDep) -> UploadStatus:
    """Join and verify the parts (a serialized encrypted dataset of the declared parameters)."""
    upload = service.uploads.get(tenant.id, KIND, dataset_id)
    params = service.params(upload.params_json)
    return _uploads.status(service, service.uploads.complete(upload, params, service.training.verify_dataset))


@router.delete("/{dataset_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete_dataset(dataset_id: str, service: ServiceDep, tenant: TenantDep) -> Response:
    _uploads.discard(service, tenant, KIND, dataset_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
