"""Tenants and their bearer tokens.

A token is 32 random bytes from the OS CSPRNG (``secrets``), shown once when created; only its
SHA-256 is stored. A fast hash is enough here (unlike passwords): a 256-bit random token cannot
be guessed from its hash, and lookups stay O(1) by the hash.
"""
from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timezone

from server.db import Database, now
from server.errors import AuthenticationError, BadRequestError

TOKEN_PREFIX = "fhe_"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class Tenant:
    id: int
    name: str
    is_admin: bool


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def create_token(db: Database, tenant_name: str, *, admin: bool = False, ttl_s: float | None = None) -> str:
    """A new token for ``tenant_name`` (the tenant is created on first use); returns the token,
    which is not stored anywhere. ``admin`` makes the tenant an administrator (models); with
    ``ttl_s`` the token is refused from ``ttl_s`` seconds on (default: it never expires)."""
    if not _NAME.match(tenant_name):
        raise BadRequestError(f"tenant name {tenant_name!r}: use 1-64 letters, digits, '_', '.', '-'")
    if ttl_s is not None and not 0 < ttl_s < float("inf"):
        raise BadRequestError(f"token lifetime {ttl_s!r} s: give a positive number of seconds")
    created = now()
    expires = None if ttl_s is None else created + ttl_s
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with db.transaction() as conn:
        conn.execute("INSERT OR IGNORE INTO tenants (name, is_admin, created) VALUES (?, 0, ?)",
                     (tenant_name, now()))
        if admin:
            conn.execute("UPDATE tenants SET is_admin = 1 WHERE name = ?", (tenant_name,))
        tenant_id = conn.execute("SELECT id FROM tenants WHERE name = ?", (tenant_name,)).fetchone()[0]
        conn.execute("INSERT INTO tokens (token_hash, tenant_id, created, expires) VALUES (?, ?, ?, ?)",
                     (hash_token(token), tenant_id, created, expires))
    return token


def revoke_tokens(db: Database, tenant_name: str) -> int:
    """Delete every token of ``tenant_name``; returns how many there were."""
    return db.execute("DELETE FROM tokens WHERE tenant_id = (SELECT id FROM tenants WHERE name = ?)",
                      (tenant_name,))


def tenant_for_token(db: Database, token: str) -> Tenant:
    """The tenant a bearer token belongs to, or AuthenticationError."""
    digest = hash_token(token)
    row = db.one("SELECT t.id, t.name, t.is_admin, k.token_hash, k.expires FROM tokens k "
                 "JOIN tenants t ON t.id = k.tenant_id WHERE k.token_hash = ?", (digest,))
    if row is None or not hmac.compare_digest(row["token_hash"], digest):
        raise AuthenticationError("unknown or revoked token")
    if row["expires"] is not None and now() >= row["expires"]:
        when = datetime.fromtimestamp(row["expires"], timezone.utc).isoformat(timespec="seconds")
        raise AuthenticationError(f"token expired at {when}; ask the operator for a new one")
    return Tenant(id=row["id"], name=row["name"], is_admin=bool(row["is_admin"]))
