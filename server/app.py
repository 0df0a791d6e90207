"""The app factory: ``create_app(settings)`` builds a FastAPI app with its own service state
(database, blobs, caches, worker), so tests can run several side by side. OpenAPI at /docs."""
from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from typing import Literal

from fastapi import FastAPI

from server.apps import ForestKind, HELRTraining
from server.errors import InternalErrors, install_handlers
from server.gate import RequestGate
from server.models import ModelRegistry
from server.routers import datasets, health, jobs, keysets, models, predictions
from server.service import Service
from server.settings import Settings
from server.workers import InlineWorker, WorkerPool


def build_service(settings: Settings, *, role: Literal["server", "worker", "admin"] = "server") -> Service:
    """The service with its app adapters, for one of three roles:

    - ``server``: the process that answers HTTP and serves the data directory (owns it: see
      :class:`Service`), with its workers: a :class:`WorkerPool` of processes, one per device,
      or, with ``inline_worker``, the worker in this process. With a pool this process touches
      no device: it checks on the CPU and leaves the device to the workers;
    - ``worker``: a worker process's own service on its device (:func:`server.workers.worker_main`);
    - ``admin``: a command that adds rows (``python -m server add-model``): no worker.
    """
    pooled = role == "server" and not settings.inline_worker
    service = Service(settings.model_copy(update={"device": "cpu"}) if pooled else settings, owner=role == "server")
    service.warms_verified_keys = not pooled  # the workers load key sets on their devices themselves
    service.models = ModelRegistry(service, {"xgboost": ForestKind("HEForest"), "idash": ForestKind("IdashModel"),
                                             "private": ForestKind("PrivateForest")})
    service.training = HELRTraining(service)
    if role == "server":
        service.workers = WorkerPool(settings) if pooled else InlineWorker(service)
    return service


def create_app(settings: Settings | None = None) -> FastAPI:
    """A FastAPI app for ``settings`` (default: from the environment, ``FHE_SERVER_*``)."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.service = build_service(settings)
        try:
            yield
        finally:
            app.state.service.close()

    app = FastAPI(title="fhe-ml service", version="0.1.0", lifespan=lifespan,
                  description="Encrypted predictions (XGBoost on BFV) and encrypted training (HELR on CKKS). "
                              "The server never receives a secret key.",
                  generate_unique_id_function=_operation_id)
    install_handlers(app)
    routers = [module.router for module in (health, keysets, datasets, models, predictions, jobs)]
    for router in routers:
        app.include_router(router)
    app.add_middleware(RequestGate, routes=[route for router in routers for route in router.routes])
    app.add_middleware(InternalErrors)  # added last: the outermost, so the gate's own failures get the JSON 500 too
    return app


def _operation_id(route) -> str:
    """Stable operation ids for client generators: the handler's name (unique in this app)."""
    return route.name
