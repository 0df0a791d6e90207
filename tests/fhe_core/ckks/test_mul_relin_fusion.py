"""ckks.Evaluator.mul_relin and inner_product with the tensor product inside the key switch (ops.kernel_variant
"tensor_fuse", keyswitch._relinearize_product) give the ciphertexts of the tensor product + relinearize path bit
for bit, with the same level, scale and errors: on the CPU with the fused composition forced (its ops run unfused
there) and on CUDA for every variant."""
import numpy as np
import pytest
import torch

from fhe_core import ckks, ops, rlwe
from fhe_core.ckks import evaluator as ckks_evaluator
from fhe_core.errors import ScaleOverflowError
from fhe_core.params import preset
from fhe_core.rlwe import keyswitch
from fhe_reference import fresh_rng


def _seed(label: str) -> bytes:
    return label.encode().ljust(32, b"\0")  # a fixed seed: tests only


def _evaluator(device: str) -> tuple[ckks.Evaluator, rlwe.SecretKey]:
    """The same keys on either device (fixed seeds)."""
    params = preset("N12QP483L6D3Insecure", device=device, allow_insecure=True)  # alpha 3: digits 3, 3, 1
    ctx = ckks.rlwe_context(params)
    sk = rlwe.gen_secret_key(ctx, seed=_seed("tensor-fusion/sk"))
    keys = rlwe.gen_eval_keys(ctx, sk, ckks.galois_elements(params.n, [1, 2]), seed=_seed("tensor-fusion/evk"))
    return ckks.Evaluator(params, keys), sk


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


def test_fused_mul_relin_is_bit_identical_on_cpu():
    ev, a, b, decryptor, encoder, z = _world()
    expected = _products(ev, a, b)
    assert expected[0].level == 4 and expected[0].scale == a.scale * b.scale
    w = z[::-1]
    assert np.max(np.abs(encoder.decode(decryptor.decrypt(ev.rescale(expected[0]))) - z * w)) < 2.0 ** -15
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ckks_evaluator, "_tensor_in_key_switch", lambda ctx: True)
        _same(_products(ev, a, b), expected, "fused")
        square = ev.mul_relin(b, b)
        fourth = ev.mul_relin(square, square)
        with pytest.raises(ScaleOverflowError, match=r"^mul_relin: the result's scale"):
            ev.mul_relin(fourth, fourth)


@pytest.mark.parametrize("level", [6, 4])
def test_tensor_terms_times_p_before_mod_down_on_cpu(level):
    """tensor_fuse 2's algebra with the CPU's ops: (P mod q_i) t_c added to the Q rows of the inner product's
    output, then the plain ModDown == ModDown adding t_c (tensor_fuse 1's composition), bit for bit (ModDown's
    Conv reads only the P rows: (x + P t - Conv) P^-1 = (x - Conv) P^-1 + t mod q_i)."""
    ev, a, b, *_ = _world()
    ctx = ev._ctx
    t = ctx.tables(level)
    source = a if a.level == level else b
    assert source.level == level
    x_data, y_data = source.data.contiguous(), _extreme(ev, source).data
    d2 = ops.mul(x_data[1], y_data[1], t.q.moduli)
    key = ev._relin_key("test")
    inner = keyswitch._mod_up_inner_product(ctx, d2, key, level)
    expected = keyswitch._mod_down(ctx, inner, level, add=x_data, add_times=y_data)
    terms = ops.tensor_product(x_data, y_data, t.q.moduli)[:2].contiguous()
    scaled = ops.mul_const(terms, ctx.p_mod_q[:level + 1], ctx.p_mod_q_shoup[:level + 1], t.q.moduli)
    shifted = inner.clone()
    shifted[:, ctx.alpha:] = ops.add(inner[:, ctx.alpha:].contiguous(), scaled, t.q.moduli)
    assert not torch.equal(shifted, inner)
    assert torch.equal(keyswitch._mod_down(ctx, shifted, level), expected)


@pytest.mark.gpu
def test_fused_mul_relin_on_cuda_every_variant():
    """tensor_fuse 2, 1 and 0 (tensor_product + relinearize) on CUDA == the CPU, bit for bit; at N = 2^12 the
    fused inner product (and with it tensor_fuse 2's kernel) runs only with keyswitch's N floor lowered, as here for
    ks_fuse 5 (4: tensor_fuse 2 falls back to 1)."""
    ev, a, b, *_ = _world()
    expected = _products(ev, a, b)
    ev_gpu = _evaluator("cuda")[0]
    a_gpu, b_gpu = a.replace(data=a.data.cuda()), b.replace(data=b.data.cuda())
    for variant in (1, 0):
        with ops.use_kernel_variant("tensor_fuse", variant):
            _same(_products(ev_gpu, a_gpu, b_gpu), expected, variant)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(keyswitch, "_INNER_PRODUCT_IN_MOD_UP_MIN_N", 0)
        for ks_fuse in (5, 4):
            for variant in (2, 1, 0):
                with ops.use_kernel_variant("tensor_fuse", variant), ops.use_kernel_variant("ks_fuse", ks_fuse):
                    assert keyswitch._tensor_in_inner_product(ev_gpu._ctx, 6) == (variant == 2 and ks_fuse == 5)
                    _same(_products(ev_gpu, a_gpu, b_gpu), expected, (ks_fuse, variant))
