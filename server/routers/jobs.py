"""/jobs: encrypted training jobs (HELR), run one at a time by the worker.

``POST /jobs`` answers 202 with the job; ``GET /jobs/{id}`` gives its state and progress
(iteration i of n, seconds per iteration, ETA); ``POST /jobs/{id}/cancel`` stops it between two
iterations; ``GET /jobs/{id}/result`` is the encrypted model (application/octet-stream).
"""
from __future__ import annotations

import shutil
import uuid
from typing import Any

from fastapi import APIRouter, Response, status

from server.db import dumps_json, now
from server.deps import ServiceDep, TenantDep
from server.errors import ConflictError, NotFoundError, QueueFullError, UnprocessableError
from server.schemas import JobCreate, JobStatus, TENANT_ERRORS, error_responses

router = APIRouter(prefix="/jobs", tags=["jobs"], responses=error_responses(*TENANT_ERRORS, 409, 429))


def _status(row: dict[str, Any]) -> JobStatus:
    rate, left = row["seconds_per_iteration"], row["iterations"] - row["iteration"]
    eta = rate * left if rate is not None and row["state"] in ("queued", "running") else None
    return JobStatus(id=row["id"], kind=row["kind"], state=row["state"], iteration=row["iteration"],
                     iterations=row["iterations"], seconds_per_iteration=rate, eta_seconds=eta, error=row["error"],
                     cancel_requested=bool(row["cancel_requested"]), created=row["created"], started=row["started"],
                     finished=row["finished"])


def _job(service, tenant, job_id: str) -> dict[str, Any]:
    row = service.db.one("SELECT * FROM jobs WHERE id = ? AND tenant_id = ?", (job_id, tenant.id))
    if row is None:
        raise NotFoundError(f"no job {job_id!r}")
    return row


@router.post("", status_code=status.HTTP_202_ACCEPTED, response_model=JobStatus)
def submit_job(body: JobCreate, service: ServiceDep, tenant: TenantDep) -> JobStatus:
    """Queue a training job on a ready key set and dataset of the config's parameters."""
    keyset = service.uploads.get(tenant.id, "keyset", body.keyset)
    dataset = service.uploads.get(tenant.id, "dataset", body.dataset)
    for upload in (keyset, dataset):
        service.uploads.blob_path(upload)  # 409 unless complete
    config = service.training.parse_config(body.config)
    iterations = service.training.iterations(config)  # bounded before anything sized by it is built
    if not 1 <= iterations <= service.settings.max_iterations:
        raise UnprocessableError(f"iterations: {iterations}, allowed 1..{service.settings.max_iterations}")
    params_id = service.training.params(config).params_id
    for upload in (keyset, dataset):
        if upload.params_id != params_id:
            raise UnprocessableError(f"{upload.kind} {upload.id} belongs to params_id {upload.params_id}, "
                                     f"the config's parameters are {params_id}")
    service.training.check_dataset(config, dataset.info or {})
    missing = service.training.missing_keys(config, keyset.info or {})
    if missing:
        raise UnprocessableError(f"key set {keyset.id} lacks keys the training needs: {missing}")
    job_id = f"job_{uuid.uuid4().hex}"
    with service.db.transaction() as conn:  # the bounds and the insert under one write lock
        ready = conn.execute("SELECT COUNT(*) FROM uploads WHERE id IN (?, ?) AND state = 'ready'",
                             (keyset.id, dataset.id)).fetchone()[0]
        if ready != 2:  # deleted since they were read (a delete checks for jobs under the same lock)
            raise NotFoundError(f"key set {keyset.id} or dataset {dataset.id} was deleted meanwhile")
        queued = conn.execute("SELECT COUNT(*) FROM jobs WHERE state = 'queued'").fetchone()[0]
        if queued >= service.settings.max_queued_jobs:
            raise QueueFullError(f"{queued} jobs are queued (the limit); try again later")
        active = conn.execute("SELECT COUNT(*) FROM jobs WHERE tenant_id = ? AND state IN ('queued', 'running')",
                              (tenant.id,)).fetchone()[0]
        if active >= service.settings.max_jobs_per_tenant:
            raise QueueFullError(f"you have {active} queued or running jobs (the limit)")
        conn.execute("INSERT INTO jobs (id, tenant_id, kind, state, config_json, keyset_id, dataset_id, iterations, "
                     "created) VALUES (?, ?, ?, 'queued', ?, ?, ?, ?, ?)",
                     (job_id, tenant.id, body.kind, dumps_json(body.config), keyset.id, dataset.id, iterations, now()))
    if service.worker is not None:
        service.worker.wake()
    return _status(_job(service, tenant, job_id))


@router.get("", response_model=list[JobStatus])
def list_jobs(service: ServiceDep, tenant: TenantDep) -> list[JobStatus]:
    return [_status(r) for r in service.db.query("SELECT * FROM jobs WHERE tenant_id = ? ORDER BY created",
                                                 (tenant.id,))]


@router.get("/{job_id}", response_model=JobStatus)
def get_job(job_id: str, service: ServiceDep, tenant: TenantDep) -> JobStatus:
    return _status(_job(service, tenant, job_id))


@router.post("/{job_id}/cancel", response_model=JobStatus)
def cancel_job(job_id: str, service: ServiceDep, tenant: TenantDep) -> JobStatus:
    """A queued job is cancelled at once; a running one after its current iteration."""
    row = _job(service, tenant, job_id)
    if row["state"] not in ("queued", "running"):
        raise ConflictError(f"job {job_id} is {row['state']}; only a queued or running job can be cancelled")
    service.db.execute("UPDATE jobs SET cancel_requested = 1 WHERE id = ?", (job_id,))
    service.db.execute("UPDATE jobs SET state = 'cancelled', finished = ? WHERE id = ? AND state = 'queued'",
                       (now(), job_id))
    return _status(_job(service, tenant, job_id))


@router.delete("/{job_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete_job(job_id: str, service: ServiceDep, tenant: TenantDep) -> Response:
    """Forget a finished job, its result and its kept checkpoints (cancel a queued or running
    one first)."""
    row = _job(service, tenant, job_id)
    if row["state"] in ("queued", "running"):
        raise ConflictError(f"job {job_id} is {row['state']}; cancel it first")
    with service.db.transaction() as conn:
        conn.execute("DELETE FROM jobs WHERE id = ?", (job_id,))
        if row["result_blob"]:
            service.blobs.release(service.db, row["result_blob"])
    shutil.rmtree(service.settings.jobs_dir / job_id, ignore_errors=True)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/{job_id}/result", response_class=Response,
            responses={200: {"content": {"application/octet-stream": {}}}})
def job_result(job_id: str, service: ServiceDep, tenant: TenantDep) -> Response:
    """The encrypted model of a succeeded job, in the project's serialization format."""
    row = _job(service, tenant, job_id)
    if row["state"] != "succeeded":
        raise ConflictError(f"job {job_id} is {row['state']}; a result exists once it has succeeded")
    return Response(service.blobs.read_bytes(row["result_blob"]), media_type="application/octet-stream")


@router.get("/{job_id}/checkpoints/{iteration}", response_class=Response,
            responses={200: {"content": {"application/octet-stream": {}}}})
def job_checkpoint(job_id: str, iteration: int, service: ServiceDep, tenant: TenantDep) -> Response:
    """The encrypted state (w, v and the iteration) after ``iteration`` steps, kept when the
    service keeps checkpoints: the job's owner decrypts it to follow training."""
    row = _job(service, tenant, job_id)
    path = service.worker.history_path(job_id, iteration)
    if not 1 <= iteration <= row["iteration"] or not path.is_file():
        raise NotFoundError(f"job {job_id} has no checkpoint of iteration {iteration} (done: {row['iteration']}"
                            f"{'' if service.settings.keep_checkpoints else '; the service keeps none'})")
    return Response(path.read_bytes(), media_type="application/octet-stream")
