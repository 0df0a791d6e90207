"""Unfinished uploads across restarts: verified parts survive a SIGTERM and a kill -9 of a real
``python -m server serve`` (only unverified temporary files go) and the client resumes with
just the missing parts; an administration command run against a live data directory clears
nothing; one server per data directory; a completion cut off by a crash is undone at start."""
from __future__ import annotations

import asyncio
import os

import pytest

from conftest import drop_handoff, free_port, make_tokens, start_subprocess_server, tiny_settings
from fhe_core.serialize import dumps
from server.__main__ import main
from server.client import Manifest, ServiceClient
from server.embedded import background_server
from server.service import Service
from server.tenants import create_token, tenant_for_token
from server.uploads import PartSpec
from upload_helpers import (
    PART, PausedBody, declare, http_client, keyset, keyset_bytes, part_of, put_in_background, send_parts,
    wait_until,
)
from xgb_helpers import PRESET, forest


def missing(http, keyset_id: str) -> list[int]:
    response = http.get(f"/keysets/{keyset_id}")
    assert response.status_code == 200, response.text
    return response.json()["missing_parts"]


def receiving(settings, keyset_id: str, n: int):
    """True once the server has opened the temporary file of part ``n`` (it is reading the body)."""
    return lambda: any(settings.tmp_dir.glob(f"{keyset_id}-{n}-*"))


def test_restart_keeps_verified_parts_and_the_client_sends_only_the_missing(tmp_path):
    settings = tiny_settings(tmp_path / "data")
    tokens = make_tokens(settings)
    params, keys = keyset("restart/resume")
    blob = dumps(keys, packed=True)  # what register_keys sends
    port, log = free_port(), tmp_path / "server.log"
    url = f"http://127.0.0.1:{port}"
    proc = start_subprocess_server(settings.data_dir, port, log)
    try:
        with http_client(url, tokens["alice"]) as http:
            status = declare(http, blob, params)
            keyset_id, everything = status["id"], set(range(status["parts"]))
            send_parts(http, keyset_id, blob, [0, 1, 4])
        proc.terminate()  # SIGTERM: a graceful stop
        proc.wait(30)

        proc = start_subprocess_server(settings.data_dir, port, log)
        with http_client(url, tokens["alice"]) as http:
            assert missing(http, keyset_id) == sorted(everything - {0, 1, 4})
            send_parts(http, keyset_id, blob, [2])
        body = PausedBody(part_of(blob, 3))
        thread, result = put_in_background(url, tokens["alice"], f"/keysets/{keyset_id}/parts/3", body)
        wait_until(receiving(settings, keyset_id, 3))
        proc.kill()  # kill -9 while part 3's body arrives: its temporary file stays behind
        proc.wait(10)
        body.go_on.set()
        thread.join(30)
        assert "error" in result  # the connection dropped

        proc = start_subprocess_server(settings.data_dir, port, log)
        assert list(settings.tmp_dir.iterdir()) == []  # unverified: cleared at start
        expected = sorted(everything - {0, 1, 2, 4})
        with http_client(url, tokens["alice"]) as http:
            assert missing(http, keyset_id) == expected
        sent = []
        with ServiceClient(url, tokens["alice"], part_bytes=PART, progress=False) as api:
            put = api._put_part
            api._put_part = lambda part_url, data: (sent.append(int(part_url.rsplit("/", 1)[1])), put(part_url, data))
            assert api.register_keys(keys, params) == keyset_id
            assert api.keyset_status(keyset_id)["state"] == "ready"
        assert sent == expected
        assert settings.blob_dir.joinpath(status["sha256"][:2], status["sha256"]).read_bytes() == blob
    finally:
        proc.kill()
        proc.wait(10)
        drop_handoff(settings)


def test_an_admin_command_on_a_live_data_directory_clears_nothing(tmp_path):
    settings = tiny_settings(tmp_path / "data")
    tokens = make_tokens(settings)
    params, blob = keyset_bytes("restart/admin-command")
    model = tmp_path / "forest.bin"
    model.write_bytes(forest().to_bytes())
    with background_server(settings) as server, http_client(server.url, tokens["alice"]) as http:
        status = declare(http, blob, params)
        send_parts(http, status["id"], blob, [0, 1])
        body = PausedBody(part_of(blob, 2))
        thread, result = put_in_background(server.url, tokens["alice"], f"/keysets/{status['id']}/parts/2", body)
        try:
            wait_until(receiving(settings, status["id"], 2))
            assert main(["add-model", "toy", "--model", str(model), "--preset", PRESET, "--allow-insecure",
                         "--data-dir", str(settings.data_dir)]) == 0
        finally:
            body.go_on.set()
            thread.join(30)
        answer = result["response"]
        assert answer.status_code == 200 and answer.json()["stored"], answer.text  # its temporary file was left alone
        assert missing(http, status["id"]) == list(range(3, status["parts"]))
        assert http.get("/models/toy").status_code == 200  # and the command did its work


def test_one_server_per_data_directory(tmp_path):
    settings = tiny_settings(tmp_path / "data")
    first = Service(settings, owner=True)
    try:
        with pytest.raises(RuntimeError, match=f"pid {os.getpid()}"):
            Service(settings, owner=True)
        Service(settings).close()  # an administration command's service owns nothing: it may open it
    finally:
        first.close()
    Service(settings, owner=True).close()  # the lock went with the first


async def _body(data: bytes):
    yield data


def test_start_undoes_a_completion_cut_off_by_a_crash(tmp_path):
    settings = tiny_settings(tmp_path / "data")
    params, blob = keyset_bytes("restart/completing")
    manifest = Manifest.of(blob, PART)
    service = Service(settings, owner=True)
    try:
        tenant = tenant_for_token(service.db, create_token(service.db, "alice"))
        upload = service.uploads.create(tenant.id, "keyset", service.params(params.literal.to_dict()),
                                        [PartSpec(p["sha256"], p["size"]) for p in manifest.parts],
                                        manifest.sha256, manifest.size)
        for n in range(len(manifest.parts)):
            asyncio.run(service.uploads.receive_part(upload, n, _body(part_of(blob, n))))
        # what a kill -9 during the join leaves: the claim, a half-joined file, and a stale part folder
        service.db.execute("UPDATE uploads SET state = 'completing' WHERE id = ?", (upload.id,))
        (settings.tmp_dir / f"{upload.id}-whole-x.tmp").write_bytes(blob[:1000])
        (settings.parts_dir / "ke_gone").mkdir()
        (settings.parts_dir / "ke_gone" / "0").write_bytes(b"part of an upload deleted before the crash")
    finally:
        service.close()
    service = Service(settings, owner=True)
    try:
        upload = service.uploads.get(tenant.id, "keyset", upload.id)
        assert upload.state == "uploading" and service.uploads.missing_parts(upload) == []
        assert list(settings.tmp_dir.iterdir()) == [] and [p.name for p in settings.parts_dir.iterdir()] == [upload.id]
        done = service.uploads.complete(upload, params, service.verify_keyset)
        assert done.state == "ready" and service.blobs.path(done.sha256).read_bytes() == blob
        assert list(settings.parts_dir.iterdir()) == []
    finally:
        service.close()
