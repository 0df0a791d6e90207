"""Objects built or edited by hand cannot slip wrong residues or labels into an evaluation: the
CKKS evaluator checks params_id, shapes and, once per object, that every residue is
canonical; decryption always checks the residues. Each operation checks its operands once."""
import collections
import dataclasses

import numpy as np
import pytest
import torch

from fhe_core import ckks, rlwe
from fhe_core.errors import LevelMismatchError, ParameterError, ParamsMismatchError, ResidueError
from fhe_core.params import Params, preset
from fhe_core.rlwe import checks


@pytest.fixture(scope="module")
def world():
    params = preset("N10QP241L3D4Insecure", allow_insecure=True)
    ctx = ckks.rlwe_context(params)
    sk = rlwe.gen_secret_key(ctx)
    encoder = ckks.Encoder(params)
    z = np.linspace(-1, 1, params.slots)
    ct = ckks.Encryptor(params, sk).encrypt(encoder.encode(z))
    galois = ckks.galois_elements(params.n, [1])
    ev = ckks.Evaluator(params, rlwe.gen_eval_keys(ctx, sk, galois))
    return params, sk, ev, ct, z


def _with_residue(ct, value, index=(0, 2, 5)):
    data = ct.data.clone()
    data[index] = value
    return dataclasses.replace(ct, data=data)


def test_residues_out_of_range_are_refused_by_the_evaluator_and_the_decryptor(world):
    params, sk, ev, ct, z = world
    for value in (params.q_primes[2], params.q_primes[2] + 5, -1):
        bad = _with_residue(ct, value)
        calls = {"add": lambda c: ev.add(ct, c), "mul_relin": lambda c: ev.mul_relin(c, ct),
                 "rotate": lambda c: ev.rotate(c, 1), "rescale": ev.rescale}
        for op, call in calls.items():
            with pytest.raises(ResidueError, match=rf"^{op}: the ciphertext has a residue outside \[0, q_2\) "
                                                   r"at index \[0, 2, 5\]"):
                call(bad)
        with pytest.raises(ResidueError, match="^decrypt: "):
            ckks.Decryptor(params, sk).decrypt(bad)


def test_a_hand_built_plaintext_is_checked_too(world):
    params, sk, ev, ct, z = world
    pt = ckks.Encoder(params).encode(z)
    data = pt.data.clone()
    data[1, 7] = params.q_primes[1]
    bad = dataclasses.replace(pt, data=data)
    with pytest.raises(ResidueError, match=r"^mul: the plaintext has a residue outside \[0, q_1\)"):
        ev.mul(ct, bad)
    with pytest.raises(ResidueError, match="^encrypt_sk: the message"):
        ckks.Encryptor(params, sk).encrypt(bad)


def test_a_relabelled_ciphertext_is_refused(world):
    params, sk, ev, ct, z = world
    other = Params.from_literal(dataclasses.replace(params.literal, log_q=[60, 45, 45, 45]), allow_insecure=True)
    relabelled = dataclasses.replace(ct, params_id=other.params_id)
    with pytest.raises(ParamsMismatchError, match="^add: the ciphertext belongs to params"):
        ev.add(relabelled, ct)
    # relabelled into parameters of the same shape with smaller primes: the residues give it away
    # (into larger primes nothing in the data could tell; the params_id is a label, not a proof)
    other_ct = ckks.Encryptor(other, rlwe.gen_secret_key(ckks.rlwe_context(other))).encrypt(
        ckks.Encoder(other).encode(z))
    into_smaller = dataclasses.replace(other_ct, params_id=params.params_id)
    with pytest.raises(ResidueError, match="^add: "):
        ev.add(into_smaller, ct)


def test_shapes_that_do_not_fit_the_parameters_are_refused(world):
    params, sk, ev, ct, z = world
    with pytest.raises(LevelMismatchError):
        dataclasses.replace(ct, level=2)  # 4 limbs claimed at level 2: refused at construction
    with pytest.raises(ParameterError, match="^add: the ciphertext data must have shape"):
        ev.add(dataclasses.replace(ct, data=ct.data[:, :, :512].contiguous(), slots=256), ct)
    with pytest.raises(ParameterError, match="^negate: the ciphertext data must be an int64 tensor"):
        ev.negate(_float_copy(ct))


def _float_copy(ct):
    """ct with float64 data, past the constructor's own dtype check (as a buggy caller could)."""
    fake = object.__new__(type(ct))
    for field in dataclasses.fields(ct):
        object.__setattr__(fake, field.name, getattr(ct, field.name))
    object.__setattr__(fake, "data", ct.data.to(torch.float64))
    return fake


def test_each_operation_checks_each_operand_once(world, monkeypatch):
    """mul_relin used to validate the same ciphertext five times on its way down; now the
    evaluator's entry checks each operand once and the key switch below checks nothing."""
    params, sk, ev, ct, z = world
    calls = collections.Counter()

    def counting(module, name):
        original, label = getattr(module, name), f"{module.__name__.rsplit('.', 1)[-1]}.{name}"

        def wrapper(*args, **kwargs):
            calls[label] += 1
            return original(*args, **kwargs)
        monkeypatch.setattr(module, name, wrapper)

    from fhe_core.ckks import evaluator
    from fhe_core.rlwe import keyswitch
    for module, name in [(evaluator, "check_ciphertext"), (evaluator, "check_switching_key"),
                         (checks, "check_residues"), (keyswitch, "check_ciphertext"), (keyswitch, "check_tensor"),
                         (keyswitch, "check_switching_key")]:
        counting(module, name)
    a, b = ev.rotate(ct, 1), ev.add(ct, ct)  # results of the evaluator: canonical, marked
    calls.clear()
    ev.mul_relin(a, b)
    assert calls == collections.Counter({
        "evaluator.check_ciphertext": 2, "evaluator.check_switching_key": 1, "checks.check_residues": 0,
        "keyswitch.check_ciphertext": 0, "keyswitch.check_tensor": 0, "keyswitch.check_switching_key": 0})
    hand_built = dataclasses.replace(a, data=a.data.clone())
    ev.mul_relin(hand_built, b)
    ev.mul_relin(hand_built, b)
    assert calls["checks.check_residues"] == 1  # once for the new object, then marked


@pytest.mark.gpu
def test_cuda_graph_capture_skips_the_residue_check():
    """While a CUDA graph is captured the kernels are only recorded (nothing to check, and a sync
    is not allowed): an unmarked operand passes the capture, is not marked by it, and is still
    checked when used eagerly."""
    params = preset("N10QP241L3D4Insecure", allow_insecure=True, device="cuda")
    sk = rlwe.gen_secret_key(ckks.rlwe_context(params))
    encoder, ev = ckks.Encoder(params), ckks.Evaluator(params)
    z = np.linspace(-1, 1, params.slots)
    ct = ckks.Encryptor(params, sk).encrypt(encoder.encode(z))
    ev.add(ct, ct)  # warm-up outside the capture
    unmarked = dataclasses.replace(ct, data=ct.data.clone())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = ev.add(unmarked, ct)
    graph.replay()
    torch.cuda.synchronize()
    assert np.max(np.abs(encoder.decode(ckks.Decryptor(params, sk).decrypt(out)).real - 2 * z)) < 2.0 ** -25
    assert not checks.is_marked_canonical(unmarked)
    unmarked.data[0, 1, 2] = params.q_primes[1]
    with pytest.raises(ResidueError, match="^add: "):
        ev.add(unmarked, ct)


def test_a_strided_view_as_ciphertext_data_rotates_like_its_copy(world):
    """Ciphertext data may be a strided view (the first limbs of a larger ciphertext, built by hand);
    rotations gave a raw RuntimeError from the automorphism kernel, which wants contiguous rows."""
    params, sk, ev, ct, z = world
    view = dataclasses.replace(ct, data=ct.data[:, :2], level=1)
    copy = dataclasses.replace(ct, data=ct.data[:, :2].contiguous(), level=1)
    assert not view.data.is_contiguous()
    assert torch.equal(ev.rotate(view, 1).data, ev.rotate(copy, 1).data)
    assert torch.equal(ev.rotate_hoisted(view, [1])[1].data, ev.rotate_hoisted(copy, [1])[1].data)
    decrypted = ckks.Encoder(params).decode(ckks.Decryptor(params, sk).decrypt(ev.rotate(view, 1))).real
    assert np.max(np.abs(decrypted - np.roll(z, -1))) < 2.0 ** -20


def test_a_strided_degree_2_view_relinearizes_like_its_copy(world):
    """The same for relinearization, whose addend (d0, d1) goes to kernels that want it contiguous."""
    params, sk, ev, ct, z = world
    product = ev.tensor(ct, ct)
    view = dataclasses.replace(product, data=product.data[:, :2], level=1)
    copy = dataclasses.replace(product, data=product.data[:, :2].contiguous(), level=1)
    assert torch.equal(ev.relinearize(view).data, ev.relinearize(copy).data)
