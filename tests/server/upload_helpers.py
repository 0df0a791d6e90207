"""What the upload race and restart tests share: tiny BFV key sets (distinct bytes per label),
raw HTTP calls of the upload protocol (declare, parts, complete) and a part body that pauses
mid-way, so a test can act while the server is still reading it."""
from __future__ import annotations

import functools
import threading
import time
from collections.abc import Iterator

import httpx

from fhe_core import bfv, rlwe
from fhe_core.params import Params, preset
from fhe_core.rlwe import EvalKeySet
from fhe_core.serialize import dumps
from server.client import Manifest

BFV_SMALL = "BFVN10QP205L2D3T17Insecure"
PART = 16_384  # a ~300 KB key set in ~18 parts


@functools.cache
def _context() -> bfv.BFVContext:
    return bfv.BFVContext(preset(BFV_SMALL, allow_insecure=True))


def keyset(label: str) -> tuple[Params, EvalKeySet]:
    """Evaluation keys (relinearization, one rotation) whose bytes no other label shares."""
    ctx = _context()
    seed = label.encode().ljust(32, b"\0")[:32]
    sk = rlwe.gen_secret_key(ctx.rlwe, seed=seed)
    return ctx.params, rlwe.gen_eval_keys(ctx.rlwe, sk, bfv.galois_elements(ctx.n, (1,)), seed=seed[::-1])


def keyset_bytes(label: str) -> tuple[Params, bytes]:
    params, keys = keyset(label)
    return params, dumps(keys)


def http_client(url: str, token: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60)


def manifest_body(blob: bytes, params: Params, part: int = PART) -> dict:
    manifest = Manifest.of(blob, part)
    return {"params": params.literal.to_dict(), "parts": manifest.parts, "sha256": manifest.sha256,
            "size": manifest.size}


def declare(http: httpx.Client, blob: bytes, params: Params, part: int = PART) -> dict:
    response = http.post("/keysets", json=manifest_body(blob, params, part))
    assert response.status_code == 201, response.text
    return response.json()


def part_of(blob: bytes, n: int, part: int = PART) -> bytes:
    return blob[n * part:(n + 1) * part]


def send_parts(http: httpx.Client, keyset_id: str, blob: bytes, numbers, part: int = PART) -> None:
    for n in numbers:
        response = http.put(f"/keysets/{keyset_id}/parts/{n}", content=part_of(blob, n, part))
        assert response.status_code == 200 and response.json()["stored"], response.text


def upload(http: httpx.Client, blob: bytes, params: Params, part: int = PART) -> dict:
    """Declare, send every part, complete: the ready key set's status."""
    status = declare(http, blob, params, part)
    send_parts(http, status["id"], blob, status["missing_parts"], part)
    response = http.post(f"/keysets/{status['id']}/complete")
    assert response.status_code == 200, response.text
    return response.json()


class PausedBody:
    """A part body sent in two halves (chunked): after the first, ``started`` is set and the
    sender waits for ``go_on`` (the test deletes the upload, kills the server, ...)."""

    def __init__(self, data: bytes, head: int = 1000):
        self.data, self.head = data, head
        self.started, self.go_on = threading.Event(), threading.Event()

    def __iter__(self) -> Iterator[bytes]:
        yield self.data[:self.head]
        self.started.set()
        self.go_on.wait(30)
        yield self.data[self.head:]


def put_in_background(url: str, token: str, path: str, body: PausedBody) -> tuple[threading.Thread, dict]:
    """PUT ``body`` to ``path`` from a thread; the dict gets ``response`` or ``error``."""
    result: dict = {}

    def send() -> None:
        try:
            with http_client(url, token) as http:
                result["response"] = http.put(path, content=iter(body))
        except httpx.HTTPError as exc:
            result["error"] = exc

    thread = threading.Thread(target=send)
    thread.start()
    assert body.started.wait(30), "the part body was never asked for"
    return thread, result


def wait_until(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)
