"""Key-set uploads through a real uvicorn server and the real client: parts, resume, status,
deduplication, tenant isolation, and every bad upload refused with a specific 4xx and nothing
kept (tiny insecure BFV keys)."""
from __future__ import annotations

import hashlib
import json
import threading
import time

import httpx
import numpy as np
import pytest
import torch

from conftest import tiny_settings
from fhe_core import bfv, rlwe
from fhe_core.errors import SecurityError
from fhe_core.params import preset
from fhe_core.serialize import dumps, dumps_many
from server.client import APIError, Manifest
from server.service import Service
from server.uploads import Upload

BFV_SMALL = "BFVN10QP205L2D3T17Insecure"
OTHER = "N10QP241L3D4Insecure"  # a CKKS set: other parameters


def fixed_seed(label: str) -> bytes:
    return label.encode().ljust(32, b"\0")[:32]


@pytest.fixture(scope="module")
def bfv_keys():
    """A BFV secret key (stays here) and its evaluation keys (relin + two rotations)."""
    ctx = bfv.BFVContext(preset(BFV_SMALL, allow_insecure=True))
    sk = rlwe.gen_secret_key(ctx.rlwe, seed=fixed_seed("keysets/sk"))
    keys = rlwe.gen_eval_keys(ctx.rlwe, sk, bfv.galois_elements(ctx.n, (1, 2)), seed=fixed_seed("keysets/evk"))
    return ctx.params, sk, keys


def state_snapshot(live_server) -> tuple:
    """What must not change after a refused upload: rows and stored files."""
    db = live_server.service.db
    rows = tuple(tuple(sorted(r.items())) for r in db.query("SELECT * FROM uploads ORDER BY id"))
    files = tuple(sorted(str(p.relative_to(live_server.settings.data_dir))
                         for p in live_server.settings.blob_dir.rglob("*") if p.is_file()))
    return rows, files


def raw(live_server, tenant="alice") -> httpx.Client:
    return httpx.Client(base_url=live_server.url, headers={"Authorization": f"Bearer {live_server.tokens[tenant]}"})


def declare(http: httpx.Client, blob: bytes, params, part_bytes: int, **override) -> dict:
    manifest = Manifest.of(blob, part_bytes)
    body = {"params": params.literal.to_dict(), "parts": manifest.parts, "sha256": manifest.sha256,
            "size": manifest.size}
    body.update(override)
    response = http.post("/keysets", json=body)
    assert response.status_code == 201, response.text
    return response.json()


def test_register_in_parts_then_status_lists_the_keys(live_server, bfv_keys):
    params, _, keys = bfv_keys
    with live_server.client(part_bytes=100_000) as api:
        keyset = api.register_keys(keys, params)
        status = api.keyset_status(keyset)
    blob = dumps(keys, packed=True)  # what register_keys sends
    assert status["state"] == "ready" and status["missing_parts"] == []
    assert status["parts"] == -(-len(blob) // 100_000) > 1
    assert status["sha256"] == hashlib.sha256(blob).hexdigest()
    assert status["info"] == {"relin": True, "galois_elements": sorted(keys.galois_elements), "public_key": False}
    stored = live_server.service.blobs.path(status["sha256"]).read_bytes()
    assert stored == blob  # content-addressed: the file is the verified bytes


def test_interrupted_upload_resumes_with_only_missing_parts(live_server, bfv_keys):
    params, _, keys = bfv_keys
    blob = dumps(keys)  # other bytes (unpacked) than the other tests' uploads
    part = 64_000
    with raw(live_server) as http:
        status = declare(http, blob, params, part)
        n_parts = status["parts"]
        for n in (0, 2):  # some parts arrive, then the connection "drops"
            response = http.put(f"/keysets/{status['id']}/parts/{n}", content=blob[n * part:(n + 1) * part])
            assert response.status_code == 200
        # a part cut short mid-way is not kept
        response = http.put(f"/keysets/{status['id']}/parts/1", content=blob[part:part + 1000])
        assert response.status_code == 400 and "truncated" in response.json()["detail"]
        missing = http.get(f"/keysets/{status['id']}").json()["missing_parts"]
        assert missing == [n for n in range(n_parts) if n not in (0, 2)]
        # completing early names the missing parts
        response = http.post(f"/keysets/{status['id']}/complete")
        assert response.status_code == 409 and "missing" in response.json()["detail"]
    sent = []
    with live_server.client(part_bytes=part) as api:
        original = api._put_part
        api._put_part = lambda url, data: (sent.append(int(url.rsplit("/", 1)[1])), original(url, data))
        keyset = api.register_keys(keys, params, packed=False)
    assert keyset == status["id"] and sorted(sent) == missing  # parts go up from several threads
    assert live_server.client().keyset_status(keyset)["state"] == "ready"


def test_same_keys_are_stored_once_and_ready_at_once_for_their_tenant(live_server, bfv_keys):
    params, _, keys = bfv_keys
    with live_server.client("alice") as alice, live_server.client("bob") as bob:
        first = alice.keyset_status(alice.register_keys(keys, params))
        sent = []
        put = alice._put_part
        alice._put_part = lambda url, data: sent.append(url)
        again = alice.keyset_status(alice.register_keys(keys, params))
        assert again["state"] == "ready" and sent == []  # nothing sent: alice's own content is known
        alice._put_part = put
        bob_sent = []
        bob_put = bob._put_part
        bob._put_part = lambda url, data: (bob_sent.append(url), bob_put(url, data))
        other = bob.keyset_status(bob.register_keys(keys, params))
    # bob learns nothing of alice's upload: he sends every part, then shares the one stored file
    assert other["state"] == "ready" and len(bob_sent) == other["parts"] > 0
    assert len({first["id"], again["id"], other["id"]}) == 3 and other["sha256"] == first["sha256"]
    assert len(list(live_server.settings.blob_dir.rglob(first["sha256"]))) == 1


def test_another_tenant_gets_404(live_server, bfv_keys):
    params, _, keys = bfv_keys
    with live_server.client("alice") as alice, live_server.client("bob") as bob:
        keyset = alice.register_keys(keys, params)
        for call in (lambda: bob.keyset_status(keyset), lambda: bob.delete_keyset(keyset)):
            with pytest.raises(APIError) as err:
                call()
            assert err.value.status == 404
        assert keyset not in [k["id"] for k in bob._json("GET", "/keysets")]
        assert alice.keyset_status(keyset)["state"] == "ready"


def test_missing_or_unknown_token_is_401(live_server):
    assert httpx.get(f"{live_server.url}/keysets").status_code == 401
    response = httpx.get(f"{live_server.url}/keysets", headers={"Authorization": "Bearer fhe_nope"})
    assert response.status_code == 401 and response.json()["error"] == "AuthenticationError"


def _refused(live_server, blob: bytes, params, part: int, expected_status: int, expected_error: str,
             *, tamper_part: bytes | None = None, manifest_override: dict | None = None, at: str = "part") -> dict:
    """Send ``blob`` as a key set (declared at creation, then parts, then completion) and check
    it is refused with ``expected_status``/``expected_error`` and that no row or file remains."""
    before = state_snapshot(live_server)
    manifest = Manifest.of(blob, part)
    body = {"params": params.literal.to_dict(), "parts": manifest.parts, "sha256": manifest.sha256,
            "size": manifest.size, **(manifest_override or {})}
    with raw(live_server) as http:
        response = http.post("/keysets", json=body)
        if at != "create":
            assert response.status_code == 201, response.text
            keyset = response.json()["id"]
            for n in range(len(manifest.parts)):
                data = tamper_part if (n == 0 and tamper_part is not None) else blob[n * part:(n + 1) * part]
                response = http.put(f"/keysets/{keyset}/parts/{n}", content=data)
                if response.status_code != 200:
                    break
            else:
                response = http.post(f"/keysets/{keyset}/complete")
            if response.status_code != 422 or expected_error != "HashMismatchError" or "part" not in response.text:
                assert http.get(f"/keysets/{keyset}").status_code == 404  # the refused upload is gone
            else:
                http.delete(f"/keysets/{keyset}")  # a bad part is dropped; the client may re-send it or give up
    assert response.status_code == expected_status, response.text
    assert response.json()["error"] == expected_error, response.json()
    assert state_snapshot(live_server) == before  # nothing stored
    return response.json()


def test_secret_key_is_refused_before_anything_is_stored(live_server, bfv_keys):
    params, sk, _ = bfv_keys
    body = _refused(live_server, dumps(sk), params, 1 << 20, 422, "UnprocessableError")
    assert "SECRET KEY" in body["detail"]


def test_keys_of_other_parameters_are_refused(live_server, bfv_keys):
    params, _, keys = bfv_keys
    other = preset(OTHER, allow_insecure=True)
    body = _refused(live_server, dumps(keys), other, 1 << 20, 422, "UnprocessableError")
    assert "params_id" in body["detail"]


def test_garbage_is_refused(live_server, bfv_keys):
    params, _, _ = bfv_keys
    garbage = np.random.default_rng(1).bytes(5000)
    body = _refused(live_server, garbage, params, 4096, 422, "UnprocessableError")
    assert "magic" in body["detail"]


def test_corrupted_record_is_refused_at_completion(live_server, bfv_keys):
    params, _, keys = bfv_keys
    blob = bytearray(dumps(keys, compress=False))
    blob[len(blob) // 2] ^= 0x40  # hashes declared for the corrupted bytes: only the record checksum catches it
    _refused(live_server, bytes(blob), params, 200_000, 400, "ChecksumError")
    truncated = dumps(keys, compress=False)[:-8]
    _refused(live_server, truncated, params, 200_000, 400, "TruncatedError")


def test_a_residue_out_of_range_is_refused_at_completion(live_server, bfv_keys):
    """Checksums intact (the member's and the set's re-sealed), one b residue >= its prime:
    registration checks every residue's range although it builds no key."""
    params, _, keys = bfv_keys
    blob = dumps(keys)  # 64-bit words: the payload's first word is the first member's first residue
    members = json.loads(blob[88:88 + int.from_bytes(blob[12:16], "little")])["records"]
    start = 88 + int.from_bytes(blob[12:16], "little")
    member = bytearray(blob[start:start + members[0]["length"]])
    first_word = 88 + int.from_bytes(member[12:16], "little")
    member[first_word:first_word + 8] = b"\xff" * 8
    _seal(member)
    bad = bytearray(blob[:start] + bytes(member) + blob[start + len(member):])
    _seal(bad)
    body = _refused(live_server, bytes(bad), params, 200_000, 400, "ResidueRangeError")
    assert "residue" in body["detail"]


def _seal(record: bytearray) -> None:
    """Re-seal a record's BLAKE2b checksum (the documented coverage: all bytes but [56, 88))."""
    h = hashlib.blake2b(digest_size=32, person=b"fhe_core.serial1")
    h.update(record[:56])
    h.update(record[88:])
    record[56:88] = h.digest()


def _fresh_keys(params, label: str) -> rlwe.EvalKeySet:
    """Keys no earlier test registered (so no upload of the same bytes is ready at once)."""
    ctx = bfv.BFVContext(params)
    sk = rlwe.gen_secret_key(ctx.rlwe, seed=fixed_seed(f"{label}/sk"))
    return rlwe.gen_eval_keys(ctx.rlwe, sk, bfv.galois_elements(ctx.n, (1,)), seed=fixed_seed(f"{label}/evk"))


def test_a_full_disk_at_completion_answers_507_and_keeps_the_parts(live_server, bfv_keys, monkeypatch):
    """The server's disk fills up while it completes an upload (here: the sync of the joined file):
    507 with a message saying what to do, the upload back to "uploading" with every part, and the
    same completion succeeds once there is room; nothing to send again. Another I/O error is a 500,
    answered on the same connection (it used to be reset)."""
    import errno
    import os

    import server.uploads

    params = bfv_keys[0]
    blob = dumps(_fresh_keys(params, "keysets/full-disk"))
    part = 64_000
    with raw(live_server) as http:
        status = declare(http, blob, params, part)
        for n in range(status["parts"]):
            response = http.put(f"/keysets/{status['id']}/parts/{n}", content=blob[n * part:(n + 1) * part])
            assert response.status_code == 200

        def failing(code):
            def fsync_path(path):
                raise OSError(code, os.strerror(code), str(path))
            return fsync_path

        with monkeypatch.context() as patch:
            patch.setattr(server.uploads, "fsync_path", failing(errno.EIO))  # another I/O error: a plain 500
            response = http.post(f"/keysets/{status['id']}/complete")  # on the same kept-alive connection
            assert response.status_code == 500 and response.json()["error"] == "InternalServerError"
            patch.setattr(server.uploads, "fsync_path", failing(errno.ENOSPC))
            response = http.post(f"/keysets/{status['id']}/complete")
        assert response.status_code == 507, response.text
        assert response.json()["error"] == "InsufficientStorage" and "complete it again" in response.json()["detail"]
        after = http.get(f"/keysets/{status['id']}").json()
        assert after["state"] == "uploading" and after["missing_parts"] == []
        response = http.post(f"/keysets/{status['id']}/complete")
        assert response.status_code == 200, response.text
        assert http.get(f"/keysets/{status['id']}").json()["state"] == "ready"


def test_registration_builds_no_key_and_the_first_use_loads_the_same_keys(live_server, bfv_keys, monkeypatch):
    params = bfv_keys[0]
    keys = _fresh_keys(params, "keysets/lazy")
    service = live_server.service
    monkeypatch.setattr(service, "warms_verified_keys", False)  # no background load: see what completion did
    with live_server.client(part_bytes=100_000) as api:
        upload = _keyset_upload(service, api.register_keys(keys, params))
    assert upload.state == "ready" and upload.sha256 not in service.keysets  # verified, nothing built
    _, loaded = service.keyset(upload)
    assert upload.sha256 in service.keysets
    for k in keys.galois_elements:  # the seeded halves expanded at use equal the generated ones
        assert torch.equal(loaded.galois_key(k, "test").data, keys.galois_key(k, "test").data)
    assert torch.equal(loaded.relin_key("test").data, keys.relin_key("test").data)


def test_a_registered_key_set_loads_in_the_background(live_server, bfv_keys):
    params = bfv_keys[0]
    keys = _fresh_keys(params, "keysets/warm")
    service = live_server.service
    with live_server.client(part_bytes=100_000) as api:
        upload = _keyset_upload(service, api.register_keys(keys, params))
    deadline = time.monotonic() + 60
    while upload.sha256 not in service.keysets and time.monotonic() < deadline:
        time.sleep(0.05)
    assert upload.sha256 in service.keysets
    _, loaded = service.keyset(upload)
    assert torch.equal(loaded.relin_key("test").data, keys.relin_key("test").data)


def _keyset_upload(service, keyset_id: str) -> Upload:
    row = service.db.one("SELECT tenant_id FROM uploads WHERE id = ?", (keyset_id,))
    return service.uploads.get(row["tenant_id"], "keyset", keyset_id)


def test_part_not_matching_its_hash_is_refused_and_not_kept(live_server, bfv_keys):
    params, _, keys = bfv_keys
    blob = dumps(keys, compress=False)
    wrong = bytearray(blob[:200_000])
    wrong[100] ^= 1
    body = _refused(live_server, blob, params, 200_000, 422, "HashMismatchError", tamper_part=bytes(wrong))
    assert "part 0" in body["detail"]


def test_whole_not_matching_the_declared_hash_is_refused(live_server, bfv_keys):
    params, _, keys = bfv_keys
    blob = dumps(keys, compress=False)
    _refused(live_server, blob, params, 200_000, 422, "HashMismatchError",
             manifest_override={"sha256": hashlib.sha256(b"something else").hexdigest()})


def test_limits_and_bad_manifests(live_server, bfv_keys, tmp_path):
    params, _, keys = bfv_keys
    blob = dumps(keys)
    limit = live_server.settings.max_part_bytes
    cases = [  # (manifest override, part size, status, error)
        ({}, limit + 1, 413, "PayloadTooLargeError"),                     # a part above the part limit
        ({"size": 1 << 40}, 1 << 20, 413, "PayloadTooLargeError"),        # the whole above the upload limit
        ({"size": len(blob) + 1}, 1 << 20, 400, "BadRequestError"),       # parts do not add up
        ({"sha256": "xyz"}, 1 << 20, 422, "RequestValidationError"),      # not a digest
        ({"params": {"log_n": 10}}, 1 << 20, 422, "ParameterError"),      # incomplete parameters
    ]
    for override, part, status, error in cases:
        if part > limit:
            manifest = Manifest.of(blob + bytes(part), part)
            override = {"parts": manifest.parts, "sha256": manifest.sha256, "size": manifest.size}
        _refused(live_server, blob, params, part, status, error, manifest_override=override, at="create")
    strict = Service(tiny_settings(tmp_path / "strict", allow_insecure=False))
    try:  # insecure sets are accepted only because the test server allows them
        with pytest.raises(SecurityError):
            strict.params(params.literal.to_dict())
    finally:
        strict.close()


def test_a_key_set_carries_the_public_key_after_the_evaluation_keys_and_nothing_else(live_server, bfv_keys):
    """Tree models flood their answers with the client's public key: it travels as a second record."""
    params, sk, keys = bfv_keys
    pk = rlwe.gen_public_key(bfv.BFVContext(params).rlwe, sk, seed=fixed_seed("keysets/pk"))
    with live_server.client() as api:
        status = api.keyset_status(api.register_keys(keys, params, public_key=pk))
        assert status["info"]["public_key"] is True
        assert status["sha256"] == hashlib.sha256(dumps_many([keys, pk], packed=True)).hexdigest()  # as sent
        service = live_server.service
        upload = Upload.from_row(service.db.one("SELECT * FROM uploads WHERE id = ?", (status["id"],)))
        assert service.public_key(upload).data.equal(pk.data)
        for blob, status_code in ((dumps_many([pk, keys]), 422), (dumps_many([keys, keys]), 400),
                                  (dumps_many([keys, pk, pk]), 413)):
            http = raw(live_server)
            upload = declare(http, blob, params, len(blob))
            put = http.put(f"/keysets/{upload['id']}/parts/0", content=blob)  # a public key first: refused here
            response = put if put.status_code != 200 else http.post(f"/keysets/{upload['id']}/complete")
            assert response.status_code == status_code and response.json()["detail"], response.text
            after = http.get(f"/keysets/{upload['id']}")
            assert after.status_code == 404 or after.json()["state"] != "ready"  # refused: never ready
        with pytest.raises(TypeError):
            api.register_keys(keys, params, public_key=sk)


def test_register_from_a_key_file_and_the_client_never_sends_a_secret_key(live_server, bfv_keys, tmp_path):
    from fhe_core.errors import WrongKindError
    from fhe_core.serialize import dump, dump_eval_keys

    params, sk, keys = bfv_keys
    path = tmp_path / "keys.fhe"
    members = [keys.relin_key("test")] + [keys.galois_key(k, "test") for k in sorted(keys.galois_elements)]
    dump_eval_keys(iter(members), path, params, packed=True)  # written key by key, as for multi-GB sets
    with live_server.client(part_bytes=50_000) as api:
        status = api.keyset_status(api.register_keys(path, params))
        assert status["state"] == "ready" and status["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
        assert status["info"]["galois_elements"] == sorted(keys.galois_elements)
        before = state_snapshot(live_server)
        secret = tmp_path / "secret.fhe"
        dump(sk, secret)
        with pytest.raises(WrongKindError):
            api.register_keys(secret, params)
        with pytest.raises(TypeError):
            api.register_keys(sk, params)
        assert state_snapshot(live_server) == before


class FlakyTransport(httpx.HTTPTransport):
    """Drops the connection on the first attempt of every part upload (a flaky network)."""

    def __init__(self):
        super().__init__()
        self.dropped: list[str] = []

    def handle_request(self, request):
        if request.method == "PUT" and request.url.path not in self.dropped:
            self.dropped.append(request.url.path)
            raise httpx.ConnectError("connection dropped (test)", request=request)
        return super().handle_request(request)


def test_client_retries_dropped_part_uploads(live_server, bfv_keys):
    params, _, _ = bfv_keys
    ctx = bfv.BFVContext(params)
    sk = rlwe.gen_secret_key(ctx.rlwe, seed=fixed_seed("keysets/flaky"))
    keys = rlwe.gen_eval_keys(ctx.rlwe, sk, bfv.galois_elements(ctx.n, (3,)), seed=fixed_seed("keysets/flaky-evk"))
    transport = FlakyTransport()
    with live_server.client(part_bytes=100_000, transport=transport) as api:
        status = api.keyset_status(api.register_keys(keys, params))
    assert status["state"] == "ready" and len(transport.dropped) == status["parts"] > 1


class MeetingTransport(httpx.HTTPTransport):
    """Holds the first two part uploads until both are in flight: a client that sends parts one
    at a time never gets past the first (the barrier times out)."""

    def __init__(self):
        super().__init__()
        self.meeting = threading.Barrier(2, timeout=30)
        self.puts: list[int] = []  # each part's declared length
        self.lock = threading.Lock()

    def handle_request(self, request):
        if request.method == "PUT":
            with self.lock:
                self.puts.append(int(request.headers["content-length"]))
                first_two = len(self.puts) <= 2
            if first_two:
                self.meeting.wait()
        return super().handle_request(request)


def test_parts_go_up_in_parallel_and_arrive_whole(live_server, bfv_keys):
    params, _, keys = bfv_keys
    blob = dumps(keys, packed=True)
    transport = MeetingTransport()
    with live_server.client(part_bytes=60_000, parallel_parts=4, transport=transport) as api:
        status = api.keyset_status(api.register_keys(keys, params))
    assert status["state"] == "ready" and len(transport.puts) == status["parts"] > 2
    assert sum(transport.puts) == len(blob)  # every part once
    assert live_server.service.blobs.path(status["sha256"]).read_bytes() == blob


def test_openapi_docs_are_served(live_server):
    assert httpx.get(f"{live_server.url}/docs").status_code == 200
    paths = httpx.get(f"{live_server.url}/openapi.json").json()["paths"]
    assert {"/keysets/{keyset_id}/parts/{n}", "/predictions", "/jobs/{job_id}/result"} <= set(paths)
