"""ckks.Evaluator.mul_relin and inner_product with the tensor product inside the key switch (where the plan's
KernelPlan.tensor_in_inner_product: switching.relinearize_product) give the ciphertexts of the tensor product +
relinearize path bit for bit, with the same level, scale and errors: on the CPU in every composition of the key
switch, and on CUDA for every plan."""
import numpy as np
import pytest
import torch

from fhe_core import ckks, ops, rlwe
from fhe_core.errors import ScaleOverflowError
from fhe_core.params import preset
from fhe_core.rlwe import switching
from fhe_reference import fresh_rng
from plan_cases import KERNEL_PLANS, REFERENCE


def _seed(label: str) -> bytes:
    return label.encode().ljust(32, b"\0")  # a fixed seed: tests only


def _evaluator(device: str, plan=None) -> tuple[ckks.Evaluator, rlwe.SecretKey]:
    """The same keys on either device (fixed seeds); ``plan``: the evaluator's (default: resolved)."""
    params = preset("N12QP483L6D3Insecure", device=device, allow_insecure=True)  # alpha 3: digits 3, 3, 1
    ctx = ckks.rlwe_context(params)
    sk = rlwe.gen_secret_key(ctx, seed=_seed("tensor-fusion/sk"))
    keys = rlwe.gen_eval_keys(ctx, sk, ckks.galois_elements(params.n, [1, 2]), seed=_seed("tensor-fusion/evk"))
    return ckks.Evaluator(params, keys, plan=plan), sk


def _world():
    ev, sk = _evaluator("cpu")
    encoder, encryptor = ckks.Encoder(ev.params), ckks.Encryptor(ev.params, sk)
    rng, _ = fresh_rng()  # fresh slots every run (the seed is printed); the keys are fixed for both devices
    z = rng.uniform(-1, 1, ev.params.slots) + 1j * rng.uniform(-1, 1, ev.params.slots)
    a = encryptor.encrypt(encoder.encode(z))
    b = encryptor.encrypt(encoder.encode(z[::-1].copy(), level=4))  # a lower level: the product runs at 4
    return ev, a, b, ckks.Decryptor(ev.params, sk), encoder, z


def _extreme(ev, ct):
    """ct with q_i - 1 in every word (the tensor terms' largest products)."""
    q = torch.tensor(ev.params.q_primes[:ct.level + 1], dtype=torch.int64, device=ct.data.device) - 1
    return ct.replace(data=q.view(1, -1, 1).expand_as(ct.data).contiguous())


def _products(ev, a, b):
    """At level 4 (2 digits: 3, 2 primes), the top level 6 (3 digits: 3, 3, 1) and q - 1 operands."""
    top = _extreme(ev, a)
    return [ev.mul_relin(a, b), ev.mul_relin(b, b), ev.inner_product(a, b, 4), ev.mul_relin(a, a),
            ev.mul_relin(top, top), ev.mul_relin(_extreme(ev, b), b)]


def _same(got, expected, label):
    for i, (x, y) in enumerate(zip(got, expected)):
        assert (x.level, x.scale, x.slots) == (y.level, y.scale, y.slots), (label, i)
        assert torch.equal(x.data.cpu(), y.data.cpu()), (label, i)


def test_mul_relin_is_bit_identical_in_every_composition_on_cpu():
    ev, a, b, decryptor, encoder, z = _world()
    expected = _products(ev, a, b)
    assert expected[0].level == 4 and expected[0].scale == a.scale * b.scale
    w = z[::-1]
    assert np.max(np.abs(encoder.decode(decryptor.decrypt(ev.rescale(expected[0]))) - z * w)) < 2.0 ** -15
    fused = _evaluator("cpu", REFERENCE.replace(mod_up_in_one_launch=True, inner_product_in_mod_up=True))[0]
    _same(_products(fused, a, b), expected, "one-launch ModUp, the inner product's op")
    square = fused.mul_relin(b, b)
    fourth = fused.mul_relin(square, square)
    with pytest.raises(ScaleOverflowError, match=r"^mul_relin: the result's scale"):
        fused.mul_relin(fourth, fourth)


@pytest.mark.parametrize("level", [6, 4])
def test_tensor_terms_times_p_before_mod_down_on_cpu(level):
    """The fused path's algebra with the CPU's ops: (P mod q_i) t_c added to the Q rows of the inner product's
    output, then the plain ModDown == ModDown, then t_c added, bit for bit (ModDown's Conv reads only the P rows:
    (x + P t - Conv) P^-1 = (x - Conv) P^-1 + t mod q_i)."""
    ev, a, b, *_ = _world()
    ctx = ev.context
    t = ctx.tables(level)
    source = a if a.level == level else b
    assert source.level == level
    x_data, y_data = source.data.contiguous(), _extreme(ev, source).data
    d2 = ops.mul(x_data[1], y_data[1], t.q.moduli)
    key = ev._relin_key("test")
    inner = switching.mod_up_inner_product(ctx, d2, key, level)
    terms = ops.tensor_product(x_data, y_data, t.q.moduli)[:2].contiguous()
    expected = ops.add(switching.mod_down(ctx, inner, level), terms, t.q.moduli)
    scaled = ops.mul_const(terms, ctx.p_mod_q[:level + 1], ctx.p_mod_q_shoup[:level + 1], t.q.moduli)
    shifted = inner.clone()
    shifted[:, ctx.alpha:] = ops.add(inner[:, ctx.alpha:].contiguous(), scaled, t.q.moduli)
    assert not torch.equal(shifted, inner)
    assert torch.equal(switching.mod_down(ctx, shifted, level), expected)


@pytest.mark.gpu
def test_fused_mul_relin_on_cuda_every_plan():
    """Every plan on CUDA == the CPU, bit for bit: the tuned ones put the tensor terms into the fused inner product
    (at N = 2^12 the resolved plan would not fuse it: these plans ask for it), the reference takes the tensor
    product's pass."""
    ev, a, b, *_ = _world()
    expected = _products(ev, a, b)
    a_gpu, b_gpu = a.replace(data=a.data.cuda()), b.replace(data=b.data.cuda())
    assert not _evaluator("cuda")[0].plan.inner_product_in_mod_up  # (N = 2^12 is below the resolved plan's floor)
    for name, plan in KERNEL_PLANS.items():
        ev_gpu = _evaluator("cuda", plan)[0]
        assert ev_gpu.plan.tensor_in_inner_product(3) == plan.tuned_ntt
        _same(_products(ev_gpu, a_gpu, b_gpu), expected, name)
