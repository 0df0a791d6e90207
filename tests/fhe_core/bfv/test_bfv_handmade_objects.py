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


def test_inputs_checked_together_with_one_pass_name_the_bad_one_and_are_marked():
    """rlwe.checks.check_canonical_all (a server's inputs, one device sync for all): a residue out of range in any
    of them is a ResidueError naming its index; good inputs come out marked, and marked ones are not read again."""
    from fhe_core.rlwe.checks import check_canonical_all, is_marked_canonical

    params = preset("BFVN10QP205L2D3T17Insecure", allow_insecure=True)
    ctx = bfv.BFVContext(params)
    sk = rlwe.gen_secret_key(ctx.rlwe)
    encryptor, encoder = bfv.Encryptor(ctx, sk), bfv.BatchEncoder(ctx)
    fresh = [encryptor.encrypt(encoder.encode(np.arange(params.n) % (i + 2))) for i in range(4)]
    inputs = [dataclasses.replace(ct, data=ct.data.clone()) for ct in fresh]  # (unmarked copies)
    low = bfv.Evaluator(ctx).mod_switch_to_next(fresh[0])
    for ct, index, value in ((inputs[3], (0, 2, 7), params.q_primes[2]), (low, (1, 0, 0), -1)):
        batch = inputs[:2] + [_with_residue(ct, value, index)]
        with pytest.raises(ResidueError, match=r"^serve: input 2 has a residue outside \[0, q_"):
            check_canonical_all(ctx.rlwe, batch, "serve")
    check_canonical_all(ctx.rlwe, inputs + [low], "serve")
    assert all(is_marked_canonical(ct) for ct in inputs + [low])
    inputs[1].data[0, 0, 0] = -5  # edited in place after its check: objects are immutable, it is not read again
    check_canonical_all(ctx.rlwe, inputs, "serve")
