"""Models the server holds (registered by an administrator) and encrypted predictions with them.

A model kind is an adapter over one application's server half (:mod:`server.apps`): it checks
a model against its parameters, says what a client must know to encrypt for it (the public
part) and which evaluation keys it needs, and evaluates a batch of ciphertexts.

Predictions run synchronously in the request, in the threadpool: one prediction is short (one
batch through the evaluator), the loaded key set and evaluator come from LRU caches shared
with the other requests, and a queue round trip would only add latency. Long work (training)
goes through the worker. An evaluator keeps state while it evaluates, so calls on one cached
evaluator (one model and key set) take turns; different key sets run side by side.
"""
from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass
from typing import Any, Protocol

from fhe_core.params import Params
from fhe_core.rlwe import Ciphertext, EvalKeySet
from fhe_core.serialize import dumps_many, loads_many

from server.db import dumps_json, now
from server.errors import ConflictError, NotFoundError, UnprocessableError
from server.keycache import LRUCache
from server.uploads import Upload


class ModelKind(Protocol):
    """What the registry needs from an application's server half."""

    def check(self, model: bytes, params: Params, width: int | None) -> dict[str, Any]:
        """Validate ``model`` for ``params`` and batches of up to ``width`` samples (None: the
        kind's default), raising an FHEError; return its public description."""

    def required_keys(self, public: dict[str, Any], params: Params) -> tuple[bool, set[int]]:
        """(needs a relinearization key, the Galois elements it needs)."""

    def evaluator(self, model: bytes, params: Params, keys: EvalKeySet, public: dict[str, Any]) -> Any:
        """An object with ``evaluate(list[Ciphertext]) -> list[Ciphertext]`` for the layout the
        public description (what :meth:`check` returned) promised the clients."""


@dataclass(frozen=True)
class Prediction:
    """A prediction's answer (``dumps_many`` bytes) and the server's seconds on it: reading the
    batch (``loads_many``: unpacking, seed expansion, checks, on the device), evaluating, writing."""

    body: bytes
    seconds: dict[str, float]

    def server_timing(self) -> str:
        """The W3C ``Server-Timing`` header value (durations in milliseconds)."""
        return ", ".join(f"{name};dur={1e3 * value:.3f}" for name, value in self.seconds.items())


class ModelRegistry:
    def __init__(self, service: Any, kinds: dict[str, ModelKind]):
        self.service, self.kinds = service, kinds
        self._evaluators: LRUCache[Any] = LRUCache(service.settings.keyset_cache_size)

    def _kind(self, name: str) -> ModelKind:
        if name not in self.kinds:
            raise UnprocessableError(f"unknown model kind {name!r}; this server serves {sorted(self.kinds)}")
        return self.kinds[name]

    def add(self, name: str, kind: str, params_literal: dict[str, Any], model: bytes, *,
            width: int | None = None, replace: bool = False) -> dict[str, Any]:
        """Check and store a model served in batches of up to ``width`` samples; a name in use
        is a 409 unless ``replace``."""
        params = self.service.params(params_literal)
        public = self._kind(kind).check(model, params, width)
        if not replace and self.service.db.one("SELECT name FROM models WHERE name = ?", (name,)):
            raise ConflictError(f"model {name!r} exists (delete it first, or replace it)")
        blob = self.service.blobs.put_bytes(model)
        self.service.db.execute(
            "INSERT OR REPLACE INTO models (name, kind, params_json, params_id, blob, public_json, created) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (name, kind, params.literal.to_json(), params.params_id, blob, dumps_json(public), now()))
        return self.get(name)

    def get(self, name: str) -> dict[str, Any]:
        row = self.service.db.one("SELECT * FROM models WHERE name = ?", (name,))
        if row is None:
            raise NotFoundError(f"no model {name!r}")
        return row

    def list(self) -> list[dict[str, Any]]:
        return self.service.db.query("SELECT * FROM models ORDER BY name")

    def delete(self, name: str) -> None:
        self.get(name)
        self.service.db.execute("DELETE FROM models WHERE name = ?", (name,))

    def missing_keys(self, name: str, keyset: Upload) -> dict[str, Any]:
        """The keys model ``name`` needs that ``keyset`` lacks: {"relin": bool, "galois_elements": [...]}."""
        return self._missing_keys(self.get(name), keyset)

    def _missing_keys(self, row: dict[str, Any], keyset: Upload) -> dict[str, Any]:
        if keyset.params_id != row["params_id"]:
            raise UnprocessableError(f"key set {keyset.id} belongs to params_id {keyset.params_id}, "
                                     f"model {row['name']!r} to {row['params_id']}")
        params = self.service.params(row["params_json"])
        relin, galois = self._kind(row["kind"]).required_keys(json.loads(row["public_json"]), params)
        info = keyset.info or {}
        return {"relin": bool(relin and not info.get("relin")),
                "galois_elements": sorted(galois - set(info.get("galois_elements", [])))}

    def predict(self, name: str, keyset: Upload, body: bytes | bytearray) -> Prediction:
        """Encrypted scores for a batch of ciphertexts (``dumps_many`` bytes in and out)."""
        row = self.get(name)
        missing = self._missing_keys(row, keyset)
        if missing["relin"] or missing["galois_elements"]:
            raise UnprocessableError(f"key set {keyset.id} lacks keys model {name!r} needs: {missing}")
        params, keys = self.service.keyset(keyset)
        settings = self.service.settings
        # one evaluator per model bytes, public part (it fixes the batch width) and key set: the
        # same bytes registered twice with different widths must not share one
        public_sha = hashlib.sha256(row["public_json"].encode()).hexdigest()
        evaluator, lock = self._evaluators.get(
            f"{row['blob']}:{public_sha}:{keyset.sha256}",
            lambda: (self._kind(row["kind"]).evaluator(self.service.blobs.read_bytes(row["blob"]), params, keys,
                                                       json.loads(row["public_json"])),
                     threading.Lock()))
        # an evaluator keeps per-call state: one batch at a time per (model, key set). The batch
        # is parsed inside the turn, so a waiting request holds its raw body only, not tensors.
        with lock:
            start = time.perf_counter()
            cts = loads_many(body, params, expect=Ciphertext, device=settings.device,
                             max_bytes=settings.max_body_bytes, max_count=settings.max_batch)
            read = time.perf_counter()
            results = evaluator.evaluate(cts)
            answer = dumps_many(results, packed=True)  # words at the primes' widths; the device waits here
            done = time.perf_counter()
        return Prediction(answer, {"read": read - start, "evaluate+write": done - read})
