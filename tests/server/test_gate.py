"""The request gate and the HTTP contract, over real HTTP (raw sockets where the body must stay
unfinished): authentication before any body is read, the body limit on chunked bodies on every
route, strict Authorization parsing, token expiry, one error body for every non-2xx answer (the
framework's own included) and its declaration in the OpenAPI document."""
from __future__ import annotations

import json
import socket
import time
from urllib.parse import urlsplit

import httpx
import pytest

from conftest import make_tokens, tiny_settings
from server.__main__ import main
from server.db import Database
from server.embedded import background_server
from server.errors import AuthenticationError
from server.tenants import create_token, tenant_for_token

BODY_LIMIT = 64 << 10
ANSWER_WITHIN_S = 10.0  # a server that waits for the rest of the body never answers


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    settings = tiny_settings(tmp_path_factory.mktemp("gate-data"), max_body_bytes=BODY_LIMIT,
                             max_part_bytes=32 << 10)
    tokens = make_tokens(settings)
    with background_server(settings) as running:
        running.tokens = tokens
        yield running


def unfinished_chunked(url: str, method: str, path: str, headers: dict[str, str], body_bytes: int):
    """Send the head and ``body_bytes`` of a chunked body, never its last chunk, and read the
    answer: (status, JSON body). Times out (socket.timeout) if the server waits for the rest."""
    split = urlsplit(url)
    head = [f"{method} {path} HTTP/1.1", f"Host: {split.netloc}", "Content-Type: application/json",
            "Transfer-Encoding: chunked", *(f"{k}: {v}" for k, v in headers.items())]
    with socket.create_connection((split.hostname, split.port), timeout=ANSWER_WITHIN_S) as sock:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        chunk = b"[" + b"1," * 4095  # a JSON array that never closes
        sent = 0
        while sent < body_bytes:
            piece = chunk[: body_bytes - sent]
            sock.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            sent += len(piece)
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += sock.recv(65536)
        head_bytes, body = answer.split(b"\r\n\r\n", 1)
        lines = head_bytes.decode("latin-1").split("\r\n")
        length = int(next(line.split(":", 1)[1] for line in lines if line.lower().startswith("content-length")))
        while len(body) < length:
            body += sock.recv(65536)
    return int(lines[0].split()[1]), json.loads(body[:length])


def test_no_token_is_refused_before_the_body_is_read(server):
    status, body = unfinished_chunked(server.url, "POST", "/jobs", {}, 4 * BODY_LIMIT)
    assert status == 401 and body["error"] == "AuthenticationError" and "bearer token" in body["detail"]


def test_a_chunked_body_over_the_limit_is_refused_as_it_arrives(server):
    auth = {"Authorization": f"Bearer {server.tokens['alice']}"}
    for method, path in (("POST", "/jobs"), ("POST", "/keysets"), ("POST", "/datasets")):
        status, body = unfinished_chunked(server.url, method, path, auth, BODY_LIMIT + 8192)
        assert status == 413 and body["error"] == "BodyTooLargeError", (path, body)
        assert str(BODY_LIMIT) in body["detail"]


# (surrounding whitespace is not part of a header's value: HTTP strips it before the app sees it)
@pytest.mark.parametrize("value", [
    "Bearer  {t}", "Bearer\t{t}", "Basic {t}", "Bearer", "Bearer {t} extra", "Bearer {t},", "Bearer {t}=x",
    "Bearer ={t}", "Token {t}", "{t}",
])
def test_malformed_authorization_is_refused(server, value):
    with httpx.Client(base_url=server.url) as http:
        answer = http.get("/keysets", headers={"Authorization": value.format(t=server.tokens["alice"])})
    assert answer.status_code == 401 and answer.json()["error"] == "AuthenticationError"
    assert answer.headers["www-authenticate"].startswith("Bearer")


def test_authorization_scheme_is_case_insensitive_and_one_header_only(server):
    token = server.tokens["alice"]
    with httpx.Client(base_url=server.url) as http:
        for scheme in ("Bearer", "bearer", "BEARER"):  # RFC 7235: the scheme is case-insensitive
            assert http.get("/keysets", headers={"Authorization": f"{scheme} {token}"}).status_code == 200
        twice = [("Authorization", f"Bearer {token}"), ("Authorization", f"Bearer {token}")]
        answer = http.get("/keysets", headers=twice)
    assert answer.status_code == 401 and "2 Authorization headers" in answer.json()["detail"]


def test_tokens_expire(server, tmp_path, capsys):
    short = create_token(server.service.db, "carol", ttl_s=0.05)
    lasting = create_token(server.service.db, "carol", ttl_s=3600)
    time.sleep(0.1)
    with httpx.Client(base_url=server.url) as http:
        answer = http.get("/keysets", headers={"Authorization": f"Bearer {short}"})
        assert answer.status_code == 401 and "expired at" in answer.json()["detail"]
        assert http.get("/keysets", headers={"Authorization": f"Bearer {lasting}"}).status_code == 200
    # the admin command line: --ttl
    data = ["--data-dir", str(tmp_path)]
    assert main(["create-token", "dave", "--ttl", "3600", *data]) == 0
    token = capsys.readouterr().out.strip()
    assert main(["create-token", "dave", "--ttl", "-1", *data]) == 1
    db = Database(tmp_path / "server.sqlite3")
    try:
        assert tenant_for_token(db, token).name == "dave"
        expires = db.one("SELECT expires - created AS ttl FROM tokens")["ttl"]
        assert expires == pytest.approx(3600)
        db.execute("UPDATE tokens SET expires = created")
        with pytest.raises(AuthenticationError, match="expired"):
            tenant_for_token(db, token)
    finally:
        db.close()


def test_every_error_has_one_shape(server):
    admin = {"Authorization": f"Bearer {server.tokens['admin']}"}
    with httpx.Client(base_url=server.url) as http:
        answers = [
            http.get("/no-such-route"),                                        # the router's 404
            http.post("/health"),                                              # 405
            http.post("/jobs", content=b"{", headers={**admin, "Content-Type": "application/json"}),  # bad JSON
            http.post("/jobs", content=b"\xff\xfe", headers={**admin, "Content-Type": "application/json"}),  # not UTF-8
            http.post("/jobs", json={"config": 1}, headers=admin),            # validation
            http.get("/jobs/checkpoints", headers=admin),                     # not found
            http.post("/models", json={"name": "m", "params": {}, "model_b64": "\u00e9\u00e9\u00e9\u00e9"},
                      headers=admin),                                         # D7: non-ASCII base64
        ]
    statuses = [a.status_code for a in answers]
    assert statuses == [404, 405, 422, 422, 422, 404, 400], statuses
    for answer in answers:
        body = answer.json()
        assert set(body) == {"error", "detail"} and isinstance(body["detail"], str), body
    assert answers[-1].json()["error"] == "BadRequestError" and "base64" in answers[-1].json()["detail"]


def test_openapi_declares_every_error_with_the_error_schema(server):
    spec = httpx.get(f"{server.url}/openapi.json").json()
    assert "HTTPValidationError" not in spec["components"]["schemas"]
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            errors = {code: r for code, r in operation["responses"].items() if not code.startswith("2")}
            assert {"413", "422"} <= set(errors) or path in ("/health", "/limits"), (method, path)
            if path not in ("/health", "/limits"):
                assert "401" in errors, (method, path)
            for code, response in errors.items():
                schema = response["content"]["application/json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (method, path, code)


def test_text_that_is_no_unicode_is_a_4xx(server):
    """JSON may carry a lone surrogate ("\\ud800"), which no UTF-8 text holds: as a job's key-set id it
    reached SQLite (UnicodeEncodeError, a 500). Ids are the server's own: letters, digits, _ and -."""
    admin = {"Authorization": f"Bearer {server.tokens['admin']}", "Content-Type": "application/json"}
    body = '{"config": {}, "keyset": "\\ud800", "dataset": "da_x"}'  # json.dumps would not write it
    with httpx.Client(base_url=server.url) as http:
        answer = http.post("/jobs", content=body.encode(), headers=admin)
    assert answer.status_code == 422 and "keyset" in answer.json()["detail"], answer.text
