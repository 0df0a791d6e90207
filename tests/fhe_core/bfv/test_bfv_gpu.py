"""CPU and CUDA give bit-identical BFV keys and ciphertexts for the same fixed seeds (tests only).

The CUDA run carries the ``gpu`` marker (skipped without a device); the CPU-only case checks the
pipeline is reproducible, so the body is exercised everywhere.
"""
import numpy as np
import pytest
import torch

from bfv_helpers import METHODS, SMALL, TEST_PRESETS, fixed_seed, session


def _pipeline(name: str, device: str, method: str = "hybrid") -> dict[str, torch.Tensor]:
    """Fixed-seed keys and encryptions, then every evaluator operation, decrypted results too."""
    s = session(name, device, seed_label=f"bfv-gpu/{name}", key_switching=method)
    ev, enc = s.evaluator, s.encoder
    a = np.arange(s.n, dtype=np.int64) * 7919 % s.t
    b = (np.arange(s.n, dtype=np.int64) ** 2 + 3) % s.t
    pa, pb = enc.encode(a), enc.encode(b)
    ca = s.encryptor.encrypt(pa, seed=fixed_seed("ct/a"))
    cb = s.sk_encryptor.encrypt(pb, seed=fixed_seed("ct/b"))
    out = {"pt": pa.data, "enc_pk": ca.data, "enc_sk": cb.data, "relin_key": ev.keys.relin_key("test").data}
    product = ev.multiply(ca, cb)
    relin = ev.relinearize(product)
    out.update({
        "add": ev.add(ca, cb).data, "sub": ev.sub(ca, cb).data, "negate": ev.negate(ca).data,
        "add_plain": ev.add_plain(ca, pb).data, "multiply_plain": ev.multiply_plain(ca, pb).data,
        "multiply_scalar": ev.multiply_scalar(ca, -5).data, "multiply": product.data, "relin": relin.data,
        "rotate": ev.rotate_rows(relin, 3).data, "rotate_back": ev.rotate_rows(ca, -1).data,
        "swap": ev.swap_columns(ca).data, "hoisted": ev.rotate_rows_hoisted(ca, [1, -7])[-7].data,
        "mod_switch": ev.mod_switch_to_next(product).data,
        "decrypted": s.decryptor.decrypt(relin).data,
    })
    return {k: v.cpu() for k, v in out.items()}


def _assert_identical(x: dict, y: dict) -> None:
    assert x.keys() == y.keys()
    for name in x:
        assert torch.equal(x[name], y[name]), name


@pytest.mark.parametrize("method", METHODS)
def test_fixed_seed_pipeline_is_reproducible_on_cpu(method):
    _assert_identical(_pipeline(SMALL, "cpu", method), _pipeline(SMALL, "cpu", method))


@pytest.mark.gpu
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", TEST_PRESETS)
def test_cpu_and_cuda_bfv_ciphertexts_are_bit_identical(name, method):
    _assert_identical(_pipeline(name, "cpu", method), _pipeline(name, "cuda", method))
