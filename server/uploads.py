"""Resumable uploads in parts, shared by key sets and encrypted datasets.

1. ``create``: the client declares the parameter set, every part's SHA-256 and size, and the
   whole's SHA-256 and size (the manifest). Limits are checked here, before any byte arrives.
   If the tenant already has a verified upload of the same content, kind and parameters, the
   new one is ready at once (nothing is sent twice); another tenant's copy does not count (that
   would reveal it), but the blob on disk is content-addressed and stored once.
2. ``receive_part``: ``PUT .../parts/{n}`` streams part n to a temporary file while hashing it;
   only a part that has its declared size and hash is renamed into place, so a dropped
   connection leaves nothing half-written and the client re-sends just the parts that
   ``status`` lists as missing. Part 0 is also checked as the start of a record: a secret key
   or another parameter set is refused right there.
3. ``complete``: the parts are joined (hashing the whole), the result is verified by the kind's
   verifier (``serialize.loads`` with the expected kind and parameters), and only then moved
   into the blob store. Any failure removes the upload and its parts: nothing is kept.

Files: ``tmp/parts/<upload id>/<n>`` while uploading, ``blobs/ab/ab...`` when verified.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fhe_core.params import Params
from fhe_core.errors import SerializationError
from fhe_core.serialize import HEADER_BYTES, Kind, read_header

from server.blobs import BlobStore, is_sha256, receive_to_file
from server.db import Database, dumps_json, now
from server.errors import (
    BadRequestError, ConflictError, HashMismatchError, NotFoundError, PayloadTooLargeError, UnprocessableError,
)
from server.settings import Settings

# what a verifier gets (the joined file, the parameters) and returns (facts to show in the status)
Verifier = Callable[[Path, Params], dict[str, Any]]


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
        self.parts_root = settings.tmp_dir / "parts"
        self.parts_root.mkdir(parents=True, exist_ok=True)

    # ---- 1. create -----------------------------------------------------------------------

    def create(self, tenant_id: int, kind: str, params: Params, parts: list[PartSpec], sha256: str,
               size: int) -> Upload:
        """A new upload of ``kind`` for ``params``; ready at once if the content is known."""
        self._check_manifest(parts, sha256, size)
        upload_id = f"{kind[:2]}_{uuid.uuid4().hex}"
        # only the tenant's own uploads count: "ready at once" for another tenant's bytes would tell
        # it that someone else holds them (they still share one file on disk once sent)
        twin = self.db.one("SELECT info_json FROM uploads WHERE sha256 = ? AND kind = ? AND params_id = ? "
                           "AND tenant_id = ? AND state = 'ready' LIMIT 1", (sha256, kind, params.params_id, tenant_id))
        ready = twin is not None and self.blobs.exists(sha256)
        self.db.execute(
            "INSERT INTO uploads (id, tenant_id, kind, params_json, params_id, parts_json, sha256, size, state, "
            "info_json, created, completed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (upload_id, tenant_id, kind, params.literal.to_json(), params.params_id,
             dumps_json([{"sha256": p.sha256, "size": p.size} for p in parts]), sha256, size,
             "ready" if ready else "uploading", twin["info_json"] if ready else None, now(),
             now() if ready else None))
        return self.get(tenant_id, kind, upload_id)

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
        if upload.state == "ready":
            return []
        folder = self.parts_root / upload.id
        return [n for n in range(len(upload.parts)) if not (folder / str(n)).is_file()]

    # ---- 2. parts ------------------------------------------------------------------------

    async def receive_part(self, upload: Upload, n: int, body: AsyncIterator[bytes]) -> bool:
        """Store part ``n`` from ``body``; False when it was already there (the body is then
        not read: re-sending a part is harmless)."""
        if upload.state != "uploading":
            raise ConflictError(f"{upload.kind} {upload.id} is {upload.state}; it takes no more parts")
        if not 0 <= n < len(upload.parts):
            raise BadRequestError(f"part {n}: the manifest has parts 0..{len(upload.parts) - 1}")
        folder = self.parts_root / upload.id
        target = folder / str(n)
        if target.is_file():
            return False
        folder.mkdir(exist_ok=True)
        spec = upload.parts[n]
        tmp = self.blobs.temp_path(f"{upload.id}-{n}-")
        await receive_to_file(body, tmp, limit=self.settings.max_part_bytes, expected_size=spec.size,
                              expected_sha256=spec.sha256, idle_timeout=self.settings.upload_idle_timeout_s,
                              what=f"part {n}")
        if n == 0:
            try:
                check_record_start(tmp, upload.kind, upload.params_id)
            except BaseException:  # a secret key, other parameters, not a record: drop the whole upload
                tmp.unlink(missing_ok=True)
                self.discard(upload)
                raise
        tmp.replace(target)
        return True

    # ---- 3. complete ---------------------------------------------------------------------

    def complete(self, upload: Upload, params: Params, verify: Verifier) -> Upload:
        """Join, hash and verify the parts; on success the upload is ready and its content a
        blob, on any failure the upload and its parts are gone (its id answers 404)."""
        if upload.state == "ready":
            return upload
        missing = self.missing_parts(upload)
        if missing:
            raise ConflictError(f"{upload.kind} {upload.id}: parts {_ranges(missing)} are missing")
        joined = self.blobs.temp_path(f"{upload.id}-whole-")
        try:
            sha = self._join(upload, joined)
            if sha != upload.sha256:
                raise HashMismatchError(f"{upload.kind} {upload.id}: the parts join to SHA-256 {sha}, "
                                        f"the manifest declared {upload.sha256}")
            info = verify(joined, params)
        except BaseException:
            joined.unlink(missing_ok=True)
            self.discard(upload)
            raise
        self.blobs.adopt(joined, sha)
        self.db.execute("UPDATE uploads SET state = 'ready', info_json = ?, completed = ? WHERE id = ?",
                        (dumps_json(info), now(), upload.id))
        shutil.rmtree(self.parts_root / upload.id, ignore_errors=True)
        return self.get(upload.tenant_id, upload.kind, upload.id)

    def _join(self, upload: Upload, target: Path) -> str:
        digest = hashlib.sha256()
        folder = self.parts_root / upload.id
        with open(target, "wb") as out:
            for n in range(len(upload.parts)):
                with open(folder / str(n), "rb") as part:
                    while chunk := part.read(1 << 20):
                        digest.update(chunk)
                        out.write(chunk)
            out.flush()
        return digest.hexdigest()

    def discard(self, upload: Upload) -> None:
        """Remove an upload's row and part files (its blob stays if another row names it)."""
        self.db.execute("DELETE FROM uploads WHERE id = ?", (upload.id,))
        shutil.rmtree(self.parts_root / upload.id, ignore_errors=True)
        still_named = self.db.one("SELECT 1 AS x FROM uploads WHERE sha256 = ?", (upload.sha256,))
        if upload.state == "ready" and still_named is None:
            self.blobs.delete(upload.sha256)

    def expire(self, ttl_s: float) -> int:
        """Remove unfinished uploads created more than ``ttl_s`` seconds ago whose parts have not
        changed for as long (abandoned uploads); returns how many."""
        cutoff = now() - ttl_s
        expired = 0
        for row in self.db.query("SELECT * FROM uploads WHERE state = 'uploading' AND created < ?", (cutoff,)):
            folder = self.parts_root / row["id"]
            touched = max((p.stat().st_mtime for p in folder.iterdir()), default=0.0) if folder.is_dir() else 0.0
            if touched < cutoff:
                self.discard(Upload.from_row(row))
                expired += 1
        return expired

    def blob_path(self, upload: Upload) -> Path:
        if upload.state != "ready":
            raise ConflictError(f"{upload.kind} {upload.id} is not complete (missing parts: "
                                f"{_ranges(self.missing_parts(upload))})")
        return self.blobs.path(upload.sha256)




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
