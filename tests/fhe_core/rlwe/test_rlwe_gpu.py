"""CPU and CUDA give bit-identical keys and ciphertexts for the same fixed seeds (tests only).

The CUDA runs carry the ``gpu`` marker (skipped without a device); the CPU-only case checks the
same pipeline is reproducible, so the body itself is exercised everywhere.
"""
import pytest
import torch

from fhe_core import ops, rlwe
from rlwe_helpers import SHAPES, context, encode, fixed_seed


def _pipeline(shape, device: str, key_switching: str = "hybrid") -> dict[str, torch.Tensor]:
    """Keys, an encryption and every key-switching path at two levels, all from fixed seeds (linear: its keys in
    their preprocessed form, the key switch, relinearization, rotations, conjugation, hoisted rotations)."""
    ctx = context(shape, device, key_switching=key_switching)
    n = ctx.n
    sk = rlwe.gen_secret_key(ctx, seed=fixed_seed("gpu/sk"))
    pk = rlwe.gen_public_key(ctx, sk, seed=fixed_seed("gpu/pk"))
    elements = [rlwe.galois_element_for_rotation(r, n) for r in (1, 3)] + [rlwe.galois_element_for_conjugation(n)]
    keys = rlwe.gen_eval_keys(ctx, sk, elements, seed=fixed_seed("gpu/evk"))
    out = {"sk": sk.data, "pk": pk.data, "relin": keys.relin_key("t").data}
    for level in (ctx.max_level, 1):
        m = encode(ctx, [(7 * i) % 1001 - 500 for i in range(n)], level)
        ct = rlwe.encrypt_pk(ctx, pk, m, level, seed=fixed_seed(f"gpu/ct{level}"))
        q = ctx.q_at(level)
        out[f"enc/{level}"] = ct.data
        if key_switching == "hybrid":
            out[f"mod_up/{level}"] = rlwe.decompose_mod_up(ctx, ct.data[1], level)
        out[f"key_switch/{level}"] = rlwe.key_switch(ctx, ct.data[1], keys.relin_key("t"), level)
        (c0, c1) = ct.data
        d = torch.stack((ops.mul(c0, c0, q.moduli), ops.mul(ops.add(c0, c0, q.moduli), c1, q.moduli),
                         ops.mul(c1, c1, q.moduli)))
        out[f"relin/{level}"] = rlwe.relinearize(ctx, ct.replace(data=d), keys).data
        for k in elements:
            out[f"galois/{level}/{k}"] = rlwe.apply_galois(ctx, ct, k, keys).data
        for k, rotated in rlwe.apply_galois_hoisted(ctx, ct, elements, keys).items():
            out[f"hoisted/{level}/{k}"] = rotated.data
    return {name: t.cpu() for name, t in out.items()}


def _assert_identical(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name


@pytest.mark.parametrize("method", ["hybrid", "linear"])
@pytest.mark.parametrize("shape", SHAPES[:1], ids=lambda s: s.id)
def test_fixed_seed_pipeline_is_reproducible_on_cpu(shape, method):
    _assert_identical(_pipeline(shape, "cpu", method), _pipeline(shape, "cpu", method))


@pytest.mark.gpu
@pytest.mark.parametrize("method", ["hybrid", "linear"])  # linear: 3 aux primes in SHAPES[0], 2 in SHAPES[1]
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.id)
def test_cpu_and_cuda_key_switching_are_bit_identical(shape, method):
    _assert_identical(_pipeline(shape, "cpu", method), _pipeline(shape, "cuda", method))
