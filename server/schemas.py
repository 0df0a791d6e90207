"""Request and response bodies (one schema per direction). Binary payloads (key sets,
ciphertexts, models) never travel inside JSON: they are ``application/octet-stream`` bodies."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

Sha256 = Field(pattern=r"^[0-9a-f]{64}$", description="SHA-256, 64 lowercase hex digits")


class PartSpecIn(BaseModel):
    sha256: str = Sha256
    size: int = Field(ge=1)


class UploadCreate(BaseModel):
    """A key set's or dataset's manifest: its parameters and the hash and size of each part
    and of the whole (the parts, joined in order, are the serialized object)."""

    params: dict[str, Any] = Field(description="the ParamsLiteral as a JSON object (ParamsLiteral.to_dict())")
    parts: list[PartSpecIn] = Field(min_length=1)
    sha256: str = Sha256
    size: int = Field(ge=1)


class UploadStatus(BaseModel):
    id: str
    state: Literal["uploading", "completing", "ready"]
    params_id: str
    sha256: str
    size: int
    parts: int
    missing_parts: list[int] = Field(description="part numbers still to send (empty once all arrived)")
    info: dict[str, Any] | None = Field(None, description="what verification found, once ready")


class KeysetStatus(UploadStatus):
    missing_keys: dict[str, Any] | None = Field(
        None, description="with ?model=NAME: the keys that model needs and the set lacks")


class PartReceipt(BaseModel):
    part: int
    stored: bool = Field(description="false when the part was already there (nothing re-read)")
    missing_parts: list[int]


class ModelCreate(BaseModel):
    """An admin registers a model: its kind, parameter set and the app's model bytes (base64)."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    kind: Literal["xgboost", "idash"] = "xgboost"
    params: dict[str, Any]
    model_b64: str = Field(description="HEForest.to_bytes() (kind xgboost) or IdashModel.to_bytes() (kind idash), "
                                       "base64")
    width: int | None = Field(None, ge=1, description="most samples per prediction batch (default: the plan's); "
                                                      "a width near the usual batch size means fewer ciphertexts")


class ModelPublic(BaseModel):
    name: str
    kind: str
    params: dict[str, Any]
    params_id: str
    public: dict[str, Any] = Field(description="what a client needs to encrypt for the model (no tree structure)")


# ids the server hands out (``ke_<hex>``, ``da_<hex>``): anything else, a lone surrogate included,
# is refused before it reaches the database
UPLOAD_ID = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$", description="an id the server returned")


class JobCreate(BaseModel):
    kind: Literal["helr"] = "helr"
    config: dict[str, Any] = Field(description="HELRConfig as a JSON object")
    keyset: str = UPLOAD_ID
    dataset: str = UPLOAD_ID


class JobStatus(BaseModel):
    id: str
    kind: str
    state: Literal["queued", "running", "succeeded", "failed", "cancelled"]
    iteration: int = Field(description="iterations done and checkpointed")
    iterations: int
    seconds_per_iteration: float | None
    eta_seconds: float | None
    error: str | None
    cancel_requested: bool
    created: float
    started: float | None
    finished: float | None


class Health(BaseModel):
    status: Literal["ok"]
    device: str
    queued_jobs: int
    running_jobs: int
    cached_keysets: int
    rss_bytes: int


class Limits(BaseModel):
    """The service's size limits, so a client can cut its uploads to fit."""

    max_part_bytes: int
    max_upload_bytes: int
    max_parts: int
    max_body_bytes: int
    max_batch: int


class ErrorBody(BaseModel):
    """Every non-2xx answer: the error's type and a message for people."""

    error: str = Field(description="the error's type, e.g. NotFoundError, PayloadTooLargeError")
    detail: str = Field(description="what went wrong, in words")


_ERROR_MEANINGS = {
    400: "malformed request: a body that does not parse, a bad manifest or part number, bad base64",
    401: "missing, malformed, unknown, revoked or expired bearer token",
    403: "the token is valid but this needs an administrator",
    404: "no such resource (or another tenant's)",
    408: "a body arrived too slowly, or the computation took too long",
    409: "the resource is not in a state that allows this",
    413: "a body, part or declared size exceeds a limit (GET /limits)",
    422: "well-formed but unusable: request validation, parameters, keys or model that do not fit",
    429: "the job queue is full; try again later",
}


# what any route that takes a token may answer: a body or parameter that does not parse (400) or
# validate (422), the token (401), a missing resource (404), a body over the limit (the gate's 413)
TENANT_ERRORS = (400, 401, 404, 413, 422)


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for these error statuses, all with the :class:`ErrorBody` schema."""
    return {code: {"model": ErrorBody, "description": _ERROR_MEANINGS[code]} for code in codes}
