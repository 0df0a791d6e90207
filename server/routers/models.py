"""/models: the encrypted-inference models the server holds. Anyone with a token may read
their public part (what a client needs to encrypt for them); only an administrator adds or
removes one (or ``python -m server add-model`` before start-up)."""
from __future__ import annotations

import base64
import json
from typing import Any

from fastapi import APIRouter, Response, status

from server.deps import AdminDep, ServiceDep, TenantDep
from server.errors import BadRequestError
from server.schemas import ModelCreate, ModelPublic, TENANT_ERRORS, error_responses

router = APIRouter(prefix="/models", tags=["models"], responses=error_responses(*TENANT_ERRORS, 409))


def public_view(row: dict[str, Any]) -> ModelPublic:
    return ModelPublic(name=row["name"], kind=row["kind"], params=json.loads(row["params_json"]),
                       params_id=row["params_id"], public=json.loads(row["public_json"]))


@router.post("", status_code=status.HTTP_201_CREATED, response_model=ModelPublic, responses=error_responses(403))
def add_model(body: ModelCreate, service: ServiceDep, _: AdminDep, replace: bool = False) -> ModelPublic:
    """Register a model (admin): it is checked against its parameters (the plan must fit)."""
    try:
        model = base64.b64decode(body.model_b64, validate=True)
    except ValueError as exc:  # binascii.Error, or a non-ASCII character (a plain ValueError)
        raise BadRequestError(f"model_b64 is not base64: {exc}") from None
    return public_view(service.models.add(body.name, body.kind, body.params, model, width=body.width,
                                          replace=replace))


@router.get("", response_model=list[ModelPublic])
def list_models(service: ServiceDep, _: TenantDep) -> list[ModelPublic]:
    return [public_view(row) for row in service.models.list()]


@router.get("/{name}", response_model=ModelPublic)
def get_model(name: str, service: ServiceDep, _: TenantDep) -> ModelPublic:
    return public_view(service.models.get(name))


@router.delete("/{name}", status_code=status.HTTP_204_NO_CONTENT, responses=error_responses(403))
def delete_model(name: str, service: ServiceDep, _: AdminDep) -> Response:
    service.models.delete(name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
