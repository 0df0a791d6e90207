"""Collectives on ciphertexts and plaintexts (fhe_core.distributed) on 2, 4 and (slow) 8 gloo processes (CPU),
and on 2 GPUs over NCCL (``gpu``).

Each world size spawns its ranks once (a few seconds) and runs every collective in them; the
tests then check what the ranks returned against references computed here: Python-integer sums
mod q of the residues every rank held (nothing from fhe_core.distributed builds an expected
value), and decryptions against the sums of the messages (BFV exactly mod t, CKKS to 2^-20).
The 61-bit parameters and a ciphertext of residues q - 1 give the largest words a sum can meet.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from fhe_core import bfv, ckks, distributed, rlwe
from fhe_core.errors import CollectiveError, FHEError, ParameterError
from fhe_core.params import Params, ParamsLiteral, preset

CKKS_61 = ParamsLiteral(log_n=10, log_q=[61, 60, 40], log_p=[61], log_default_scale=40)  # 61-bit q_0
BFV_PRESET = "BFVN10QP205L2D3T17Insecure"
SEED = b"fhe_core.distributed tests".ljust(32, b"\0")


def ckks_params(device="cpu") -> Params:
    return Params.from_literal(CKKS_61, allow_insecure=True).with_device(device)


def ckks_message(rank: int, slots: int) -> np.ndarray:
    return np.random.default_rng(rank).uniform(-1, 1, slots)


def bfv_message(rank: int, n: int, t: int) -> np.ndarray:
    return np.random.default_rng(100 + rank).integers(0, t, n)


def worst_case(params: Params, level: int, device) -> ckks.Ciphertext:
    """A ciphertext with every residue q_i - 1: the largest words an all-reduce can meet."""
    q = torch.tensor(params.q_primes[:level + 1], dtype=torch.int64, device=device).view(-1, 1)
    data = (q - 1).expand(level + 1, params.n).unsqueeze(0).repeat(2, 1, 1)
    return ckks.Ciphertext(data=data, level=level, params_id=params.params_id, scale=2.0 ** 40, slots=8)


def _cpu(obj):
    return obj.data.cpu().numpy()


def collectives_on_rank(rank: int, world: int, device: str) -> dict:
    """Every collective once; returns the inputs and outputs as numpy arrays (and the errors seen)."""
    if device == "cuda":
        device = f"cuda:{torch.cuda.current_device()}"
    params = ckks_params(device)
    ctx = ckks.rlwe_context(params)
    sk = rlwe.gen_secret_key(ctx, seed=SEED)  # one key for every rank: a test-only fixed seed
    encoder = ckks.Encoder(params)
    ct = ckks.Encryptor(params, sk).encrypt(encoder.encode(ckks_message(rank, 64), level=2, slots=64))
    pt = encoder.encode(ckks_message(rank, 64), level=1, slots=64)
    extreme = worst_case(params, 1, device)

    bfv_params = preset(BFV_PRESET, allow_insecure=True, device=device)
    bfv_ctx = bfv.BFVContext(bfv_params)
    bfv_sk = rlwe.gen_secret_key(bfv_ctx.rlwe, seed=SEED)
    bfv_encoder = bfv.BatchEncoder(bfv_ctx)
    bfv_pt = bfv_encoder.encode(bfv_message(rank, bfv_params.n, bfv_params.plaintext_modulus))
    bfv_ct = bfv.Encryptor(bfv_ctx, bfv_sk).encrypt(bfv_pt)

    out = {"inputs": [_cpu(o) for o in (ct, pt, extreme)], "bfv_inputs": [_cpu(bfv_ct), _cpu(bfv_pt)]}
    for method in ("sum", "gather"):
        sums = distributed.all_reduce_sum([ct, pt, extreme], params, method=method)
        out[method] = [_cpu(o) for o in sums]
        out[f"{method}_meta"] = [(type(o).__name__, o.level, o.scale, o.slots) for o in sums]
        out[f"{method}_decrypted"] = encoder.decode(ckks.Decryptor(params, sk).decrypt(sums[0])).real
        bfv_sums = distributed.all_reduce_sum([bfv_ct, bfv_pt], bfv_params, method=method)
        out[f"bfv_{method}"] = [_cpu(o) for o in bfv_sums]
        out[f"bfv_{method}_decrypted"] = bfv_encoder.decode(bfv.Decryptor(bfv_ctx, bfv_sk).decrypt(bfv_sums[0]))

    sent = distributed.broadcast(ct if rank == 0 else None, params)
    sent_pt = distributed.broadcast(bfv_pt if rank == world - 1 else None, bfv_params, src=world - 1)
    out["broadcast"] = (_cpu(sent), type(sent).__name__, sent.level, sent.scale, sent.slots, str(sent.device))
    out["broadcast_bfv"] = (_cpu(sent_pt), type(sent_pt).__name__)

    shard = [ct.replace(data=(ct.data + i) % 1000) for i in range(rank + 1)]  # r + 1 objects on rank r
    gathered = distributed.gather(shard, params, dst=world - 1)
    out["gathered"] = None if gathered is None else [_cpu(o) for o in gathered]
    out["shard"] = [_cpu(o) for o in shard]

    distributed.check_replicated([sent], params)  # identical replicas pass
    out["errors"] = []
    corrupt = ct.replace(data=ct.data + torch.tensor(params.q_primes[:3], device=device).view(-1, 1))  # >= q
    for label, call in (("replicas", lambda: distributed.check_replicated([ct], params)),
                        ("levels", lambda: distributed.all_reduce_sum([ct if rank else pt], params)),
                        ("counts", lambda: distributed.all_reduce_sum([ct] * (1 + (rank == 1)), params)),
                        ("corrupt", lambda: distributed.all_reduce_sum([corrupt if rank == 1 else ct], params)),
                        ("not residues", lambda: distributed.broadcast(ct.data if rank == 0 else None, params)),
                        ("other params", lambda: distributed.gather([bfv_pt] if rank == 1 else [ct], params)),
                        ("method", lambda: distributed.all_reduce_sum([ct], params, method="tree"))):
        try:
            call()
            out["errors"].append((label, None))
        except FHEError as exc:  # every rank raises: none waits in a collective
            out["errors"].append((label, f"{type(exc).__name__}: {exc}"))
    return out


def mod_sum(arrays: list[np.ndarray], moduli: list[int]) -> np.ndarray:
    """Python-integer sum mod q over the ranks (limb i of the second-to-last axis mod moduli[i])."""
    total = sum(a.astype(object) for a in arrays)
    q = np.array(moduli, dtype=object).reshape(-1, 1) if arrays[0].ndim > 1 else np.array(moduli, dtype=object)
    return (total % q).astype(np.int64)


@pytest.fixture(scope="module", params=[2, 4, pytest.param(8, marks=pytest.mark.slow)],
                ids=["2 ranks", "4 ranks", "8 ranks"])
def gloo_run(request):
    world = request.param
    return world, distributed.spawn(collectives_on_rank, world, "cpu", timeout_s=300)


def check_run(world: int, results: list[dict]) -> None:
    params, bfv_params = ckks_params(), preset(BFV_PRESET, allow_insecure=True)
    q = list(params.q_primes)
    expected = [mod_sum([r["inputs"][i] for r in results], q[:level + 1]) for i, level in enumerate((2, 1, 1))]
    bfv_expected = [mod_sum([r["bfv_inputs"][0] for r in results], list(bfv_params.q_primes)),
                    mod_sum([r["bfv_inputs"][1] for r in results], [bfv_params.plaintext_modulus])]
    messages = sum(ckks_message(rank, 64) for rank in range(world))
    bfv_messages = sum(bfv_message(rank, bfv_params.n, bfv_params.plaintext_modulus)
                       for rank in range(world)) % bfv_params.plaintext_modulus
    assert int(results[0]["inputs"][2].max()) == q[0] - 1 > 2 ** 60
    for r in results:
        for method in ("sum", "gather"):
            assert all(np.array_equal(a, b) for a, b in zip(r[method], expected)), method
            assert r[f"{method}_meta"][0] == ("Ciphertext", 2, 2.0 ** 40, 64)
            assert np.abs(r[f"{method}_decrypted"] - messages).max() < 2 ** -20
            assert all(np.array_equal(a, b) for a, b in zip(r[f"bfv_{method}"], bfv_expected))
            assert np.array_equal(r[f"bfv_{method}_decrypted"], bfv_messages)
        data, kind, level, scale, slots, device = r["broadcast"]
        assert np.array_equal(data, results[0]["inputs"][0]) and (kind, level, scale, slots) == (
            "Ciphertext", 2, 2.0 ** 40, 64) and device == "cpu"
        assert np.array_equal(r["broadcast_bfv"][0], results[-1]["bfv_inputs"][1])
        assert r["broadcast_bfv"][1] == "Plaintext"
    for rank, r in enumerate(results):
        errors = dict(r["errors"])
        assert errors["replicas"].startswith("CollectiveError") and "differ from rank 0" in errors["replicas"]
        assert "differ in kind, shape, level" in errors["levels"]
        assert "different numbers of objects [1, 2" in errors["counts"]
        assert errors["corrupt"] == ("ResidueError: all_reduce_sum: an object has residues outside [0, q) (hand-built "
                                     "or corrupted data)" if rank == 1 else
                                     "CollectiveError: all_reduce_sum: rank(s) [1] refused their inputs (their error "
                                     "says why)")
        assert errors["not residues"].startswith("ParameterError" if rank == 0 else "CollectiveError: broadcast: "
                                                 "rank(s) [0] refused")
        assert errors["other params"].startswith("ParamsMismatchError" if rank == 1 else "CollectiveError: gather")
        assert errors["method"].startswith("ParameterError: all_reduce_sum: method must be")
    shards = [s for r in results for s in r["shard"]]
    assert all(r["gathered"] is None for r in results[:-1])
    assert len(results[-1]["gathered"]) == world * (world + 1) // 2
    assert all(np.array_equal(a, b) for a, b in zip(results[-1]["gathered"], shards))


def test_collectives_on_gloo(gloo_run):
    world, results = gloo_run
    check_run(world, results)


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_collectives_on_nccl():
    results = distributed.spawn(collectives_on_rank, 2, "cuda", backend="nccl", timeout_s=300)
    assert all(r["broadcast"][5].startswith("cuda") for r in results)
    for r in results:
        r["broadcast"] = (*r["broadcast"][:5], "cpu")
    check_run(2, results)


def test_the_sum_bound():
    """k centred residues of q < 2^61 stay below 2^63 up to k = 8; past that the gather is taken."""
    q61 = 2 ** 61 - 1
    assert distributed.sum_method(8, q61) == "sum" and distributed.sum_method(9, q61) == "gather"
    assert distributed.sum_method(16, 2 ** 60 - 1) == "sum" and distributed.sum_method(17, 2 ** 60 - 1) == "gather"
    assert distributed.bytes_received("sum", 2, 1000) == 1000 == distributed.bytes_received("gather", 2, 1000)
    assert distributed.bytes_received("sum", 4, 1000) == 1500 and distributed.bytes_received("gather", 4, 1000) == 3000


def test_shard_range_splits_in_order():
    for count in (0, 1, 7, 8):
        for world in (1, 2, 3, 4):
            shares = [distributed.shard_range(count, r, world) for r in range(world)]
            assert [i for s in shares for i in s] == list(range(count))
            assert max(map(len, shares)) - min(map(len, shares)) <= 1
    with pytest.raises(ParameterError):
        distributed.shard_range(4, 2, 2)


def failing_rank(rank: int, world: int) -> int:
    if rank == 1:
        raise ValueError("rank 1 fails on purpose")
    return rank


def test_spawn_reports_a_failing_rank():
    with pytest.raises(CollectiveError, match="(?s)rank 1 raised.*on purpose"):
        distributed.spawn(failing_rank, 2, timeout_s=60)
