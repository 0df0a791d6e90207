"""The CPU kernels' AVX-512 IFMA paths against the scalar path and Python integers.

On a CPU with AVX-512 IFMA the CPU kernels take 52-bit vector paths for primes below 2^50 (NTT
rows, Conv destination rows, inner-product limbs, products) and keep the scalar 128-bit paths for
larger primes; FHE_CORE_CPU_SIMD=0 forces the scalar paths everywhere. Both must give the same
words. The primes here straddle every boundary of the vector paths: below 2^50, 2^50..2^52
(scalar rows, plain vector Conv sources), at least 2^52 (Conv sources split in two terms), and
sums of products too large for the two-lane accumulator (scalar rows).
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
SRC_BITS = [30, 45, 50, 52, 53, 60, 61]
DST_BITS = [30, 40, 46, 49, 50, 51, 55, 61]
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def _has_ifma() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            return "avx512ifma" in f.read()
    except OSError:
        return False


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
    ([61] * 5, [50, 46]),                 # split sources: the sum is too large for 50-bit rows only
])
def test_conv_equals_python_integers(src_bits, dst_bits):
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
def test_exact_conv_equals_centred_value(src_bits, dst_bits):
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


@pytest.mark.parametrize("bits,dnum", [([40, 46, 50, 51, 61], 3), ([30, 49], 9), ([50, 40], 20)])
def test_inner_product_equals_python_integers(bits, dnum):
    """sum_j d_j k_j mod q for limbs on both sides of the vector path's bounds (primes of 51 and 61
    bits, and 20 products of 50-bit residues, whose sum is too large for the two-lane
    accumulator, take the scalar path)."""
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
    """Every kernel with a vector path, on the given inputs (run in both processes)."""
    primes, n = inputs["primes"], inputs["n"]
    basis = RNSBasis.get(primes, n, "cpu")
    src, dst = basis.rows(0, 5), basis.rows(5, len(primes))
    conv = BasisConverter.get(src, dst)
    a, b, c = inputs["a"], inputs["b"], inputs["c"]
    consts, consts_shoup = shoup_constants(inputs["consts"], primes, "cpu")
    qhat = [prod(primes[:5]) // q for q in primes[:5]]
    inv, inv_shoup = shoup_constants([pow(h % q, -1, q) for h, q in zip(qhat, primes[:5])], primes[:5], "cpu")
    qhat_mod_p = torch.tensor([[h % p for p in primes] for h in qhat], dtype=torch.int64).reshape(1, 5, -1)
    return {
        "ntt": basis.ntt(a), "intt": basis.intt(a),
        "conv": conv(a[:, :5].contiguous()), "conv_exact": conv(a[:, :5].contiguous(), exact=True),
        "mod_up_conv": ops.mod_up_conv(a[0, :5].contiguous(), src.moduli, inv, inv_shoup, basis.moduli, qhat_mod_p),
        "inner_product": ops.ks_inner_product(a, torch.stack([b, c], 1), len(primes), len(primes), basis.moduli),
        "mul": ops.mul(a, b, basis.moduli), "mul_add": ops.mul_add(a, b, c, basis.moduli),
        "mul_const": ops.mul_const(a, consts, consts_shoup, basis.moduli),
        "sub_mul_const": ops.sub_mul_const(a, b, consts, consts_shoup, basis.moduli),
        "add": ops.add(a, b, basis.moduli), "sub": ops.sub(a, b, basis.moduli),
    }


@pytest.mark.skipif(not _has_ifma(), reason="this CPU has no AVX-512 IFMA: the scalar path is the only one")
def test_vector_and_scalar_paths_give_the_same_words(tmp_path):
    """Every kernel in this process (vector paths) equals the same kernel in a process started
    with FHE_CORE_CPU_SIMD=0 (scalar paths), word for word, on random and extreme residues."""
    rng, _ = fresh_rng()
    primes = generate_primes([60, 40, 46, 50, 53, 30, 41, 49, 51, 61], N)
    moduli = RNSBasis.get(primes, N, "cpu").moduli
    a, b, c = (_with_extremes(random_residues(rng, primes, (3,), N), moduli) for _ in range(3))
    inputs = {"primes": primes, "n": N, "a": a, "b": b, "c": c,
              "consts": [int(v) % q for v, q in zip(rng.integers(0, 2 ** 62, len(primes)), primes)]}
    torch.save(inputs, tmp_path / "inputs.pt")
    env = dict(os.environ, FHE_CORE_CPU_SIMD="0",
               PYTHONPATH=os.pathsep.join([REPO, os.path.join(REPO, "tests")]))
    subprocess.run([sys.executable, __file__, str(tmp_path / "inputs.pt"), str(tmp_path / "scalar.pt")],
                   cwd=REPO, env=env, check=True)
    scalar = torch.load(tmp_path / "scalar.pt")
    for name, value in compute_all(inputs).items():
        assert torch.equal(value, scalar[name]), name


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
@pytest.mark.skipif(not _has_ifma(), reason="this CPU has no AVX-512 IFMA: the scalar path is the only one")
def test_key_switch_at_n16_equals_the_scalar_path(tmp_path, monkeypatch):
    """A whole key switch and a rotation at N = 2^16 with real preset primes, vector paths in this
    process against the scalar paths in another, word for word (fixed seeds on a 128-bit preset:
    both processes opt in with FHE_CORE_TEST_SEEDS)."""
    monkeypatch.setenv("FHE_CORE_TEST_SEEDS", "1")
    env = dict(os.environ, FHE_CORE_CPU_SIMD="0",
               PYTHONPATH=os.pathsep.join([REPO, os.path.join(REPO, "tests")]))
    subprocess.run([sys.executable, __file__, "n16", str(tmp_path / "scalar.pt")], cwd=REPO, env=env, check=True)
    scalar = torch.load(tmp_path / "scalar.pt")
    for name, value in key_switch_at_n16().items():
        assert torch.equal(value, scalar[name]), name


if __name__ == "__main__":  # the scalar-path halves of the tests above
    if sys.argv[1] == "n16":
        torch.save(key_switch_at_n16(), sys.argv[2])
    else:
        torch.save(compute_all(torch.load(sys.argv[1])), sys.argv[2])
