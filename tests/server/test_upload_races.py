"""The upload state machine under concurrent requests (real HTTP to a real uvicorn server,
threads): concurrent completes, a delete while a part arrives or while the upload completes,
"ready at once" against a concurrent delete, and the shortcut's manifest checks. Each test
uses key-set bytes of its own (the module shares one server per store: SQLite, PostgreSQL)."""
from __future__ import annotations

import hashlib
import threading
import time

import pytest

from conftest import STORES
from server.client import Manifest
from upload_helpers import (
    PART, PausedBody, declare, http_client, keyset_bytes, manifest_body, part_of, put_in_background, send_parts,
    upload, wait_until,
)

pytestmark = pytest.mark.parametrize("live_server", STORES, indirect=True, scope="module")


def alice(live_server):
    return http_client(live_server.url, live_server.tokens["alice"])


def files_of(live_server, upload_id: str) -> list[str]:
    """Every file or folder of the data directory whose path names the upload (parts, temporary files)."""
    return [str(p) for p in live_server.settings.data_dir.rglob("*") if upload_id in str(p)]


def post(live_server, url: str, **kwargs):
    with alice(live_server) as http:
        return http.post(url, **kwargs)


def in_background(call) -> tuple[threading.Thread, dict]:
    """``call()`` in a started thread; the dict gets its ``answer``."""
    result: dict = {}
    thread = threading.Thread(target=lambda: result.update(answer=call()))
    thread.start()
    return thread, result


def all_parts_sent(live_server, label: str) -> tuple[bytes, dict]:
    """A declared key set with every part stored: its bytes and status."""
    params, blob = keyset_bytes(label)
    with alice(live_server) as http:
        status = declare(http, blob, params)
        send_parts(http, status["id"], blob, status["missing_parts"])
    return blob, status


def concurrently(live_server, n: int, send) -> list:
    """``send(http)`` from ``n`` threads released together, each on its own connection."""
    barrier, answers = threading.Barrier(n), [None] * n

    def run(i: int) -> None:
        with alice(live_server) as http:
            barrier.wait()
            answers[i] = send(http)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return answers


def test_concurrent_completes_all_answer_ready_and_keep_the_upload(live_server):
    part = 4096  # many small parts: joining them takes a while, so the completes overlap
    for trial in range(3):
        params, blob = keyset_bytes(f"races/complete/{trial}")
        with alice(live_server) as http:
            status = declare(http, blob, params, part)
            send_parts(http, status["id"], blob, status["missing_parts"], part)
        url = f"/keysets/{status['id']}/complete"
        answers = concurrently(live_server, 10, lambda http, url=url: http.post(url))
        assert [a.status_code for a in answers] == [200] * 10, [a.text for a in answers if a.status_code != 200]
        assert {a.json()["state"] for a in answers} == {"ready"}
        with alice(live_server) as http:
            assert http.get(f"/keysets/{status['id']}").json()["state"] == "ready"
        assert live_server.service.blobs.path(status["sha256"]).read_bytes() == blob


def test_delete_while_a_part_arrives_answers_404_and_leaves_nothing(live_server):
    params, blob = keyset_bytes("races/delete-during-part")
    token = live_server.tokens["alice"]
    with alice(live_server) as http:
        status = declare(http, blob, params)
        keyset = status["id"]
        body = PausedBody(part_of(blob, 1))
        thread, result = put_in_background(live_server.url, token, f"/keysets/{keyset}/parts/1", body)
        wait_until(lambda: any(live_server.settings.tmp_dir.glob(f"{keyset}-1-*")))  # the server is reading it
        deleted = http.delete(f"/keysets/{keyset}")
        body.go_on.set()
        thread.join(30)
        assert deleted.status_code == 204, deleted.text
        answer = result["response"]
        assert answer.status_code == 404 and answer.json()["error"] == "NotFoundError", answer.text
        assert http.get(f"/keysets/{keyset}").status_code == 404
    assert files_of(live_server, keyset) == []


def slow_verification(monkeypatch, service):
    """Key-set verification waits (``entered`` set) until the test sets ``release``."""
    entered, release = threading.Event(), threading.Event()
    original = service.verify_keyset

    def paused(path, params):
        entered.set()
        assert release.wait(30)
        return original(path, params)

    monkeypatch.setattr(service, "verify_keyset", paused)
    return entered, release


def test_delete_during_complete_is_a_conflict_and_the_completion_stands(live_server, monkeypatch):
    blob, status = all_parts_sent(live_server, "races/delete-during-complete")
    entered, release = slow_verification(monkeypatch, live_server.service)
    with alice(live_server) as http:
        completing, result = in_background(lambda: post(live_server, f"/keysets/{status['id']}/complete"))
        try:
            assert entered.wait(30)
            deleted = http.delete(f"/keysets/{status['id']}")
        finally:
            release.set()
            completing.join(30)
        assert deleted.status_code == 409 and "being completed" in deleted.json()["detail"], deleted.text
        assert result["answer"].status_code == 200 and result["answer"].json()["state"] == "ready"
        blob_path = live_server.service.blobs.path(status["sha256"])
        assert blob_path.read_bytes() == blob
        assert http.delete(f"/keysets/{status['id']}").status_code == 204  # once ready it can go
    assert not blob_path.exists() and files_of(live_server, status["id"]) == []  # no row names the blob


def test_a_second_complete_waits_for_the_first(live_server, monkeypatch):
    blob, status = all_parts_sent(live_server, "races/second-complete")
    entered, release = slow_verification(monkeypatch, live_server.service)
    url = f"/keysets/{status['id']}/complete"
    first, answers = in_background(lambda: post(live_server, url))
    assert entered.wait(30)
    second, again = in_background(lambda: post(live_server, url))
    time.sleep(0.2)  # the second complete reaches the server while the first verifies
    try:
        with alice(live_server) as http:  # meanwhile the status says what happens, and no part is taken
            seen = http.get(f"/keysets/{status['id']}").json()
            refused = http.put(f"/keysets/{status['id']}/parts/0", content=part_of(blob, 0))
    finally:
        release.set()
        first.join(30)
        second.join(30)
    assert seen["state"] == "completing" and seen["missing_parts"] == []
    assert refused.status_code == 409 and "being completed" in refused.json()["detail"], refused.text
    assert answers["answer"].status_code == again["answer"].status_code == 200
    assert answers["answer"].json() == again["answer"].json() and again["answer"].json()["state"] == "ready"


def test_ready_at_once_holds_the_blob_against_a_concurrent_delete(live_server, monkeypatch):
    """The shortcut checks the stored blob, then names it: a delete of the last other row naming
    it must not fall in between (the check is paused there for half a second)."""
    params, blob = keyset_bytes("races/ready-at-once")
    store = live_server.service.blobs
    with alice(live_server) as http:
        first = upload(http, blob, params)
        checked, deleted = threading.Event(), threading.Event()
        exists = store.exists

        def exists_then_pause(sha256: str) -> bool:
            found = exists(sha256)
            if not checked.is_set():
                checked.set()
                deleted.wait(0.5)  # a delete that can run now would remove the blob under the new row
            return found

        monkeypatch.setattr(store, "exists", exists_then_pause)
        again, result = in_background(lambda: post(live_server, "/keysets", json=manifest_body(blob, params)))
        assert checked.wait(30)
        assert http.delete(f"/keysets/{first['id']}").status_code == 204
        deleted.set()
        again.join(30)
        answer = result["answer"]
        assert answer.status_code == 201 and answer.json()["state"] == "ready", answer.text
        assert hashlib.sha256(store.path(first["sha256"]).read_bytes()).hexdigest() == first["sha256"]
        assert http.delete(f"/keysets/{answer.json()['id']}").status_code == 204
    assert not store.path(first["sha256"]).exists()  # the last row naming it is gone, and so is the blob


def test_ready_at_once_needs_the_same_size_and_parts(live_server):
    params, blob = keyset_bytes("races/manifest")
    with alice(live_server) as http:
        first = upload(http, blob, params)
        longer = Manifest.of(blob + b"\0", PART)  # the verified hash with another size and other parts
        refused = http.post("/keysets", json={"params": params.literal.to_dict(), "parts": longer.parts,
                                              "sha256": first["sha256"], "size": longer.size})
        assert refused.status_code == 422, refused.text
        assert f"{len(blob)} bytes" in refused.json()["detail"]
        resplit = declare(http, blob, params, PART // 2)  # the same content cut otherwise: parts are checked
        assert resplit["state"] == "uploading" and resplit["missing_parts"] == list(range(resplit["parts"]))
        send_parts(http, resplit["id"], blob, resplit["missing_parts"], PART // 2)
        assert http.post(f"/keysets/{resplit['id']}/complete").json()["state"] == "ready"
        same = declare(http, blob, params)  # the very manifest: ready at once
        assert same["state"] == "ready" and same["size"] == len(blob) and same["parts"] == first["parts"]
