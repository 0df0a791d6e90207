"""The CPU kernels' paths (cpu/path.h) against each other and against Python integers.

Three arithmetics compute the same canonical words: "ifma" (AVX-512 IFMA, 52-bit vector products for primes below
2^50, a 64-bit vector NTT for larger ones), "avx2" (the portable vector path: AVX2 + FMA double-precision
butterflies, Conv rows, inner products and products for primes below 2^46) and "scalar" (64 x 64 -> 128-bit
products). Every test here runs on each path this CPU can run (ops.set_cpu_path between kernel calls; the cpu_path
and vector_path fixtures of conftest.py) and skips the others with the reason. The primes straddle every boundary of
the vector paths: below 2^46, 2^46..2^50, 2^50..2^52, at least 2^52 (IFMA Conv sources split in two terms), and
sums of products too large for the vector accumulators.
"""
import os
import subprocess
import sys
from math import prod

import pytest
import torch

from fhe_core import ops
from fhe_core.ring import BasisConverter, RNSBasis, generate_primes, shoup_constants
from fhe_reference import crt, fresh_rng, random_residues, to_ints

N = 1 << 10
SRC_BITS = [30, 45, 46, 50, 52, 53, 60, 61]
DST_BITS = [30, 40, 46, 49, 50, 51, 55, 61]
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def _on_path(path: str, fn):
    """fn() computed with the CPU kernels on `path`."""
    before = ops.cpu_path()
    ops.set_cpu_path(path)
    try:
        return fn()
    finally:
        ops.set_cpu_path(before)


def test_the_environment_picks_the_process_path():
    """FHE_CORE_CPU_SIMD, read at the first kernel call: "0", the scalar path; "avx2", the portable vector path (the
    scalar one on a CPU without AVX2 and FMA); unset, the best path. Unknown names are refused."""
    script = "from fhe_core import ops; print(ops.cpu_path())"
    for flag, expected in (("0", "scalar"), ("avx2", "scalar" if ops.cpu_path_supported() == "scalar" else "avx2")):
        env = dict(os.environ, FHE_CORE_CPU_SIMD=flag)
        out = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, check=True, capture_output=True,
                             text=True).stdout
        assert out.split() == [expected], flag
    if "FHE_CORE_CPU_SIMD" not in os.environ:
        assert ops.cpu_path() == ops.cpu_path_supported()
    with pytest.raises(RuntimeError, match="unknown CPU path"):
        ops.set_cpu_path("sse")


def _with_extremes(x: torch.Tensor, moduli: torch.Tensor) -> torch.Tensor:
    """The first coefficients of every limb set to 0, 1 and q - 1."""
    x[..., :, 0] = 0
    x[..., :, 1] = 1
    x[..., :, 2:6] = moduli[:, :1] - 1
    return x


def _conv_case(src_bits, dst_bits, batch=2):
    rng, _ = fresh_rng()
    primes = generate_primes(src_bits + dst_bits, N)
    src = RNSBasis.get(primes[:len(src_bits)], N, "cpu")
    dst = RNSBasis.get(primes[len(src_bits):], N, "cpu")
    x = _with_extremes(random_residues(rng, src.primes, (batch,), N), src.moduli)
    return rng, src, dst, x


@pytest.mark.parametrize("src_bits,dst_bits", [
    (SRC_BITS, DST_BITS),                 # every kind of source and destination row
    ([46] * 12, [40, 46, 49, 50, 61]),    # ModDown-like
    ([40] * 11, [40, 46, 60]),            # ModUp-like: double-precision rows on the AVX2 path but 60
    ([40] * 16, [40, 46]),                # 16 terms: too many for the AVX2 rows' partial sums (scalar rows)
    ([47, 40, 30], [40, 46]),             # a 47-bit source: scalar rows on the AVX2 path
    ([61] * 5, [50, 46]),                 # split sources: the sum is too large for 50-bit rows only
])
def test_conv_equals_python_integers(src_bits, dst_bits, cpu_path):
    """Conv(x)_r = sum_k [x_k (Q/q_k)^-1]_{q_k} (Q/q_k) mod p_r, word for word, for every row."""
    rng, src, dst, x = _conv_case(src_bits, dst_bits)
    out = to_ints(BasisConverter.get(src, dst)(x))
    xs, big_q = to_ints(x), src.modulus
    qhat = [big_q // q for q in src.primes]
    inverse = [pow(h % q, -1, q) for h, q in zip(qhat, src.primes)]
    for b in range(2):
        for i in list(range(6)) + rng.integers(6, N, size=20).tolist():
            ys = [xs[b][k][i] * inverse[k] % q for k, q in enumerate(src.primes)]
            total = sum(y * h for y, h in zip(ys, qhat))
            assert [out[b][r][i] for r in range(len(dst))] == [total % p for p in dst.primes], (b, i)


@pytest.mark.parametrize("src_bits,dst_bits", [(SRC_BITS[:5], DST_BITS), ([46] * 12, [40, 60, 46])])
def test_exact_conv_equals_centred_value(src_bits, dst_bits, cpu_path):
    """The exact Conv is the centred representative of x mod every p_r (coefficients near Q/2,
    where either representative is correct, do not occur in random data of this size)."""
    rng, src, dst, x = _conv_case(src_bits, dst_bits)
    out = to_ints(BasisConverter.get(src, dst)(x, exact=True))
    xs, big_q = to_ints(x), src.modulus
    for b in range(2):
        for i in list(range(6)) + rng.integers(6, N, size=20).tolist():
            value = crt([xs[b][k][i] for k in range(len(src))], list(src.primes))
            if abs(2 * value - big_q) <= big_q >> 48:
                continue
            centred = value - big_q if value > big_q // 2 else value
            assert [out[b][r][i] for r in range(len(dst))] == [centred % p for p in dst.primes], (b, i)


@pytest.mark.parametrize("bits,dnum", [([40, 46, 47, 50, 51, 61], 3), ([30, 49], 9), ([50, 40], 20), ([45], 40)])
def test_inner_product_equals_python_integers(bits, dnum, cpu_path):
    """sum_j d_j k_j mod q for limbs on both sides of the vector paths' bounds (IFMA: primes of 51 and 61 bits,
    and 20 products of 50-bit residues, whose sum is too large for the two-lane accumulator, take the scalar path;
    AVX2: primes from 2^46 and 40 terms of 45 bits do)."""
    rng, _ = fresh_rng()
    basis = RNSBasis.get(generate_primes(bits, N), N, "cpu")
    digits = _with_extremes(random_residues(rng, basis.primes, (dnum,), N), basis.moduli)
    key = _with_extremes(random_residues(rng, basis.primes, (dnum, 2), N), basis.moduli)
    out = to_ints(ops.ks_inner_product(digits, key, len(basis), len(basis), basis.moduli))
    d, k = to_ints(digits), to_ints(key)
    for limb, q in enumerate(basis.primes):
        for i in list(range(6)) + rng.integers(6, N, size=10).tolist():
            for c in range(2):
                expected = sum(d[j][limb][i] * k[j][c][limb][i] for j in range(dnum)) % q
                assert out[c][limb][i] == expected, (limb, c, i)


def compute_all(inputs: dict) -> dict:
    """Every kernel with a vector path, on the given inputs."""
    primes, n = inputs["primes"], inputs["n"]
    basis = RNSBasis.get(primes, n, "cpu")
    src, dst = basis.rows(0, 5), basis.rows(5, len(primes))
    conv = BasisConverter.get(src, dst)
    small = [primes[i] for i in (1, 2, 7)], [primes[i] for i in (5, 6, 0, 3)]  # sources below 2^50
    conv_small = BasisConverter.get(RNSBasis.get(small[0], n, "cpu"), RNSBasis.get(small[1], n, "cpu"))
    a, b, c = inputs["a"], inputs["b"], inputs["c"]
    consts, consts_shoup = shoup_constants(inputs["consts"], primes, "cpu")
    qhat = [prod(primes[:5]) // q for q in primes[:5]]
    inv, inv_shoup = shoup_constants([pow(h % q, -1, q) for h, q in zip(qhat, primes[:5])], primes[:5], "cpu")
    qhat_mod_p = torch.tensor([[h % p for p in primes] for h in qhat], dtype=torch.int64).reshape(1, 5, -1)
    small_in = a[:, [1, 2, 7]].contiguous()
    return {
        "ntt": basis.ntt(a), "intt": basis.intt(a),
        "conv": conv(a[:, :5].contiguous()), "conv_exact": conv(a[:, :5].contiguous(), exact=True),
        "conv_small": conv_small(small_in), "conv_small_exact": conv_small(small_in, exact=True),
        "mod_up_conv": ops.mod_up_conv(a[0, :5].contiguous(), src.moduli, inv, inv_shoup, basis.moduli, qhat_mod_p),
        "inner_product": ops.ks_inner_product(a, torch.stack([b, c], 1), len(primes), len(primes), basis.moduli),
        "mul": ops.mul(a, b, basis.moduli), "mul_add": ops.mul_add(a, b, c, basis.moduli),
        "mul_const": ops.mul_const(a, consts, consts_shoup, basis.moduli),
        "sub_mul_const": ops.sub_mul_const(a, b, consts, consts_shoup, basis.moduli),
        "tensor_product": ops.tensor_product(a[:2], b[:2], basis.moduli),
        "add": ops.add(a, b, basis.moduli), "sub": ops.sub(a, b, basis.moduli),
    }


def test_vector_and_scalar_paths_give_the_same_words(vector_path):
    """Every kernel on a vector path equals the same kernel on the scalar path, word for word, on random and
    extreme residues."""
    rng, _ = fresh_rng()
    primes = generate_primes([60, 40, 46, 50, 53, 30, 41, 49, 51, 61], N)
    moduli = RNSBasis.get(primes, N, "cpu").moduli
    a, b, c = (_with_extremes(random_residues(rng, primes, (3,), N), moduli) for _ in range(3))
    inputs = {"primes": primes, "n": N, "a": a, "b": b, "c": c,
              "consts": [int(v) % q for v, q in zip(rng.integers(0, 2 ** 62, len(primes)), primes)]}
    scalar = _on_path("scalar", lambda: compute_all(inputs))
    for name, value in _on_path(vector_path, lambda: compute_all(inputs)).items():
        assert torch.equal(value, scalar[name]), name


@pytest.mark.parametrize("log_n", [16, 17])
def test_ntt_at_large_n_equals_the_scalar_path(log_n, vector_path):
    """The transforms at N = 2^16 and 2^17, where the AVX2 path's values grow most (17 stages), for the largest
    primes each vector path takes (just below 2^46 and 2^50) and a 60-bit one, inputs with every extreme residue:
    both directions equal the scalar path's words, and the inverse undoes the forward."""
    rng, _ = fresh_rng()
    n = 1 << log_n
    basis = RNSBasis.get(generate_primes([46, 50, 60], n), n, "cpu")
    x = _with_extremes(random_residues(rng, basis.primes, (), n), basis.moduli)
    x[:, 6:64] = basis.moduli[:, :1] - 1 - torch.arange(58).remainder(2)  # long runs of q - 1 and q - 2
    scalar = _on_path("scalar", lambda: (basis.ntt(x), basis.intt(x)))
    forward, inverse = _on_path(vector_path, lambda: (basis.ntt(x), basis.intt(x)))
    assert torch.equal(forward, scalar[0]) and torch.equal(inverse, scalar[1])
    assert torch.equal(_on_path(vector_path, lambda: basis.intt(forward)), x)


def key_switch_at_n16() -> dict:
    """Relinearization and a rotation at the 128-bit N16QP1766L30D3 preset (q_0 of 60 bits: the
    scalar rows; 40- and 46-bit primes: the vector ones), everything from fixed test seeds."""
    from fhe_core import rlwe
    from fhe_core.params import preset

    params = preset("N16QP1766L30D3", device="cpu")
    ctx = rlwe.RLWEContext.from_params(params)
    sk = rlwe.gen_secret_key(ctx, seed=b"\x01" * 32)
    galois = rlwe.galois_element_for_rotation(1, params.n)
    keys = rlwe.gen_eval_keys(ctx, sk, [galois], seed=b"\x02" * 32)
    level = params.max_level
    message = ops.sample_uniform(params.q_basis(level).moduli, params.n, b"\x03" * 32, 0)
    ct = rlwe.encrypt_sk(ctx, sk, message, level, seed=b"\x04" * 32)
    return {"key_switch": rlwe.key_switch(ctx, ct.data[1], keys.relin_key("test"), level),
            "rotation": rlwe.apply_galois(ctx, ct, galois, keys).data}


@pytest.mark.slow
def test_key_switch_at_n16_equals_the_scalar_path(vector_path, monkeypatch):
    """A whole key switch and a rotation at N = 2^16 with real preset primes, a vector path against the scalar
    path, word for word (fixed seeds on a 128-bit preset: opted in with FHE_CORE_TEST_SEEDS)."""
    monkeypatch.setenv("FHE_CORE_TEST_SEEDS", "1")
    scalar = _on_path("scalar", key_switch_at_n16)
    for name, value in _on_path(vector_path, key_switch_at_n16).items():
        assert torch.equal(value, scalar[name]), name
