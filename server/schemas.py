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


class JobCreate(BaseModel):
    kind: Literal["helr"] = "helr"
    config: dict[str, Any] = Field(description="HELRConfig as a JSON object")
    keyset: str
    dataset: str


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
