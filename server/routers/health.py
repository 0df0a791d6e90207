"""/health: liveness and a few gauges (queue, cache, memory) for operators and the load test."""
from __future__ import annotations

import psutil
from fastapi import APIRouter

from server.deps import ServiceDep
from server.schemas import Health, Limits, error_responses

router = APIRouter(tags=["health"], responses=error_responses(413))


@router.get("/health", response_model=Health)
def health(service: ServiceDep) -> Health:
    counts = {row["state"]: row["n"] for row in
              service.db.query("SELECT state, COUNT(*) AS n FROM jobs WHERE state IN ('queued', 'running') "
                               "GROUP BY state")}
    return Health(status="ok", device=service.settings.device, queued_jobs=counts.get("queued", 0),
                  running_jobs=counts.get("running", 0), cached_keysets=len(service.keysets),
                  rss_bytes=psutil.Process().memory_info().rss)


@router.get("/limits", response_model=Limits)
def limits(service: ServiceDep) -> Limits:
    s = service.settings
    return Limits(max_part_bytes=s.max_part_bytes, max_upload_bytes=s.max_upload_bytes, max_parts=s.max_parts,
                  max_body_bytes=s.max_body_bytes, max_batch=s.max_batch)
