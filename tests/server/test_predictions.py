"""Encrypted XGBoost predictions through a real uvicorn server and the real client (tiny
insecure BFV): the encrypted scores equal the in-process evaluation bit for bit and the
plaintext twin exactly; models are admin-only; every bad prediction request gets a specific
4xx, the server stays up and its stored state is unchanged."""
from __future__ import annotations

import functools
import json

import httpx
import numpy as np
import pytest

from apps.xgboost.client import ForestClient
from apps.xgboost.plan import PublicModel
from apps.xgboost.server import ForestEvaluator
from apps.xgboost.twin import predict_forest
from fhe_core import bfv, ckks, rlwe
from fhe_core.params import preset
from fhe_core.serialize import dumps, dumps_many, loads_many, peek
from server.client import APIError
from fhe_reference import fresh_seed
from xgb_helpers import PRESET, forest, samples

MODEL = "toy"


@functools.cache
def params():
    return preset(PRESET, allow_insecure=True)


@pytest.fixture(scope="module")
def model(live_server) -> dict:
    with live_server.client("admin") as admin:
        return admin.add_model(MODEL, forest().to_bytes(), params())


@pytest.fixture(scope="module")
def alice_seed() -> bytes:
    """Alice's key and encryption seed, fresh from the OS for each run (printed for replay)."""
    return fresh_seed("server/xgb/alice")


@pytest.fixture(scope="module")
def alice(live_server, model, alice_seed):
    """Alice's ForestClient (secret key here), built from the model's public part, and her key set."""
    with live_server.client() as api:
        public = PublicModel.from_json(json.dumps(api.model(MODEL)["public"]))
        client = ForestClient(public, seed=alice_seed, allow_insecure=True)
        return client, api.register_keys(client.eval_keys(), client.params)


def snapshot(live_server) -> tuple:
    db = live_server.service.db
    tables = tuple(tuple(tuple(sorted(r.items())) for r in db.query(f"SELECT * FROM {t} ORDER BY 1"))
                   for t in ("uploads", "models", "jobs"))
    files = tuple(sorted(str(p) for p in live_server.settings.blob_dir.rglob("*") if p.is_file()))
    return tables, files


def test_the_client_counts_the_bytes_and_seconds_of_a_prediction(live_server, alice):
    """``api.traffic``: one request, exactly the batch sent and the answer received (switched down
    to a lower level: smaller than the batch), the server's own seconds from its Server-Timing
    header (below the call's), the client's serialization seconds."""
    client, keyset = alice
    x = samples(12, seed=3)
    cts = client.encrypt(x)
    body = dumps_many(cts, packed=True)
    with live_server.client() as api:
        before = api.traffic.snapshot()
        answers = api.predict(MODEL, keyset, cts, client.params)
        spent = api.traffic.since(before)
    assert all(ct.level < cts[0].level for ct in answers)
    np.testing.assert_array_equal(client.decrypt_scores(answers, len(x)),
                                  predict_forest(forest(), forest().binning.encode(x)).scores)
    assert (spent.requests, spent.sent, spent.received) == (1, len(body), len(dumps_many(answers, packed=True)))
    assert 0 < spent.server_seconds < spent.seconds and spent.serialize_seconds > 0
    assert before.requests == 0 and api.traffic == spent   # a fresh client: the totals are this call


def test_predictions_equal_the_local_evaluation_and_the_twin(live_server, alice):
    client, keyset = alice
    x = samples(50, seed=7)
    cts = client.encrypt(x)
    cache = live_server.service.keysets
    with live_server.client() as api:
        remote = api.predict(MODEL, keyset, cts, client.params)
        misses = cache.misses
        scores = api.predict_scores(MODEL, keyset, client, x)
    assert cache.misses == misses and cache.hits >= 1  # the second request found the keys loaded
    local = ForestEvaluator(client.params, client.eval_keys(), forest()).evaluate(cts)
    assert dumps_many(remote) == dumps_many(local)  # the same ciphertexts, bit for bit
    expected = predict_forest(forest(), forest().binning.encode(x)).scores
    np.testing.assert_array_equal(client.decrypt_scores(remote, len(x)), expected)
    np.testing.assert_array_equal(scores, expected)


def test_requests_travel_seeded_and_packed(live_server, alice):
    """What the client sends: fresh secret-key ciphertexts, each c_0 at its primes' widths and a
    32-byte seed (half the components, at most w/64 of each word for w-bit primes); what comes
    back: packed records. The
    server expands the seeds and answers exactly (the twin's scores)."""
    client, keyset = alice
    x = samples(8, seed=5)
    cts = client.encrypt(x)
    body = dumps_many(cts, packed=True)
    assert all(ct.uniform_seed is not None for ct in cts)
    widest = max(q.bit_length() for q in client.params.q_primes)
    assert len(body) < len(dumps_many(cts, compress=False)) * 0.5 * (widest + 1) / 64
    with live_server.client() as api:
        response = api._request("POST", "/predictions", params={"model": MODEL, "keyset": keyset}, content=body,
                                headers={"Content-Type": "application/octet-stream"})
    answer = response.content
    assert "bits" in peek(answer).metadata
    scores = loads_many(answer, client.params, expect=rlwe.Ciphertext)
    expected = predict_forest(forest(), forest().binning.encode(x)).scores
    np.testing.assert_array_equal(client.decrypt_scores(scores, len(x)), expected)


def test_model_admin_and_public_part(live_server, model):
    assert model["name"] == MODEL and model["params_id"] == params().params_id
    public = PublicModel.from_json(json.dumps(model["public"]))
    assert public.n_classes == forest().n_classes
    assert "leaves" not in json.dumps(model["public"]) and "feature" not in model["public"]  # no tree structure
    with live_server.client("alice") as api:
        assert [m["name"] for m in api.models()] == [MODEL]
        with pytest.raises(APIError) as err:
            api.add_model("mine", forest().to_bytes(), params())
        assert err.value.status == 403
    with live_server.client("admin") as admin:
        cases = [  # (name, model bytes, params, status, error)
            (MODEL, forest().to_bytes(), params(), 409, "ConflictError"),  # the name is in use
            ("junk", b"not a forest", params(), 422, "ModelFormatError"),
            ("ckks", forest().to_bytes(), preset("N10QP241L3D4Insecure", allow_insecure=True), 422, "PlanError"),
        ]
        for name, blob, prm, status, error in cases:
            with pytest.raises(APIError) as err:
                admin.add_model(name, blob, prm)
            assert (err.value.status, err.value.error) == (status, error), err.value
        assert [m["name"] for m in admin.models()] == [MODEL]


def test_key_status_names_the_keys_a_model_needs(live_server, alice, model):
    client, keyset = alice
    with live_server.client() as api:
        assert api.keyset_status(keyset, model=MODEL)["missing_keys"] == {"relin": False, "galois_elements": []}
        ctx = client.ctx.rlwe
        sk = rlwe.gen_secret_key(ctx, seed=fresh_seed("server/xgb/partial"))
        needed = sorted(PublicModel.from_json(json.dumps(model["public"])).galois_elements(client.params.n))
        partial = rlwe.gen_eval_keys(ctx, sk, needed[:2], seed=fresh_seed("server/xgb/partial-evk"))
        partial_id = api.register_keys(partial, client.params)
        missing = api.keyset_status(partial_id, model=MODEL)["missing_keys"]
        assert missing == {"relin": False, "galois_elements": needed[2:]}
        with pytest.raises(APIError) as err:
            api.predict(MODEL, partial_id, client.encrypt(samples(3, 1)), client.params)
        assert err.value.status == 422 and str(needed[2]) in err.value.detail


def test_bad_prediction_requests_get_specific_4xx_and_change_nothing(live_server, alice):
    client, keyset = alice
    good = dumps_many(client.encrypt(samples(5, seed=3)))
    other_params = preset("N10QP241L3D4Insecure", allow_insecure=True)
    ckks_ctx = ckks.rlwe_context(other_params)
    ckks_sk = rlwe.gen_secret_key(ckks_ctx, seed=fresh_seed("server/xgb/ckks"))
    foreign = dumps_many([ckks.Encryptor(other_params, ckks_sk).encrypt(
        ckks.Encoder(other_params).encode(np.ones(4)))])
    switch = bfv.Evaluator(client.ctx)
    low = dumps_many([switch.mod_switch_to_next(ct) for ct in client.encrypt(samples(5, seed=3))])
    limit = live_server.settings.max_body_bytes
    one = dumps(client.encrypt(samples(1, 2))[0])
    with live_server.client("bob") as bob_api:
        bob_keyset = bob_api.register_keys(client.eval_keys(), client.params)  # same bytes: deduplicated
    cases = [  # (description, query, body, status, error)
        ("garbage", {}, b"\x00" * 1000, 400, "BadMagicError"),
        ("empty", {}, b"", 400, "TruncatedError"),
        ("truncated", {}, good[:-100], 400, "TruncatedError"),
        ("flipped bit", {}, good[:200] + bytes([good[200] ^ 1]) + good[201:], 400, "ChecksumError"),
        ("other parameters", {}, foreign, 422, "SerializedParamsMismatchError"),
        ("too few ciphertexts", {}, dumps_many(client.encrypt(samples(5, seed=3))[:-1]), 422, "PlanError"),
        ("wrong level", {}, low, 422, "LevelMismatchError"),
        ("oversized body", {}, b"\x00" * (limit + 1), 413, "PayloadTooLargeError"),
        ("too many ciphertexts", {}, one * (live_server.settings.max_batch + 1), 413, "SizeLimitError"),
        ("unknown model", {"model": "nope"}, good, 404, "NotFoundError"),
        ("unknown key set", {"keyset": "ke_nope"}, good, 404, "NotFoundError"),
        ("another tenant's key set", {"keyset": bob_keyset}, good, 404, "NotFoundError"),
    ]
    before = snapshot(live_server)
    headers = {"Authorization": f"Bearer {live_server.tokens['alice']}", "Content-Type": "application/octet-stream"}
    with httpx.Client(base_url=live_server.url, headers=headers, timeout=120) as http:
        for description, query, body, status, error in cases:
            response = http.post("/predictions", params={"model": MODEL, "keyset": keyset, **query}, content=body)
            assert response.status_code == status, (description, response.text)
            detail = response.json()
            assert set(detail) == {"error", "detail"} and detail["detail"], description
            assert detail["error"] == error, (description, detail)
        assert http.get("/health").json()["status"] == "ok"  # still up
        assert http.post("/predictions", params={"model": MODEL, "keyset": keyset}, content=good).status_code == 200
    assert snapshot(live_server) == before


def test_client_command_line_predicts_the_twins_classes(live_server, model, tmp_path, capsys):
    from server.client_cli import main

    x = samples(20, seed=11)
    np.save(tmp_path / "x.npy", x)
    code = main(["--url", live_server.url, "--token", live_server.tokens["bob"], "--allow-insecure", "--quiet",
                 "predict", MODEL, "--x", str(tmp_path / "x.npy"), "--out", str(tmp_path / "scores.npy")])
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    twin = predict_forest(forest(), forest().binning.encode(x))
    assert printed["classes"] == twin.predicted.tolist()
    np.testing.assert_array_equal(np.load(tmp_path / "scores.npy"), twin.scores)


def test_concurrent_predictions_on_one_key_set_are_all_exact(live_server, alice):
    from concurrent.futures import ThreadPoolExecutor

    client, keyset = alice
    x = samples(8, seed=5)
    cts = client.encrypt(x)
    expected = dumps_many(ForestEvaluator(client.params, client.eval_keys(), forest()).evaluate(cts))

    def one(_):
        with live_server.client() as api:
            return dumps_many(api.predict(MODEL, keyset, cts, client.params))

    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(one, range(12)))
    assert all(answer == expected for answer in answers)


def test_a_prediction_over_the_request_timeout_is_408(live_server, alice):
    client, keyset = alice
    cts = client.encrypt(samples(4, seed=13))
    settings = live_server.settings
    saved = settings.request_timeout_s
    settings.request_timeout_s = 1e-4
    try:
        with live_server.client() as api:
            with pytest.raises(APIError) as err:
                api.predict(MODEL, keyset, cts, client.params)
    finally:
        settings.request_timeout_s = saved
    assert err.value.status == 408 and err.value.error == "RequestTimeoutError"
    with live_server.client() as api:  # the server goes on answering
        assert len(api.predict(MODEL, keyset, cts, client.params)) >= 1


def test_the_same_model_bytes_at_two_widths_get_their_own_evaluators(live_server, alice, alice_seed):
    """One key set, one model file registered twice (default width and width 4): each name is
    evaluated for the width its public part promised, exactly as the twin."""
    client, keyset = alice
    with live_server.client("admin") as admin:
        admin.add_model("toy-w4", forest().to_bytes(), params(), width=4)
    x = samples(4, seed=11)
    expected = predict_forest(forest(), forest().binning.encode(x)).scores
    with live_server.client() as api:
        narrow = ForestClient(PublicModel.from_json(json.dumps(api.model("toy-w4")["public"])),
                              seed=alice_seed, allow_insecure=True)
        assert narrow.layout.width == 4 != client.layout.width
        again = api.register_keys(narrow.eval_keys(), narrow.params)
        assert api.keyset_status(again)["sha256"] == api.keyset_status(keyset)["sha256"]  # the same keys
        for name, who in ((MODEL, client), ("toy-w4", narrow), (MODEL, client)):
            np.testing.assert_array_equal(api.predict_scores(name, keyset, who, x), expected)
