"""Fast basis conversion against exact CRT reconstruction, on CPU and CUDA."""
import pytest
import torch

from fhe_core import ops
from fhe_core.errors import ParameterError
from fhe_core.ring import BasisConverter, RNSBasis, generate_primes, shoup_constants
from fhe_reference import DEVICES, crt, fresh_rng, random_residues, to_ints

N = 1 << 10


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("l_in,l_out", [(1, 3), (4, 6), (10, 30)])
@pytest.mark.usefixtures("cpu_path")  # every CPU path (conftest.py)
def test_bconv_is_crt_up_to_small_multiple_of_q(device, l_in, l_out):
    """Conv(x) = x + u*Q mod every p_j, with one integer 0 <= u < l_in per coefficient."""
    rng, _ = fresh_rng()
    primes = generate_primes([50] * l_in + [55] * l_out, N)
    src = RNSBasis.get(primes[:l_in], N, device)
    dst = RNSBasis.get(primes[l_in:], N, device)
    x = random_residues(rng, src.primes, shape_prefix=(2,), n=N, device=device)
    x[0, :, 0] = src.moduli[:, 0] - 1  # x = -1 mod every q_i: the largest u
    out = BasisConverter.get(src, dst)(x)
    assert out.shape == (2, l_out, N)
    big_q = src.modulus
    xs, outs = to_ints(x), to_ints(out)
    for b in range(2):
        for i in rng.integers(0, N, size=40).tolist() + [0]:
            value = crt([xs[b][k][i] for k in range(l_in)], list(src.primes))
            p0 = dst.primes[0]
            u = (outs[b][0][i] - value) * pow(big_q, -1, p0) % p0
            assert 0 <= u < l_in, f"u = {u} out of range at coefficient {i}"
            for j, p in enumerate(dst.primes):
                assert outs[b][j][i] == (value + u * big_q) % p, f"batch {b}, coefficient {i}, prime {j}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("l_in,l_out", [(1, 3), (2, 5), (5, 27), (12, 4)])
@pytest.mark.usefixtures("cpu_path")  # every CPU path (conftest.py)
def test_exact_bconv_is_crt(device, l_in, l_out):
    """With exact=True the result is the centred representative of x (x if x < Q/2, else x - Q)
    mod every p_j, on random residues and on x = 0, 1, Q - 1, (Q -+ 1)/2 and (Q + 3)/2 (Q is
    odd), where the double-precision sum is closest to an integer or to a half-integer (within
    ~2^-50 Q of Q/2 either representative is a correct answer)."""
    rng, _ = fresh_rng()
    primes = generate_primes([59] * l_in + [55] * l_out, N)
    src = RNSBasis.get(primes[:l_in], N, device)
    dst = RNSBasis.get(primes[l_in:], N, device)
    big_q = src.modulus
    x = random_residues(rng, src.primes, shape_prefix=(2,), n=N, device=device)
    special = [0, 1, big_q - 1, big_q // 2, big_q // 2 + 1, big_q // 2 + 2]
    for i, v in enumerate(special):
        x[1, :, i] = torch.tensor([v % q for q in src.primes])
    out = BasisConverter.get(src, dst)(x, exact=True)
    xs, outs = to_ints(x), to_ints(out)
    for b in range(2):
        for i in rng.integers(0, N, size=60).tolist() + list(range(len(special))):
            value = crt([xs[b][k][i] for k in range(l_in)], list(src.primes))
            centred = value - big_q if value > big_q // 2 else value
            got = [outs[b][j][i] for j in range(l_out)]
            if abs(2 * value - big_q) <= big_q >> 48:  # on the rounding boundary: either representative
                assert got in ([value % p for p in dst.primes], [(value - big_q) % p for p in dst.primes])
            else:
                assert got == [centred % p for p in dst.primes], f"batch {b}, coefficient {i}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("exact", [False, True])
def test_scaled_conversion_equals_mul_const_before_and_after(device, exact):
    """scale_in / scale_out folded into the constants: the words of mul_const(scale_in), the plain conversion,
    then mul_const(scale_out), fast and exact (BFV's multiplication relies on it)."""
    rng, _ = fresh_rng()
    primes = generate_primes([50] * 3 + [61] * 4, N)
    src, dst = RNSBasis.get(primes[:3], N, device), RNSBasis.get(primes[3:], N, device)
    scale_in = int(rng.integers(2, 2**62))
    scale_out = [int(v) for v in rng.integers(2, 2**62, size=len(dst))]
    x = random_residues(rng, src.primes, shape_prefix=(2,), n=N, device=device)
    scaled = BasisConverter(src, dst, scale_in=scale_in, scale_out=scale_out)(x, exact=exact)
    pre = ops.mul_const(x, *shoup_constants([scale_in] * len(src), src.primes, device), src.moduli)
    post = shoup_constants(scale_out, dst.primes, device)
    assert scaled.equal(ops.mul_const(BasisConverter.get(src, dst)(pre, exact=exact), *post, dst.moduli))
    with pytest.raises(ParameterError, match="one factor per destination prime"):
        BasisConverter(src, dst, scale_out=scale_out[:2])


@pytest.mark.parametrize("device", DEVICES)
def test_bconv_rejects_mismatched_constants(device):
    primes = generate_primes([50] * 5, N)
    src = RNSBasis.get(primes[:2], N, device)
    dst = RNSBasis.get(primes[2:], N, device)
    conv = BasisConverter.get(src, dst)
    x = torch.zeros(3, N, dtype=torch.int64, device=device)
    with pytest.raises(RuntimeError, match="bconv: a has 3 limbs but moduli has 2"):
        conv(x)
    with pytest.raises(RuntimeError, match=r"bconv: neg_q_mod_p must be \[3\]"):
        ops.bconv(x[:2], src.moduli, dst.moduli, conv.qhat_inv, conv.qhat_inv_shoup, conv.qhat_mod_p,
                  conv.neg_q_mod_p[:2])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.usefixtures("cpu_path")  # every CPU path (conftest.py)
def test_center_lift_is_exact(device):
    """out[i] = centred representative of x mod q, reduced mod p_i, for every coefficient,
    including the two values around q/2 and q - 1."""
    rng, _ = fresh_rng()
    primes = generate_primes([61, 55, 40, 30], N)
    q, dst = primes[0], RNSBasis.get(primes[1:], N, device)
    x = random_residues(rng, [q], (2,), N, device)
    x[0, 0, :3] = torch.tensor([q // 2, q // 2 + 1, q - 1])
    out = ops.center_lift(x, q, dst.moduli)
    assert out.shape == (2, 3, N)
    xs, outs = to_ints(x), to_ints(out)
    for b in range(2):
        for i in range(N):
            v = xs[b][0][i]
            centred = v if v <= q // 2 else v - q
            assert [outs[b][j][i] for j in range(3)] == [centred % p for p in dst.primes], f"coefficient {i}"
