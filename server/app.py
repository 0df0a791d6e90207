"""The app factory: ``create_app(settings)`` builds a FastAPI app with its own service state
(database, blobs, caches, worker), so tests can run several side by side. OpenAPI at /docs."""
from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from server.apps import ForestKind, HELRTraining
from server.errors import install_handlers
from server.gate import RequestGate
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
    routers = [module.router for module in (health, keysets, datasets, models, predictions, jobs)]
    for router in routers:
        app.include_router(router)
    app.add_middleware(RequestGate, routes=[route for router in routers for route in router.routes])
    return app


def _operation_id(route) -> str:
    """Stable operation ids for client generators: the handler's name (unique in this app)."""
    return route.name
