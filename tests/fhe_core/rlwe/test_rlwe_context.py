"""RLWE context tables, Galois-element arithmetic and the seed/nonce scheme, against exact integers."""
from math import prod
from types import SimpleNamespace

import pytest
import torch

from fhe_core import rlwe
from fhe_core.errors import LevelMismatchError, ParameterError
from fhe_core.ring import generate_primes
from fhe_core.rlwe import sampling
from fhe_reference import evaluate, substitute
from rlwe_helpers import SHAPES, context, fixed_seed

N = 1 << 10


def _u64(t: torch.Tensor) -> list[int]:
    return [v % (1 << 64) for v in t.cpu().tolist()]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.id)
def test_level_tables_layout_and_constants(shape):
    ctx = context(shape)
    alpha, big_p = ctx.alpha, prod(ctx.p_primes)
    assert ctx.dnum == -(-len(ctx.q_primes) // alpha)
    for level in range(ctx.max_level + 1):
        t = ctx.tables(level)
        assert ctx.tables(level) is t  # built once
        assert t.q.primes == ctx.q_primes[:level + 1]
        assert t.qp.primes == ctx.p_primes + ctx.q_primes[:level + 1]  # P first: a prefix of QP_L
        assert t.qp.ntt_table.data_ptr() == ctx.qp_basis.ntt_table.data_ptr()  # shared, not copied
        covered = [q for ext in t.digits for q in ctx.q_primes[ext.start:ext.stop]]
        assert covered == list(t.q.primes) and len(t.digits) == -(-(level + 1) // alpha)
        assert all(ext.stop - ext.start == alpha for ext in t.digits[:-1])
        assert _u64(t.p_inv) == [pow(big_p, -1, q) for q in t.q.primes]
        for ext in t.digits:
            digit = ctx.q_primes[ext.start:ext.stop]
            q_j = prod(digit)
            own = range(ext.own_start, ext.own_start + len(digit))
            assert [t.qp.primes[r] for r in own] == list(digit)
            covered_rows = sorted(r for part in ext.parts for r in range(part.start, part.stop))
            assert covered_rows == [r for r in range(len(t.qp)) if r not in own]  # every other row, once
            for part in ext.parts:
                rows = t.qp.primes[part.start:part.stop]
                assert part.basis.primes == rows
                assert part.basis.ntt_table.data_ptr() == t.qp.ntt_table[part.start].data_ptr()  # a view
                assert _u64(part.qhat_mod_p.flatten()) == [q_j // qi % r for qi in digit for r in rows]
            assert _u64(ext.qhat_inv) == [pow(q_j // qi, -1, qi) for qi in digit]


def test_context_validation_and_ids():
    primes = generate_primes([40] * 4, N)
    with pytest.raises(ParameterError, match="disjoint"):
        rlwe.RLWEContext(N, primes[:3], primes[2:])
    with pytest.raises(ParameterError, match="error_eta"):
        rlwe.RLWEContext(N, primes[:3], primes[3:], error_eta=33)
    with pytest.raises(ParameterError, match="hamming_weight"):
        rlwe.RLWEContext(N, primes[:3], primes[3:], hamming_weight=N + 1)
    a = rlwe.RLWEContext(N, primes[:3], primes[3:])
    assert a.params_id == rlwe.RLWEContext(N, primes[:3], primes[3:]).params_id  # content hash
    assert a.params_id != rlwe.RLWEContext(N, primes[:3], primes[3:], hamming_weight=32).params_id
    with pytest.raises(LevelMismatchError, match="tables: level"):
        a.tables(3)
    assert a.params_id != rlwe.RLWEContext(N, primes[:3], primes[3:], key_switching="linear").params_id
    params = SimpleNamespace(n=N, q_primes=primes[:3], p_primes=primes[3:], hamming_weight=16, error_eta=20,
                             params_id="preset-xyz", key_switching="hybrid")
    b = rlwe.RLWEContext.from_params(params)
    assert (b.params_id, b.hamming_weight, b.error_eta, b.max_level, b.alpha) == ("preset-xyz", 16, 20, 2, 1)


# ---- Galois elements ---------------------------------------------------------------------------

def test_rotation_elements_rotate_slots_left():
    """Slot j = m(psi^(5^j)); sigma_{5^r}(m) has m's slot j + r in slot j (checked by evaluation)."""
    (q,) = generate_primes([40], N)
    from fhe_core.ring import primitive_root_2n
    psi = primitive_root_2n(q, N)
    m = [(7 * i * i + 3) % q for i in range(N)]
    slot = lambda poly, j: evaluate(poly, pow(psi, pow(5, j, 2 * N), q), q)  # noqa: E731
    for r in (1, 3, -1, N // 2 - 1):
        k = rlwe.galois_element_for_rotation(r, N)
        assert k == pow(5, r % (N // 2), 2 * N)
        rotated = substitute(m, k, q)
        for j in (0, 1, 17, N // 2 - 1):
            assert slot(rotated, j) == slot(m, (j + r) % (N // 2)), (r, j)
    conj = rlwe.galois_element_for_conjugation(N)
    assert conj == 2 * N - 1
    assert evaluate(substitute(m, conj, q), pow(psi, 5, q), q) == evaluate(m, pow(psi, -5, q), q)


def test_galois_group_arithmetic():
    for r in (0, 1, 5, N // 2 - 1):
        k = rlwe.galois_element_for_rotation(r, N)
        assert rlwe.rotation_for_galois_element(k, N) == (r, False)
        assert rlwe.rotation_for_galois_element(2 * N - k, N) == (r, True)
        assert rlwe.galois_compose(k, rlwe.galois_inverse(k, N), N) == 1
    assert rlwe.galois_compose(rlwe.galois_element_for_rotation(3, N), rlwe.galois_element_for_rotation(4, N), N) \
        == rlwe.galois_element_for_rotation(7, N)
    for bad in (0, 2, 2 * N + 1, -5, True):
        with pytest.raises(ParameterError, match="Galois element"):
            rlwe.galois_inverse(bad, N)


# ---- seeds and nonces ----------------------------------------------------------------------------

def test_nonce_layout_is_injective_and_seeds_are_separated():
    nonces = {sampling.nonce(d, i) for d in sampling.Domain for i in (0, 1, 2, (1 << 32) - 1)}
    assert len(nonces) == len(sampling.Domain) * 4 and all(0 <= v < 1 << 63 for v in nonces)
    with pytest.raises(ParameterError):
        sampling.nonce(sampling.Domain.KEY_ERROR, 1 << 32)
    fixed = sampling.fresh_seeds(fixed_seed("seeds"))
    again = sampling.fresh_seeds(fixed_seed("seeds"))
    assert (fixed.uniform, fixed.secret) == (again.uniform, again.secret)
    assert len({fixed.master, fixed.uniform, fixed.secret}) == 3
    one, two = sampling.fresh_seeds(), sampling.fresh_seeds()
    assert one.master != two.master and one.secret != two.secret and len(one.master) == 32
    assert "hidden" in repr(one) and one.master.hex() not in repr(one)
    with pytest.raises(ParameterError, match="32 bytes"):
        sampling.fresh_seeds(b"short")


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.id)
def test_secret_key_distribution(shape):
    ctx = context(shape)
    sk = rlwe.gen_secret_key(ctx, seed=fixed_seed("sk"))
    coeffs = ctx.qp_basis.intt(sk.data).tolist()
    signed = [[c - q if c > q // 2 else c for c in row] for row, q in zip(coeffs, ctx.qp_basis.primes)]
    assert all(row == signed[0] for row in signed)  # one polynomial on every limb
    assert set(signed[0]) <= {-1, 0, 1}
    nonzero = sum(1 for c in signed[0] if c)
    if shape.hamming_weight:
        assert nonzero == shape.hamming_weight
    else:
        assert abs(nonzero - 2 * ctx.n / 3) < 6 * (ctx.n * 2 / 9) ** 0.5
    assert sk.seed.hex() not in repr(sk)


@pytest.mark.parametrize("shape", SHAPES[:1], ids=lambda s: s.id)
def test_uniform_parts_regenerate_from_the_public_seed(shape):
    ctx = context(shape)
    sk = rlwe.gen_secret_key(ctx)
    key = rlwe.gen_galois_key(ctx, sk, 5)
    assert torch.equal(rlwe.switching_key_uniform(ctx, key.uniform_seed), key.data[:, 1])
    pk = rlwe.gen_public_key(ctx, sk)
    a = sampling.uniform_ntt(ctx.q_basis, pk.uniform_seed, sampling.nonce(sampling.Domain.KEY_UNIFORM, 0))
    assert torch.equal(a, pk.data[1])
