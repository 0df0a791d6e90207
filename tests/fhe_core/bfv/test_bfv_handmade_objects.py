"""BFV objects built or edited by hand cannot slip wrong residues into an evaluation: the
evaluator checks once per object that every residue is canonical, decryption always does, and
plaintext coefficients must be below t."""
import dataclasses

import numpy as np
import pytest

from fhe_core import bfv, rlwe
from fhe_core.errors import ResidueError
from fhe_core.params import preset


def _with_residue(ct, value, index):
    data = ct.data.clone()
    data[index] = value
    return dataclasses.replace(ct, data=data)


def test_bfv_evaluator_checks_residues_once_per_object():
    params = preset("BFVN10QP205L2D3T17Insecure", allow_insecure=True)
    ctx = bfv.BFVContext(params)
    sk = rlwe.gen_secret_key(ctx.rlwe)
    encoder = bfv.BatchEncoder(ctx)
    ct = bfv.Encryptor(ctx, sk).encrypt(encoder.encode(np.arange(params.n) % 7))
    ev = bfv.Evaluator(ctx)
    bad = _with_residue(ct, params.q_primes[1] + 1, (1, 1, 3))
    with pytest.raises(ResidueError, match=r"^add: the ciphertext has a residue outside \[0, q_1\)"):
        ev.add(ct, bad)
    with pytest.raises(ResidueError, match="^decrypt: "):
        bfv.Decryptor(ctx, sk).decrypt(bad)
    total = ev.add(ct, ct)
    assert np.array_equal(encoder.decode(bfv.Decryptor(ctx, sk).decrypt(total)), 2 * (np.arange(params.n) % 7))


def test_bfv_plaintext_coefficients_must_be_below_t():
    params = preset("BFVN10QP205L2D3T17Insecure", allow_insecure=True)
    ctx = bfv.BFVContext(params)
    sk = rlwe.gen_secret_key(ctx.rlwe)
    pt = bfv.BatchEncoder(ctx).encode(np.arange(params.n) % 5)
    ct = bfv.Encryptor(ctx, sk).encrypt(pt)
    for value in (ctx.t, -3):
        data = pt.data.clone()
        data[9] = value
        bad = dataclasses.replace(pt, data=data)
        with pytest.raises(ResidueError, match=rf"^multiply_plain: the plaintext has a coefficient outside \[0, "
                                               rf"t = {ctx.t}\) at index 9"):
            bfv.Evaluator(ctx).multiply_plain(ct, bad)
        with pytest.raises(ResidueError, match="^encrypt: the plaintext"):
            bfv.Encryptor(ctx, sk).encrypt(bad)
