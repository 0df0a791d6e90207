"""Resumable uploads in parts, shared by key sets and encrypted datasets.

An upload is a row that moves through three states; every move is one conditional statement
(``UPDATE ... WHERE id = ? AND state = ?``, or a DELETE so guarded) checked by its row count,
inside a write transaction, so of two requests racing for one move exactly one wins::

    uploading --complete--> completing --verified--> ready
        |                       |  the bytes do not verify: removed
        |                       +- a server error: back to uploading, parts kept
        +- delete, expiry, a part 0 that is no evaluation key set: removed

1. ``create``: the client declares the parameter set, every part's SHA-256 and size, and the
   whole's SHA-256 and size (the manifest). Limits are checked here, before any byte arrives.
   If the tenant already has a verified upload with the same manifest, kind and parameters,
   the new one is ready at once (nothing is sent twice): the check and the new row, which names
   the blob and so keeps it, are one transaction. Another tenant's copy does not count (that
   would reveal it), but the blob on disk is content-addressed and stored once.
2. ``receive_part``: ``PUT .../parts/{n}`` streams part n to a temporary file while hashing it;
   only a part that has its declared size and hash is moved into place, in a transaction that
   finds the upload still uploading (a part that arrives after a delete or a complete is
   dropped). A dropped connection leaves nothing half-written and the client re-sends just the
   parts that ``status`` lists as missing. Part 0 is also checked as the start of a record: a
   secret key or another parameter set is refused right there.
3. ``complete``: claims the upload (``completing``: no part, delete or second completion gets
   in), joins the parts (the kernel copies, this thread hashes the whole), verifies the result
   with the kind's verifier (``serialize.check_many`` with the expected kinds and parameters:
   every check, nothing built), syncs it to the disk, and then moves it into the blob store and
   marks the upload ready in one transaction. A second ``complete`` meanwhile waits for the
   first and answers as it does.
4. ``discard``: removes the row (not while it completes, nor while a queued or running job
   uses it), its parts, and its blob once no row names it (:meth:`BlobStore.release`).

Durability: what was acknowledged survives a kill -9 of the server, a restart and a crash of
the machine: a part is fsynced before it is acknowledged, and the joined blob (written by a
kernel copy, without syncs) is fsynced once before its row says ready.

Files: ``parts/<upload id>/<n>``: verified parts of unfinished uploads, kept across restarts;
``tmp/``: unverified temporary files, cleared when the server starts; ``blobs/ab/ab...``:
verified content.
"""
from __future__ import annotations

import json
import os
import shutil
import threading
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from fhe_core.errors import FHEError, SerializationError
from fhe_core.params import Params
from fhe_core.serialize import HEADER_BYTES, Kind, read_header

from server.blobs import BlobStore, fsync_path, is_sha256, join_files, move_into_place, receive_to_file
from server.db import Database, Transaction, dumps_json, now
from server.errors import (
    BadRequestError, ConflictError, HashMismatchError, NotFoundError, PayloadTooLargeError, ServiceError,
    UnprocessableError,
)
from server.settings import Settings

# what a verifier gets (the joined file, the parameters) and returns (facts to show in the status)
Verifier = Callable[[Path, Params], dict[str, Any]]

# how a refusal names the state an upload is in
_STATE_WORDS = {"uploading": "not complete", "completing": "being completed by another request",
                "ready": "complete"}


@dataclass(frozen=True)
class PartSpec:
    sha256: str
    size: int


@dataclass(frozen=True)
class Upload:
    """A row of the uploads table."""

    id: str
    tenant_id: int
    kind: str
    params_json: str
    params_id: str
    parts: list[PartSpec]
    sha256: str
    size: int
    state: str
    info: dict[str, Any] | None

    @staticmethod
    def from_row(row: dict[str, Any]) -> Upload:
        parts = [PartSpec(p["sha256"], p["size"]) for p in json.loads(row["parts_json"])]
        info = json.loads(row["info_json"]) if row["info_json"] else None
        return Upload(row["id"], row["tenant_id"], row["kind"], row["params_json"], row["params_id"], parts,
                      row["sha256"], row["size"], row["state"], info)


class UploadStore:
    """The upload protocol over the database, the blob store and the part files."""

    def __init__(self, settings: Settings, db: Database, blobs: BlobStore):
        self.settings, self.db, self.blobs = settings, db, blobs
        self.parts_root = settings.parts_dir
        self.parts_root.mkdir(parents=True, exist_ok=True)
        # upload id -> set when the completion this process runs for it ends (a second complete
        # waits on it); entries change in the transactions that move the state
        self._completions: dict[str, threading.Event] = {}

    # ---- 1. create -----------------------------------------------------------------------

    def create(self, tenant_id: int, kind: str, params: Params, parts: list[PartSpec], sha256: str,
               size: int) -> Upload:
        """A new upload of ``kind`` for ``params``; ready at once if the content is known."""
        self._check_manifest(parts, sha256, size)
        upload_id = f"{kind[:2]}_{uuid.uuid4().hex}"
        parts_json = dumps_json([{"sha256": p.sha256, "size": p.size} for p in parts])
        with self.db.transaction() as conn:
            twin = self._verified_twin(conn, tenant_id, kind, params.params_id, sha256, size, parts_json)
            conn.execute(
                "INSERT INTO uploads (id, tenant_id, kind, params_json, params_id, parts_json, sha256, size, state, "
                "info_json, created, completed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (upload_id, tenant_id, kind, params.literal.to_json(), params.params_id, parts_json, sha256, size,
                 "uploading" if twin is None else "ready", None if twin is None else twin["info_json"], now(),
                 None if twin is None else now()))
        return self.get(tenant_id, kind, upload_id)

    def _verified_twin(self, conn: Transaction, tenant_id: int, kind: str, params_id: str, sha256: str,
                       size: int, parts_json: str) -> dict[str, Any] | None:
        """The tenant's ready upload with this very manifest whose blob is stored, else None.
        Only the tenant's own uploads count: "ready at once" for another tenant's bytes would
        tell it that someone else holds them (they still share one file on disk once sent)."""
        twins = conn.query("SELECT size, parts_json, info_json FROM uploads WHERE tenant_id = ? AND kind = ? "
                           "AND params_id = ? AND sha256 = ? AND state = 'ready'",
                           (tenant_id, kind, params_id, sha256))
        for twin in twins:
            if twin["size"] != size:
                raise UnprocessableError(f"manifest: your verified {kind} with SHA-256 {sha256} has {twin['size']} "
                                         f"bytes, the manifest declares {size}")
        # the same content cut into other parts is sent again: its part hashes are checked as they arrive
        twin = next((t for t in twins if t["parts_json"] == parts_json), None)
        return twin if twin is not None and self.blobs.exists(sha256) else None

    def _check_manifest(self, parts: list[PartSpec], sha256: str, size: int) -> None:
        s = self.settings
        if not parts:
            raise BadRequestError("manifest: at least one part")
        if len(parts) > s.max_parts:
            raise PayloadTooLargeError(f"manifest: {len(parts)} parts, at most {s.max_parts}")
        if not is_sha256(sha256) or not all(is_sha256(p.sha256) for p in parts):
            raise BadRequestError("manifest: hashes must be SHA-256 digests as 64 lowercase hex digits")
        for n, part in enumerate(parts):
            if part.size < 1:
                raise BadRequestError(f"manifest: part {n} has size {part.size}, parts are at least 1 byte")
            if part.size > s.max_part_bytes:
                raise PayloadTooLargeError(f"manifest: part {n} has {part.size} bytes, at most {s.max_part_bytes}")
        if size > s.max_upload_bytes:
            raise PayloadTooLargeError(f"manifest: {size} bytes in all, at most {s.max_upload_bytes}")
        if sum(p.size for p in parts) != size:
            raise BadRequestError(f"manifest: the parts add up to {sum(p.size for p in parts)} bytes, not {size}")

    # ---- reading -------------------------------------------------------------------------

    def get(self, tenant_id: int, kind: str, upload_id: str) -> Upload:
        """The tenant's upload; another tenant's (or none) is NotFoundError, the same answer."""
        row = self.db.one("SELECT * FROM uploads WHERE id = ? AND tenant_id = ? AND kind = ?",
                          (upload_id, tenant_id, kind))
        if row is None:
            raise NotFoundError(f"no {kind} {upload_id!r}")
        return Upload.from_row(row)

    def list(self, tenant_id: int, kind: str) -> list[Upload]:
        rows = self.db.query("SELECT * FROM uploads WHERE tenant_id = ? AND kind = ? ORDER BY created",
                             (tenant_id, kind))
        return [Upload.from_row(r) for r in rows]

    def missing_parts(self, upload: Upload) -> list[int]:
        return self._parts_not_stored(upload) if upload.state == "uploading" else []

    def _parts_not_stored(self, upload: Upload) -> list[int]:
        try:  # one listing, not a stat per part: every part's receipt answers this (hundreds of parts)
            stored = {entry.name for entry in os.scandir(self.parts_root / upload.id) if entry.is_file()}
        except FileNotFoundError:
            stored = set()
        return [n for n in range(len(upload.parts)) if str(n) not in stored]

    def blob_path(self, upload: Upload) -> Path:
        if upload.state != "ready":
            missing = f" (missing parts: {_ranges(self.missing_parts(upload)) or 'none'})" \
                if upload.state == "uploading" else ""
            raise ConflictError(f"{upload.kind} {upload.id} is {_STATE_WORDS[upload.state]}{missing}")
        return self.blobs.path(upload.sha256)

    # ---- 2. parts ------------------------------------------------------------------------

    async def receive_part(self, upload: Upload, n: int, body: AsyncIterator[bytes]) -> bool:
        """Store part ``n`` from ``body``; False when it was already there (the body is then
        not read: re-sending a part is harmless)."""
        if upload.state != "uploading":
            raise ConflictError(f"{upload.kind} {upload.id} is {_STATE_WORDS[upload.state]}; it takes no more parts")
        if not 0 <= n < len(upload.parts):
            raise BadRequestError(f"part {n}: the manifest has parts 0..{len(upload.parts) - 1}")
        if (self.parts_root / upload.id / str(n)).is_file():
            return False
        spec = upload.parts[n]
        tmp = self.blobs.temp_path(f"{upload.id}-{n}-")
        try:
            await receive_to_file(body, tmp, limit=self.settings.max_part_bytes, expected_size=spec.size,
                                  expected_sha256=spec.sha256, idle_timeout=self.settings.upload_idle_timeout_s,
                                  what=f"part {n}")
            if n == 0:
                try:
                    check_record_start(tmp, upload.kind, upload.params_id)
                except UnprocessableError:  # a secret key, other parameters, not a record: drop the upload
                    await anyio.to_thread.run_sync(self._remove, upload, ("uploading",))
                    raise
            await anyio.to_thread.run_sync(self._place_part, upload, n, tmp)  # waits for the lock: not on the loop
        finally:
            tmp.unlink(missing_ok=True)
        return True

    def _place_part(self, upload: Upload, n: int, tmp: Path) -> None:
        with self.db.transaction() as conn:  # the upload stays uploading while the part moves in
            if not _move(conn, upload.id, "uploading", "uploading"):
                raise self._refusal(conn, upload, f"{upload.kind} {upload.id} was deleted while part {n} arrived",
                                    "it takes no more parts")
            move_into_place(tmp, self.parts_root / upload.id / str(n))

    # ---- 3. complete ---------------------------------------------------------------------

    def complete(self, upload: Upload, params: Params, verify: Verifier) -> Upload:
        """Join, hash and verify the parts; on success the upload is ready and its content a
        blob. Bytes that do not verify remove the upload (its id answers 404); a server error
        puts it back to uploading with its parts. A completion already running in this process
        is waited for (up to the request timeout) and its outcome answered."""
        with self.db.transaction() as conn:
            state = _state(conn, upload.id)
            if state == "uploading":
                missing = self._parts_not_stored(upload)  # parts move in only under this lock
                if missing:
                    raise ConflictError(f"{upload.kind} {upload.id}: parts {_ranges(missing)} are missing")
                _move(conn, upload.id, "uploading", "completing")
                conn.execute("UPDATE uploads SET completer = ? WHERE id = ?", (self.settings.node, upload.id))
                self._completions[upload.id] = threading.Event()
            running = self._completions.get(upload.id)
        if state is None:
            raise NotFoundError(f"no {upload.kind} {upload.id!r}")
        if state == "uploading":
            return self._complete_claimed(upload, params, verify)
        if running is not None:
            running.wait(self.settings.request_timeout_s)
        current = self.get(upload.tenant_id, upload.kind, upload.id)  # 404 if its bytes did not verify
        if current.state != "ready":
            raise ConflictError(f"{upload.kind} {upload.id} is {_STATE_WORDS[current.state]}"
                                + ("; complete it again" if current.state == "uploading" else ""))
        return current

    def _complete_claimed(self, upload: Upload, params: Params, verify: Verifier) -> Upload:
        joined = self.blobs.temp_path(f"{upload.id}-whole-")
        try:
            folder = self.parts_root / upload.id
            sha = join_files([folder / str(n) for n in range(len(upload.parts))], joined)
            if sha != upload.sha256:
                raise HashMismatchError(f"{upload.kind} {upload.id}: the parts join to SHA-256 {sha}, "
                                        f"the manifest declared {upload.sha256}")
            info = verify(joined, params)
            fsync_path(joined)  # once the row says ready, the blob survives a crash of the machine too
            with self.db.transaction() as conn:
                self.blobs.adopt(joined, sha)  # the row names the blob all along: no delete removes it meanwhile
                conn.execute("UPDATE uploads SET state = 'ready', info_json = ?, completed = ? "
                             "WHERE id = ? AND state = 'completing'", (dumps_json(info), now(), upload.id))
                self._end_completion(upload.id)
        except FHEError:  # the bytes are wrong (the hash, the record): nothing of them is kept
            self._remove(upload, ("completing",))
            raise
        except BaseException:  # the server failed: the verified parts stay, the client may complete again
            with self.db.transaction() as conn:
                _move(conn, upload.id, "completing", "uploading")
                self._end_completion(upload.id)
            raise
        finally:
            joined.unlink(missing_ok=True)
        self._drop_parts(upload)
        return self.get(upload.tenant_id, upload.kind, upload.id)

    # ---- 4. removal ----------------------------------------------------------------------

    def discard(self, upload: Upload) -> None:
        """Remove an upload: its row, its parts, its blob unless another row names it. Refused
        (409) while it is being completed or a queued or running job uses it."""
        with self.db.transaction() as conn:  # the job check and the removal exclude a job's submission
            if conn.one("SELECT 1 AS x FROM jobs WHERE (keyset_id = ? OR dataset_id = ?) AND state IN "
                        "('queued', 'running') LIMIT 1", (upload.id, upload.id)):
                raise ConflictError(f"{upload.kind} {upload.id} is used by a queued or running job")
            if not self._remove_row(conn, upload, ("uploading", "ready")):
                raise self._refusal(conn, upload, f"no {upload.kind} {upload.id!r}", "delete it once it is ready")
        self._drop_parts(upload)

    def _remove(self, upload: Upload, states: tuple[str, ...]) -> None:
        """Remove the upload if it is in one of ``states``."""
        with self.db.transaction() as conn:
            removed = self._remove_row(conn, upload, states)
        if removed:
            self._drop_parts(upload)

    def _remove_row(self, conn: Transaction, upload: Upload, states: tuple[str, ...]) -> bool:
        """Inside a transaction: delete the row if it is in one of ``states`` (False if not, or
        gone) and release its blob. The caller drops the parts after the commit."""
        marks = ", ".join("?" * len(states))
        if not conn.execute(f"DELETE FROM uploads WHERE id = ? AND state IN ({marks})", (upload.id, *states)):
            return False
        self.blobs.release(self.db, upload.sha256)
        self._end_completion(upload.id)
        return True

    def _end_completion(self, upload_id: str) -> None:
        """Inside the transaction that moves an upload out of 'completing': wake its waiters."""
        completion = self._completions.pop(upload_id, None)
        if completion is not None:
            completion.set()

    def _drop_parts(self, upload: Upload) -> None:
        """Once the row is gone or ready (committed), no part moves in: the folder can go
        outside the lock."""
        shutil.rmtree(self.parts_root / upload.id, ignore_errors=True)

    def _refusal(self, conn: Transaction, upload: Upload, gone: str, busy: str) -> ServiceError:
        """Why an upload was not in the state a move needs: NotFoundError(``gone``) if it no
        longer exists, else ConflictError naming its state and ``busy``."""
        state = _state(conn, upload.id)
        if state is None:
            return NotFoundError(gone)
        return ConflictError(f"{upload.kind} {upload.id} is {_STATE_WORDS[state]}; {busy}")

    def expire(self, ttl_s: float) -> int:
        """Remove unfinished uploads created more than ``ttl_s`` seconds ago whose parts have not
        changed for as long (abandoned uploads); returns how many."""
        cutoff = now() - ttl_s
        expired = 0
        for row in self.db.query("SELECT * FROM uploads WHERE state = 'uploading' AND created < ?", (cutoff,)):
            upload = Upload.from_row(row)
            folder = self.parts_root / upload.id
            with self.db.transaction() as conn:  # no part moves in while its age is read
                touched = max((p.stat().st_mtime for p in folder.iterdir()), default=0.0) if folder.is_dir() else 0.0
                removed = touched < cutoff and self._remove_row(conn, upload, ("uploading",))
            if removed:
                self._drop_parts(upload)
                expired += 1
        return expired

    def recover(self) -> None:
        """At the start of the process that serves the data directory: completions the last
        run did not finish go back to uploading (all their parts are there: the client
        completes again), part folders of uploads that no longer take parts go, and abandoned
        uploads expire. Verified parts of unfinished uploads stay.

        With a shared store another host may be completing an upload right now: only this
        host's own completions go back (its previous life is gone: one process per node holds
        its lock); another host's stay, with their parts, until that host starts again."""
        with self.db.transaction() as conn:
            if self.settings.shared:
                conn.execute("UPDATE uploads SET state = 'uploading' WHERE state = 'completing' AND completer = ?",
                             (self.settings.node,))
            else:
                conn.execute("UPDATE uploads SET state = 'uploading' WHERE state = 'completing'")
            uploading = {row["id"] for row in conn.query("SELECT id FROM uploads WHERE state IN "
                                                         "('uploading', 'completing')")}
        for folder in self.parts_root.iterdir():
            if folder.name not in uploading:
                shutil.rmtree(folder, ignore_errors=True)
        self.expire(self.settings.upload_ttl_s)


def _state(conn: Transaction, upload_id: str) -> str | None:
    return conn.scalar("SELECT state FROM uploads WHERE id = ?", (upload_id,))


def _move(conn: Transaction, upload_id: str, old: str, new: str) -> bool:
    """Move the upload from state ``old`` to ``new``; False if it was not in ``old``. With
    ``old == new`` this holds the row in its state until the transaction ends (a row lock on a
    server database; SQLite's write lock is held already)."""
    return conn.execute("UPDATE uploads SET state = ? WHERE id = ? AND state = ?", (new, upload_id, old)) == 1


def check_record_start(path: Path, kind: str, params_id: str) -> None:
    """Refuse, from its first bytes, a payload that is a secret key, or (for a key set) that is
    not an evaluation key set of ``params_id``. Full checks happen at completion."""
    with open(path, "rb") as f:
        head = f.read(HEADER_BYTES)
    try:
        header = read_header(head)
    except SerializationError:
        if kind == "keyset":
            raise UnprocessableError("keyset: part 0 does not start with a serialized record (bad magic)") from None
        return
    if header.kind == Kind.SECRET_KEY:
        raise UnprocessableError(f"{kind}: the upload is a SECRET KEY; the server never accepts one "
                                 "(send only evaluation keys: EvalKeySet)")
    if kind == "keyset":
        if header.kind != Kind.EVAL_KEY_SET:
            name = Kind(header.kind).name if header.kind in set(Kind) else str(header.kind)
            raise UnprocessableError(f"keyset: the upload is a {name} record, expected EVAL_KEY_SET")
        if header.params_id != params_id:
            raise UnprocessableError(f"keyset: the keys belong to params_id {header.params_id}, "
                                     f"the key set was declared for {params_id}")


def _ranges(numbers: list[int]) -> str:
    """[0, 1, 2, 5] -> '0-2, 5'."""
    out, start = [], None
    for i, n in enumerate(numbers):
        if start is None:
            start = n
        if i + 1 == len(numbers) or numbers[i + 1] != n + 1:
            out.append(str(start) if start == n else f"{start}-{n}")
            start = None
    return ", ".join(out)
