"""/predictions: a batch of ciphertexts in, the encrypted scores out.

``POST /predictions?model=NAME&keyset=ID`` with the body ``fhe_core.serialize.dumps_many(cts)``
(application/octet-stream) answers with ``dumps_many`` of the encrypted class scores (and a
``Server-Timing`` header: the server's seconds reading the batch and evaluating). It runs
in the threadpool with the cached key set and evaluator (see :mod:`server.models` for why not
through the worker), bounded by the body limit, the batch limit and the request timeout. A
request over the timeout is answered 408 at once; its computation cannot be interrupted
mid-kernel, so it finishes in the background (holding that evaluator) and its result is dropped.
"""
from __future__ import annotations

import anyio
from fastapi import APIRouter, Request, Response

from server.deps import ServiceDep, TenantDep, read_body
from server.errors import RequestTimeoutError
from server.schemas import TENANT_ERRORS, error_responses

router = APIRouter(prefix="/predictions", tags=["predictions"], responses=error_responses(*TENANT_ERRORS, 408, 409))


@router.post("", response_class=Response,
             openapi_extra={"requestBody": {"content": {"application/octet-stream": {}}, "required": True}},
             responses={200: {"content": {"application/octet-stream": {}}}})
async def predict(model: str, keyset: str, request: Request, service: ServiceDep, tenant: TenantDep) -> Response:
    upload = service.uploads.get(tenant.id, "keyset", keyset)
    body = await read_body(request)
    seconds = service.settings.request_timeout_s
    try:
        with anyio.fail_after(seconds):
            scores = await anyio.to_thread.run_sync(service.models.predict, model, upload, body,
                                                    abandon_on_cancel=True)
    except TimeoutError:
        raise RequestTimeoutError(f"the prediction took longer than {seconds} s") from None
    return Response(scores.body, media_type="application/octet-stream",
                    headers={"Server-Timing": scores.server_timing()})
