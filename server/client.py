"""Typed Python client of the service (httpx). The secret key stays here: the client sends
evaluation keys and ciphertexts, and decrypts what comes back with the application's client
half (``ForestClient``, ``HELRClient``), which it is given and never serializes.

    api = ServiceClient("http://127.0.0.1:8000", token)
    keyset = api.register_keys(forest_client.eval_keys(), params,  # parts, resumable, progress bar
                               public_key=forest_client.public_key)
    scores = api.predict_scores("srbct", keyset, forest_client, x)  # encrypt, POST, decrypt
    dataset = api.upload_dataset(helr_client.encrypt_dataset(x, y))
    job = api.train(config, keyset, dataset); api.wait(job)          # progress bar: iteration i of n
    w = helr_client.decrypt_weights(api.download_model(job, params))

What travels, and what it costs, is counted in ``api.traffic`` (:class:`Traffic`): request and
response bodies in bytes, the seconds spent inside HTTP calls, the seconds this client spent
serializing, and the seconds the server reports for its own work (``Server-Timing``: in all and
per metric, e.g. a prediction's read / evaluate / write); take a ``snapshot()`` before a step and
``since()`` it after.

Uploads: the serialized object is cut into parts (``part_bytes``, default 8 MiB); the manifest
(every part's SHA-256 and size, and the whole's) is declared first, then each missing part is
PUT. A dropped connection is retried (``retries``) and, failing that, the next call with the
same bytes resumes: the client finds its unfinished upload of the same content and sends only
the parts the server lacks.
"""
from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
from tqdm.auto import tqdm

from fhe_core.errors import FHEError, WrongKindError
from fhe_core.params import Params
from fhe_core.rlwe import Ciphertext, EvalKeySet, PublicKey, SecretKey
from fhe_core.serialize import Kind, dumps_many, loads, loads_many, read_header
from server.mapping import mapped

DEFAULT_PART_BYTES = 8 << 20
DEFAULT_PARALLEL_PARTS = 4  # parts in flight at once (each on its own connection)
STREAM_CHUNK = 1 << 20  # a request body goes out in slices of this many bytes


class APIError(FHEError):
    """The service answered with an error: ``status`` (HTTP), ``error`` (its type name) and
    ``detail`` (its message)."""

    def __init__(self, status: int, error: str, detail: str):
        super().__init__(f"HTTP {status} {error}: {detail}")
        self.status, self.error, self.detail = status, error, detail


class JobFailedError(FHEError):
    """A training job ended as failed or cancelled (``state``, ``reason``)."""

    def __init__(self, job_id: str, state: str, reason: str | None):
        super().__init__(f"job {job_id} {state}: {reason or 'no reason given'}")
        self.job_id, self.state, self.reason = job_id, state, reason


@dataclass
class Traffic:
    """What this client's HTTP calls moved and cost (totals since the client was made)."""

    requests: int = 0
    sent: int = 0              # request body bytes
    received: int = 0          # response body bytes
    seconds: float = 0.0       # wall time inside HTTP calls (transfer and the server's work)
    serialize_seconds: float = 0.0  # this client writing what it sends and reading what it gets
    server_seconds: float = 0.0     # the server's own work, as its Server-Timing headers report it
    server_steps: dict[str, float] = dataclasses.field(default_factory=dict)  # the same per metric (read, evaluate)

    def snapshot(self) -> Traffic:
        return dataclasses.replace(self, server_steps=dict(self.server_steps))

    def since(self, earlier: Traffic) -> Traffic:
        """What happened between ``earlier`` (a snapshot) and now."""
        totals = {f.name: getattr(self, f.name) - getattr(earlier, f.name) for f in dataclasses.fields(self)
                  if f.name != "server_steps"}
        steps = {name: seconds - earlier.server_steps.get(name, 0.0) for name, seconds in self.server_steps.items()
                 if name not in earlier.server_steps or seconds != earlier.server_steps[name]}
        return Traffic(**totals, server_steps=steps)

    def count_server_timing(self, header: str) -> None:
        """Add a ``Server-Timing`` header's durations (``name;dur=<ms>, ...``)."""
        for name, ms in _SERVER_TIMING.findall(header):
            self.server_seconds += float(ms) / 1e3
            self.server_steps[name] = self.server_steps.get(name, 0.0) + float(ms) / 1e3


_SERVER_TIMING = re.compile(r"([^\s,;]+)[^,]*?;\s*dur=([0-9.]+)")


@dataclass(frozen=True)
class Manifest:
    """Part hashes and sizes of a blob, and the whole's hash and size."""

    parts: list[dict[str, Any]]
    sha256: str
    size: int

    @staticmethod
    def of(blob: bytes | memoryview, part_bytes: int) -> Manifest:
        """The whole's hash in one thread while the parts' are taken in another (hashlib
        releases the GIL): two passes over a multi-GB key file cost about one in wall time."""
        view = memoryview(blob)
        pieces = [view[i:i + part_bytes] for i in range(0, len(view), part_bytes)]
        with ThreadPoolExecutor(max_workers=2) as pool:
            whole = pool.submit(lambda: hashlib.sha256(view).hexdigest())
            parts = [{"sha256": hashlib.sha256(piece).hexdigest(), "size": len(piece)} for piece in pieces]
            return Manifest(parts, whole.result(), len(view))


class ServiceClient:
    """One tenant's session with the service (a bearer token)."""

    def __init__(self, base_url: str, token: str, *, timeout: float = 600.0, part_bytes: int = DEFAULT_PART_BYTES,
                 parallel_parts: int = DEFAULT_PARALLEL_PARTS, retries: int = 3, progress: bool = True,
                 transport: httpx.BaseTransport | None = None):
        if part_bytes < 1 or parallel_parts < 1:
            raise ValueError("part_bytes and parallel_parts must be >= 1")
        self.part_bytes, self.parallel_parts = part_bytes, parallel_parts
        self.retries, self.progress = retries, progress
        self.traffic = Traffic()
        self._traffic_lock = threading.Lock()
        self._limits: dict[str, int] | None = None
        self.http = httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {token}"},
                                 timeout=timeout, transport=transport)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> ServiceClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- plumbing ------------------------------------------------------------------------

    def _request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        """One HTTP call whose answer is small (JSON or empty), read whole."""
        return self._call(method, url, kwargs, _read_whole)

    def _download(self, method: str, url: str, **kwargs: Any) -> bytearray:
        """One HTTP call whose binary answer streams into one buffer of its declared length."""
        return self._call(method, url, kwargs, read_into_buffer)

    def _call(self, method: str, url: str, kwargs: dict[str, Any], read: Callable[[httpx.Response], Any]) -> Any:
        start = time.perf_counter()
        response = None
        try:
            with self.http.stream(method, url, **kwargs) as response:
                if response.is_error:
                    response.read()
                    raise _api_error(response)
                return read(response)
        finally:
            self._count(response, time.perf_counter() - start)

    def _count(self, response: httpx.Response | None, seconds: float) -> None:
        with self._traffic_lock:  # parts go up from several threads
            self.traffic.seconds += seconds
            if response is None:  # no answer (a transport error): only the time is known
                return
            self.traffic.requests += 1
            self.traffic.sent += int(response.request.headers.get("content-length", 0))
            self.traffic.received += response.num_bytes_downloaded
            self.traffic.count_server_timing(response.headers.get("server-timing", ""))

    @contextmanager
    def _serializing(self) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.traffic.serialize_seconds += time.perf_counter() - start

    def _json(self, method: str, url: str, **kwargs: Any) -> Any:
        return self._request(method, url, **kwargs).json()

    def health(self) -> dict[str, Any]:
        return self._json("GET", "/health")

    def limits(self) -> dict[str, int]:
        """The server's size limits (parts are cut to its ``max_part_bytes``)."""
        if self._limits is None:
            self._limits = self._json("GET", "/limits")
        return self._limits

    # ---- uploads in parts ------------------------------------------------------------------

    def _upload(self, kind: str, blob: bytes | memoryview, params: Params, *, desc: str) -> dict[str, Any]:
        """Create (or find and resume) an upload of ``blob`` and send its missing parts."""
        route = f"/{kind}s"
        part_bytes = min(self.part_bytes, self.limits()["max_part_bytes"])
        manifest = Manifest.of(blob, part_bytes)
        status = self._find_unfinished(route, manifest, params) or self._json(
            "POST", route, json={"params": params.literal.to_dict(), "parts": manifest.parts,
                                 "sha256": manifest.sha256, "size": manifest.size})
        missing = status["missing_parts"]
        with tqdm(total=manifest.size, unit="B", unit_scale=True, desc=desc, disable=not self.progress or not missing,
                  initial=manifest.size - sum(manifest.parts[n]["size"] for n in missing)) as bar:
            view = memoryview(blob)

            def put(n: int) -> int:
                self._put_part(f"{route}/{status['id']}/parts/{n}", view[n * part_bytes:(n + 1) * part_bytes])
                return manifest.parts[n]["size"]

            with ThreadPoolExecutor(max_workers=min(self.parallel_parts, len(missing) or 1)) as pool:
                for size in pool.map(put, missing):
                    bar.update(size)
        if status["state"] != "ready":
            status = self._json("POST", f"{route}/{status['id']}/complete")
        return status

    def _find_unfinished(self, route: str, manifest: Manifest, params: Params) -> dict[str, Any] | None:
        for status in self._json("GET", route):
            if (status["state"] == "uploading" and status["sha256"] == manifest.sha256
                    and status["params_id"] == params.params_id and status["parts"] == len(manifest.parts)):
                return status
        return None

    def _put_part(self, url: str, data: memoryview) -> None:
        for attempt in range(self.retries + 1):
            try:
                self._request("PUT", url, **binary_body(data))
                return
            except httpx.TransportError:
                if attempt == self.retries:
                    raise
                time.sleep(0.2 * 2**attempt)

    # ---- key sets ----------------------------------------------------------------------------

    def register_keys(self, keys: EvalKeySet | str | os.PathLike, params: Params, *, packed: bool = True,
                      public_key: PublicKey | None = None) -> str:
        """Upload evaluation keys (never a secret key) in parts; returns the key-set id. The
        same keys uploaded again, or an interrupted upload repeated, send only missing parts.

        ``keys``: an EvalKeySet, or the path of its serialized file (e.g. written key by key
        with ``fhe_core.serialize.dump_eval_keys``; memory-mapped, never read whole).
        ``packed``: residues at their primes' bit widths (for an EvalKeySet). ``public_key``: the
        client's, sent after the EvalKeySet (tree models flood their answers with it)."""
        if isinstance(keys, (str, os.PathLike)):
            if public_key is not None:
                raise TypeError("register_keys: with a key file, append the public key's record to the file "
                                "(fhe_core.serialize.dumps(public_key, packed=True) after the EvalKeySet's)")
            with mapped(keys) as view:
                # a secret-key file or another parameter set fails here, on this side, from the header
                # alone (the server checks every byte; a checksum pass here would cost seconds per GB)
                header = read_header(view)
                if header.kind != Kind.EVAL_KEY_SET:
                    raise WrongKindError(f"{os.fspath(keys)}: record kind {header.kind}, not an evaluation key set "
                                         f"({int(Kind.EVAL_KEY_SET)}): the secret key never leaves the client")
                if header.params_id != params.params_id:
                    raise TypeError(f"{os.fspath(keys)}: keys of params_id {header.params_id}, not {params.params_id}")
                return self._upload("keyset", view, params, desc="keys")["id"]
        if isinstance(keys, SecretKey) or not isinstance(keys, EvalKeySet):
            raise TypeError(f"register_keys takes an EvalKeySet, not {type(keys).__name__}: "
                            "the secret key never leaves the client")
        if public_key is not None and not isinstance(public_key, PublicKey):
            raise TypeError(f"register_keys: public_key must be a PublicKey, not {type(public_key).__name__}")
        with self._serializing():
            blob = dumps_many([keys] if public_key is None else [keys, public_key], packed=packed)
        return self._upload("keyset", blob, params, desc="keys")["id"]

    def keyset_status(self, keyset_id: str, model: str | None = None) -> dict[str, Any]:
        return self._json("GET", f"/keysets/{keyset_id}", params={"model": model} if model else None)

    def delete_keyset(self, keyset_id: str) -> None:
        self._request("DELETE", f"/keysets/{keyset_id}")

    # ---- models and predictions ----------------------------------------------------------

    def models(self) -> list[dict[str, Any]]:
        return self._json("GET", "/models")

    def model(self, name: str) -> dict[str, Any]:
        """A model's public part: its parameters and what a client needs to encrypt for it."""
        return self._json("GET", f"/models/{name}")

    def forest_client(self, name: str, *, device: str = "cpu", seed: bytes | None = None,
                      allow_insecure: bool = False) -> Any:
        """A new ForestClient (its own secret key) for model ``name``, built from the model's
        public part: parameters, level, layout, public binning."""
        from apps.xgboost.client import ForestClient
        from apps.xgboost.plan import PublicModel

        public = PublicModel.from_json(json.dumps(self.model(name)["public"]))
        return ForestClient(public, device=device, seed=seed, allow_insecure=allow_insecure)

    def add_model(self, name: str, model: bytes, params: Params, *, kind: str = "xgboost",
                  width: int | None = None, replace: bool = False, max_trees_per_class: int | None = None,
                  max_depth: int | None = None) -> dict[str, Any]:
        """Register a model (the token must be an administrator's), served in batches of up to
        ``width`` samples (default: the plan's); kind "private" takes the public bounds."""
        return self._json("POST", "/models", params={"replace": replace},
                          json={"name": name, "kind": kind, "params": params.literal.to_dict(),
                                "model_b64": base64.b64encode(model).decode(), "width": width,
                                "max_trees_per_class": max_trees_per_class, "max_depth": max_depth})

    def predict(self, model: str, keyset_id: str, cts: Sequence[Ciphertext], params: Params) -> list[Ciphertext]:
        """Encrypted scores of a batch of ciphertexts (sent and received as ``dumps_many``: fresh
        secret-key ciphertexts seeded, residues packed)."""
        with self._serializing():
            body = dumps_many(cts, packed=True)
        answer = self._download("POST", "/predictions", params={"model": model, "keyset": keyset_id},
                                **binary_body(body))
        with self._serializing():
            return loads_many(answer, params, expect=Ciphertext)

    def predict_scores(self, model: str, keyset_id: str, forest_client: Any, x: Any):
        """Encrypt ``x`` with the ForestClient, predict on the server, decrypt locally:
        the class scores ``[n, C]`` int64."""
        cts = forest_client.encrypt(x)
        scores = self.predict(model, keyset_id, cts, forest_client.params)
        return forest_client.decrypt_scores(scores, len(x))

    # ---- datasets and training jobs ------------------------------------------------------

    def upload_dataset(self, dataset: Any, params: Params) -> str:
        """Upload an encrypted dataset (its ``to_bytes()``, or the bytes) in parts; returns its id."""
        with self._serializing():
            blob = dataset if isinstance(dataset, (bytes, bytearray)) else dataset.to_bytes()
        return self._upload("dataset", bytes(blob), params, desc="dataset")["id"]

    def train(self, config: Any, keyset_id: str, dataset_id: str) -> str:
        """Submit a HELR training job (``config``: an HELRConfig or its JSON object); returns the job id."""
        body = config if isinstance(config, dict) else _json_object(config.to_json())
        return self._json("POST", "/jobs", json={"kind": "helr", "config": body, "keyset": keyset_id,
                                                 "dataset": dataset_id})["id"]

    def job(self, job_id: str) -> dict[str, Any]:
        return self._json("GET", f"/jobs/{job_id}")

    def cancel(self, job_id: str) -> dict[str, Any]:
        return self._json("POST", f"/jobs/{job_id}/cancel")

    def delete_job(self, job_id: str) -> None:
        """Forget a finished job and its encrypted result on the server."""
        self._request("DELETE", f"/jobs/{job_id}")

    def wait(self, job_id: str, *, timeout: float = 3600.0, poll: float = 0.5,
             on_progress: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
        """Poll until the job ends (tqdm bar: iteration i of n, ETA); raises JobFailedError
        if it failed or was cancelled, TimeoutError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        status = self.job(job_id)
        with tqdm(total=status["iterations"], unit="it", desc=f"job {job_id[:12]}", disable=not self.progress) as bar:
            while True:
                bar.update(status["iteration"] - bar.n)
                if on_progress is not None:
                    on_progress(status)
                if status["state"] == "succeeded":
                    return status
                if status["state"] in ("failed", "cancelled"):
                    raise JobFailedError(job_id, status["state"], status["error"])
                if time.monotonic() > deadline:
                    raise TimeoutError(f"job {job_id} still {status['state']} after {timeout} s")
                time.sleep(poll)
                status = self.job(job_id)

    def checkpoint(self, job_id: str, iteration: int) -> bytearray:
        """The job's encrypted state after ``iteration`` steps (decrypt it with the
        application's client half, e.g. ``HELRClient.decrypt_checkpoint``)."""
        return self._download("GET", f"/jobs/{job_id}/checkpoints/{iteration}")

    def download_model(self, job_id: str, params: Params) -> Any:
        """The encrypted trained model of a succeeded job (a ciphertext, to decrypt locally)."""
        content = self._download("GET", f"/jobs/{job_id}/result")
        with self._serializing():
            return loads(content, params)


def binary_body(data: bytes | bytearray | memoryview) -> dict[str, Any]:
    """httpx arguments that send ``data`` as an octet stream in STREAM_CHUNK slices of one view
    (no copy of the whole: httpcore re-slices a ``bytes`` body after every socket send, a copy of
    the rest each time, which held a 256 MiB upload to ~40 MB/s on loopback)."""
    view = memoryview(data).cast("B")
    chunks = (view[i:i + STREAM_CHUNK] for i in range(0, len(view), STREAM_CHUNK))
    headers = {"Content-Type": "application/octet-stream", "Content-Length": str(len(view))}
    return {"content": chunks, "headers": headers}


def _read_whole(response: httpx.Response) -> httpx.Response:
    response.read()
    return response


def read_into_buffer(response: httpx.Response) -> bytearray:
    """The answer's body in one buffer of its Content-Length, filled as the chunks arrive (httpx's
    ``read()`` keeps every chunk and joins them: a second copy of the whole)."""
    declared = response.headers.get("content-length")
    if declared is None or not declared.isdigit():
        return bytearray(response.read())
    body = bytearray(int(declared))
    view, filled = memoryview(body), 0
    for chunk in response.iter_raw():
        if filled + len(chunk) > len(body):
            raise httpx.RemoteProtocolError(f"answer longer than its Content-Length of {len(body)} bytes")
        view[filled:filled + len(chunk)] = chunk
        filled += len(chunk)
    if filled != len(body):
        raise httpx.RemoteProtocolError(f"answer truncated: {filled} of {len(body)} bytes")
    return body


def _api_error(response: httpx.Response) -> APIError:
    try:
        body = response.json()
        error, detail = body.get("error", "HTTPError"), body.get("detail", response.text)
    except ValueError:
        error, detail = "HTTPError", response.text
    return APIError(response.status_code, str(error), str(detail))


def _json_object(text: str) -> dict[str, Any]:
    value = json.loads(text)
    if not isinstance(value, dict):
        raise TypeError("config.to_json() must give a JSON object")
    return value


if __name__ == "__main__":  # python -m server.client ...: the command line in server.client_cli
    import sys

    from server.client_cli import main

    sys.exit(main())
