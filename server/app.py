"""The app factory: ``create_app(settings)`` builds a FastAPI app with its own service state
(database, blobs, caches, worker), so tests can run several side by side. OpenAPI at /docs."""
from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from server.apps import ForestKind, HELRTraining
from server.errors import PayloadTooLargeError, error_body, install_handlers
from server.models import ModelRegistry
from server.routers import datasets, health, jobs, keysets, models, predictions
from server.service import Service
from server.settings import Settings
from server.worker import JobWorker


def build_service(settings: Settings, *, start_worker: bool = True) -> Service:
    """The service with its app adapters and (unless told not to) a running job worker; the
    process that runs the worker serves the data directory (owns it: see :class:`Service`)."""
    service = Service(settings, owner=start_worker)
    service.models = ModelRegistry(service, {"xgboost": ForestKind("HEForest"), "idash": ForestKind("IdashModel")})
    service.training = HELRTraining(service)
    if start_worker:
        service.worker = JobWorker(service, {"helr": service.training})
        service.worker.start()
    return service


def create_app(settings: Settings | None = None, *, start_worker: bool = True) -> FastAPI:
    """A FastAPI app for ``settings`` (default: from the environment, ``FHE_SERVER_*``)."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.service = build_service(settings, start_worker=start_worker)
        try:
            yield
        finally:
            app.state.service.close()

    app = FastAPI(title="fhe-ml service", version="0.1.0", lifespan=lifespan,
                  description="Encrypted predictions (XGBoost on BFV) and encrypted training (HELR on CKKS). "
                              "The server never receives a secret key.",
                  generate_unique_id_function=_operation_id)
    install_handlers(app)
    for module in (health, keysets, datasets, models, predictions, jobs):
        app.include_router(module.router)
    app.add_middleware(BodyLimit, limit=max(settings.max_part_bytes, settings.max_body_bytes))
    return app


def _operation_id(route) -> str:
    """Stable operation ids for client generators: the handler's name (unique in this app)."""
    return route.name


class BodyLimit:
    """Refuse a request whose declared Content-Length exceeds every limit (413) before a
    handler runs; handlers still count what actually arrives against their own limit."""

    def __init__(self, app: ASGIApp, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            length = dict(scope["headers"]).get(b"content-length")
            if length is not None and length.isdigit() and int(length) > self.limit:
                await _json(send, 413, error_body(PayloadTooLargeError(
                    f"body of {int(length)} bytes exceeds the limit of {self.limit}")))
                return
        await self.app(scope, receive, send)


async def _json(send: Send, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})
