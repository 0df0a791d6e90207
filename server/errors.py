"""The service's errors and how every FHEError becomes an HTTP answer.

Each error the service raises on purpose is a :class:`ServiceError` (an ``FHEError``) that
carries its HTTP status. Errors from fhe_core and the apps keep their own types and are mapped
here by class, most specific first. The body is always ``{"error": <type name>, "detail": <message>}``.
"""
from __future__ import annotations

import errno
import logging
from http import HTTPStatus

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from sqlalchemy.exc import DBAPIError
from starlette.exceptions import HTTPException as StarletteHTTPException

from fhe_core.errors import (
    FHEError, LevelMismatchError, MissingKeyError, ParameterError, ParamsMismatchError, ScaleMismatchError,
    SerializationError, SizeLimitError, SlotMismatchError, TruncatedError,
)


class ServiceError(FHEError):
    """Root of the service's own errors; ``status`` is the HTTP status code it answers with."""

    status = 400


class BadRequestError(ServiceError, ValueError):
    """The request is malformed (fields, manifest, part numbers)."""


class AuthenticationError(ServiceError):
    """No bearer token, or one the service does not know."""

    status = 401


class ForbiddenError(ServiceError):
    """The token is valid but may not do this (e.g. an admin call)."""

    status = 403


class NotFoundError(ServiceError, KeyError):
    """The resource does not exist, or belongs to another tenant (the two look the same)."""

    status = 404

    def __str__(self) -> str:  # KeyError's str() would quote the message
        return str(self.args[0]) if self.args else ""


class ConflictError(ServiceError):
    """The resource is not in a state that allows this (an incomplete key set, a finished job)."""

    status = 409


class PayloadTooLargeError(ServiceError):
    """A body, part or declared size exceeds a limit."""

    status = 413


class HashMismatchError(ServiceError, ValueError):
    """An uploaded part or whole does not hash to what its manifest declared."""

    status = 422


class UnprocessableError(ServiceError, ValueError):
    """Well-formed but unusable input: a secret key, parameters the service refuses, a model
    that does not fit its parameters, a key set without the keys a model needs."""

    status = 422


class QueueFullError(ServiceError):
    """The job queue (or the tenant's share of it) is full; try again later."""

    status = 429


class ServiceUnavailableError(ServiceError):
    """No worker could take the request (this host runs none, or its worker died meanwhile)."""

    status = 503


class RequestTimeoutError(ServiceError):
    """A body arrived too slowly, or a computation took longer than allowed."""

    status = 408


# fhe_core / app errors by class, most specific first; anything else FHEError is 422
_FHE_STATUS: tuple[tuple[type[FHEError], int], ...] = (
    (SizeLimitError, 413),
    (TruncatedError, 400),
    (ParamsMismatchError, 422),
    (SerializationError, 400),
    (MissingKeyError, 422),
    (LevelMismatchError, 422),
    (ScaleMismatchError, 422),
    (SlotMismatchError, 422),
    (ParameterError, 422),
)


def status_of(exc: FHEError) -> int:
    """The HTTP status for an FHEError."""
    if isinstance(exc, ServiceError):
        return exc.status
    for cls, status in _FHE_STATUS:
        if isinstance(exc, cls):
            return status
    return 422


SQLITE_FULL = 13        # sqlite3's "database or disk is full"
POSTGRES_DISK_FULL = "53100"
OUT_OF_SPACE_DETAIL = ("the server is out of disk space: nothing it acknowledged is lost (an upload keeps its "
                       "parts: complete it again); retry once space is freed")


def out_of_space(exc: BaseException) -> bool:
    """Whether ``exc``, or the database error it wraps (SQLAlchemy keeps it as ``orig``), says the
    server's disk (or its database's) is full."""
    for err in (exc, getattr(exc, "orig", None), exc.__cause__):
        if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if getattr(err, "sqlite_errorcode", None) == SQLITE_FULL \
                or getattr(err, "sqlstate", None) == POSTGRES_DISK_FULL:
            return True
    return False


def error_body(exc: BaseException) -> dict[str, str]:
    return {"error": type(exc).__name__, "detail": str(exc)}


def install_handlers(app: FastAPI) -> None:
    """Every non-2xx answer in one shape, ``{"error", "detail": str}``: FHEError -> its status;
    request validation -> 422; the framework's own answers (unknown route 404, 405, a body that
    does not parse 400) keep their status; a full disk -> 507 (the client can retry later);
    anything unexpected -> 500 (:class:`InternalErrors`, which the app adds as its outermost middleware)."""

    @app.exception_handler(FHEError)
    async def _fhe_error(_: Request, exc: FHEError) -> JSONResponse:
        return JSONResponse(error_body(exc), status_code=status_of(exc))

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        return JSONResponse({"error": "RequestValidationError", "detail": problems}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        name = HTTPStatus(exc.status_code).phrase.title().replace(" ", "").replace("-", "")
        return JSONResponse({"error": name, "detail": str(exc.detail)}, status_code=exc.status_code,
                            headers=exc.headers)

    async def _storage_error(_: Request, exc: Exception) -> JSONResponse:
        if not out_of_space(exc):
            raise exc  # to the 500 below
        logging.getLogger("server").error("out of disk space: %s", exc)  # the operator's cue
        return JSONResponse({"error": "InsufficientStorage", "detail": OUT_OF_SPACE_DETAIL}, status_code=507)

    app.add_exception_handler(OSError, _storage_error)
    app.add_exception_handler(DBAPIError, _storage_error)


class InternalErrors:
    """The ASGI middleware that answers an unexpected exception with a logged 500 in the common
    body. Starlette's own handler for ``Exception`` answers and then raises the exception again
    (for the server to log), and uvicorn then drops the connection: a client on a kept-alive
    connection saw a reset instead of the 500. An exception after the answer has started (a
    streamed body) still goes to the server, which can only close the connection."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception:
            if started:
                raise
            logging.getLogger("server").exception("unexpected error in %s %s", scope["method"], scope["path"])
            response = JSONResponse({"error": "InternalServerError", "detail": "internal server error"},
                                    status_code=500)
            await response(scope, receive, send)
