"""The service's state, one object per app: settings, database, blob store, uploads, the
key-set cache and the job worker. Routers reach it through :func:`server.deps.get_service`.
"""
from __future__ import annotations

import fcntl
import functools
import logging
import os
import threading
from pathlib import Path
from typing import IO, Any

from fhe_core.params import Params, ParamsLiteral
from fhe_core.errors import SerializationError
from fhe_core.rlwe import EvalKeySet, PublicKey
from fhe_core.serialize import Kind, check_many, loads_many

from server.blobs import BlobStore
from server.db import Database
from server.keycache import LRUCache
from server.mapping import mapped
from server.settings import Settings
from server.uploads import Upload, UploadStore

log = logging.getLogger("server.service")


class Service:
    """Everything a request or the worker needs; built by ``create_app`` (or a test).

    ``owner``: this process serves the data directory (``python -m server serve``, a test's
    server). It holds the directory's lock (a second server on it is refused) and, at start,
    clears what the previous run left unfinished: unverified temporary files, completions,
    abandoned uploads (verified parts stay). Administration commands are not owners: they add
    rows and never touch files that a running server's requests may be writing.
    """

    def __init__(self, settings: Settings, *, owner: bool = False):
        self.settings = settings
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        settings.jobs_dir.mkdir(parents=True, exist_ok=True)
        self._data_dir_lock = _lock_data_dir(settings.lock_path) if owner else None
        self.db = Database(settings.store)
        self.blobs = BlobStore(settings.blob_dir, settings.tmp_dir)
        self.uploads = UploadStore(settings, self.db, self.blobs)
        if owner:
            self.blobs.clear_tmp()
            self.uploads.recover()
        self.keysets: LRUCache[tuple[EvalKeySet, PublicKey | None]] = LRUCache(settings.keyset_cache_size)
        self.warms_verified_keys = True  # this process runs the jobs: a verified key set loads in the background
        # attached by server.app.build_service: the app adapters and the workers
        self.models: Any = None    # server.models.ModelRegistry
        self.training: Any = None  # server.apps.HELRTraining
        self.workers: Any = None   # server.workers.WorkerPool or InlineWorker: runs jobs and predictions

    # ---- parameters ----------------------------------------------------------------------

    def params(self, literal: dict[str, Any] | str) -> Params:
        """Validated Params from a literal (dict or canonical JSON) on the service's device.
        Below 128-bit security they are refused unless the service allows insecure sets."""
        if isinstance(literal, dict):
            text = ParamsLiteral.from_dict(literal).to_json()
        else:
            text = ParamsLiteral.from_json(literal).to_json()
        return _params(text, self.settings.allow_insecure, self.settings.device)

    # ---- key sets --------------------------------------------------------------------------

    def verify_keyset(self, path: Path, params: Params) -> dict[str, Any]:
        """The key-set verifier of :meth:`UploadStore.complete`: the file must be an EvalKeySet of
        ``params``, optionally followed by the client's PublicKey, passing every check of
        ``serialize.loads_many`` (sizes, kinds, checksums, params_id, metadata, shapes, residue
        ranges: ``serialize.check_many``). Nothing is built: the keys' seeded halves are expanded
        where the set is loaded, on the device of the first job that uses it. Returns the status
        facts (relin key, Galois elements, public key)."""
        with mapped(path) as view:
            infos = check_many(view, params, expect=(EvalKeySet, PublicKey), device=self.settings.device,
                               max_bytes=self.settings.max_upload_bytes, max_count=2)
        _check_keyset_kinds([info.kind for info in infos])
        members = infos[0].metadata["records"]
        return {"relin": any(m["kind"] == Kind.RELIN_KEY for m in members),
                "galois_elements": sorted(m["galois_element"] for m in members if "galois_element" in m),
                "public_key": len(infos) > 1}

    def warm_keyset(self, upload: Upload) -> None:
        """Load a ready key set into the cache in a background thread, where this process runs the
        jobs: the seeded halves are expanded while the client goes on (encrypting and sending its
        data), and the first job finds the set loaded, or waits for the load under way (the
        cache loads each set once). A failure is logged and left to the first job to meet."""
        if not self.warms_verified_keys:
            return

        def load() -> None:
            try:
                self._keys(upload, self.params(upload.params_json))
                if not self.blobs.path(upload.sha256).is_file():  # deleted meanwhile: do not keep it loaded
                    self.keysets.discard(upload.sha256)
            except Exception:  # noqa: BLE001 - a background warm-up only logs
                log.exception("loading key set %s in the background failed", upload.id)

        threading.Thread(target=load, name=f"warm-{upload.id}", daemon=True).start()

    def keyset(self, upload: Upload) -> tuple[Params, EvalKeySet]:
        """The parameters and loaded evaluation keys of a ready key set (from the cache when it can)."""
        params = self.params(upload.params_json)
        return params, self._keys(upload, params)[0]

    def public_key(self, upload: Upload) -> PublicKey | None:
        """The client's public key uploaded with the key set (tree models flood their answers with
        it), or None."""
        return self._keys(upload, self.params(upload.params_json))[1]

    def _keys(self, upload: Upload, params: Params) -> tuple[EvalKeySet, PublicKey | None]:
        path = self.uploads.blob_path(upload)
        try:
            return self.keysets.get(upload.sha256, lambda: self._load_keyset(path, params))
        except FileNotFoundError:
            self.uploads.get(upload.tenant_id, upload.kind, upload.id)  # 404 if deleted since the request read it
            raise  # a ready row without its blob would be a bug: not the client's to hear as a 404

    def _load_keyset(self, path: Path, params: Params) -> tuple[EvalKeySet, PublicKey | None]:
        with mapped(path) as view:
            objects = loads_many(view, params, expect=(EvalKeySet, PublicKey), device=self.settings.device,
                                 max_bytes=self.settings.max_upload_bytes, max_count=2)
        _check_keyset_kinds([{EvalKeySet: Kind.EVAL_KEY_SET, PublicKey: Kind.PUBLIC_KEY}[type(o)] for o in objects])
        return objects[0], (objects[1] if len(objects) > 1 else None)

    def close(self) -> None:
        if self.workers is not None:
            self.workers.stop()
        self.db.close()
        if self._data_dir_lock is not None:
            self._data_dir_lock.close()


def _check_keyset_kinds(kinds: list[Kind]) -> None:
    if kinds not in ([Kind.EVAL_KEY_SET], [Kind.EVAL_KEY_SET, Kind.PUBLIC_KEY]):
        raise SerializationError("key set: expected an EvalKeySet record, optionally followed by the "
                                 f"client's PublicKey, got {[k.name.lower() for k in kinds]}")


def _lock_data_dir(path: Path) -> IO[str]:
    """Hold an exclusive lock on ``path`` (``settings.lock_path``) while the returned file is open
    (the kernel drops it when the process ends, kill -9 included); the file names the holder's pid."""
    lock = open(path, "a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        holder = lock.read().strip() or "?"
        lock.close()
        raise RuntimeError(f"{path.parent} is served by another process (pid {holder} holds {lock.name}); "
                           "one server per data directory (per node name when the store is shared)") from None
    lock.truncate(0)
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    return lock


@functools.lru_cache(maxsize=32)
def _params(literal_json: str, allow_insecure: bool, device: str) -> Params:
    """Prime generation is slow: one Params per literal (ParameterError/SecurityError -> 422)."""
    return Params.from_literal(ParamsLiteral.from_json(literal_json), allow_insecure=allow_insecure, device=device)
