"""The BEHZ steps one by one against Python big integers (per coefficient, no polynomial
arithmetic needed): lift gives c or c - Q, fast_floor gives floor(t d / Q) - u with 0 <= u < k,
to_q_exact reproduces any |y| < B/4 exactly; the steps' folded constants and the whole product against the
unfolded composition (a mul_const before and after each conversion), word for word."""
import math

import numpy as np
import pytest
import torch

from fhe_core.bfv import behz
from fhe_reference import crt, fresh_rng
from bfv_helpers import TEST_PRESETS, session


def _residues(values: list[int], primes, device) -> torch.Tensor:
    return torch.tensor([[v % p for v in values] for p in primes], dtype=torch.int64, device=device)


def _signed(residues: torch.Tensor, primes) -> list[int]:
    rows = residues.tolist()
    big = math.prod(primes)
    out = []
    for i in range(len(rows[0])):
        x = crt([row[i] for row in rows], list(primes))
        out.append(x - big if x > big // 2 else x)
    return out


def _random_ints(rng, count: int, bound: int) -> list[int]:
    """``count`` integers uniform in (-bound, bound), any size."""
    return [int.from_bytes(rng.bytes(bound.bit_length() // 8 + 8), "little") % (2 * bound - 1) - bound + 1
            for _ in range(count)]


@pytest.mark.parametrize("name", TEST_PRESETS)
def test_auxiliary_basis_sizes(name):
    s = session(name)
    ctx = s.ctx
    b, m_tilde = behz.auxiliary_primes(ctx)
    everything = set(b) | {m_tilde} | set(ctx.params.q_primes) | set(ctx.params.p_primes) | {ctx.t}
    assert len(everything) == len(b) + 1 + len(ctx.params.q_primes) + len(ctx.params.p_primes) + 1
    assert math.prod(b) > 8 * ctx.t * ctx.n * ctx.q_modulus(ctx.max_level)  # |y| < B/4: to_q_exact's margin
    assert m_tilde > 2 * (ctx.max_level + 1)


@pytest.mark.parametrize("name", TEST_PRESETS)
def test_lift_gives_c_or_c_minus_q(name):
    rng, _ = fresh_rng()
    s = session(name)
    for level in (s.ctx.max_level, 0):
        tab = s.ctx.behz(level)
        big_q = tab.q.modulus
        values = _random_ints(rng, s.n, big_q // 2)
        values = [v % big_q for v in values[:-3]] + [0, 1, big_q - 1]  # canonical, with the edges
        lifted = _signed(behz.lift(tab, _residues(values, tab.q.primes, s.ctx.device)), tab.b.primes)
        assert all(y in (c, c - big_q) for y, c in zip(lifted, values))
        assert lifted == [_behz_lift(c, tab.q.primes, tab.m_tilde) for c in values]  # BEHZ's choice, exactly


def _behz_lift(c: int, primes, m_tilde: int) -> int:
    """sm_mrq(fastbconv_m_tilde(c)) in Python integers: X = Conv([m~ c]_Q), r = [-X Q^-1]_{m~} centred,
    (X + r Q) / m~."""
    big_q = math.prod(primes)
    x = sum((c * m_tilde * pow(big_q // q, -1, q) % q) * (big_q // q) for q in primes)
    r = -x * pow(big_q, -1, m_tilde) % m_tilde
    r = r - m_tilde if r > m_tilde // 2 else r
    assert (x + r * big_q) % m_tilde == 0
    return (x + r * big_q) // m_tilde


@pytest.mark.parametrize("name", TEST_PRESETS)
def test_fast_floor_and_exact_conversion(name):
    rng, _ = fresh_rng()
    s = session(name)
    tab = s.ctx.behz(s.ctx.max_level)
    big_q, k, t = tab.q.modulus, len(tab.q), s.t
    d = _random_ints(rng, s.n, s.n * big_q * big_q // 2)  # the range of a tensor-product coefficient
    floor = behz.fast_floor(tab, _residues(d, tab.q.primes, s.ctx.device), _residues(d, tab.b.primes, s.ctx.device))
    got = _signed(behz.to_q_exact(tab, floor), tab.q.primes)
    exact = [(t * x) // big_q for x in d]
    via_b = _signed(floor, tab.b.primes)                 # the value itself (|y| < B/2)
    assert all(0 <= e - y < k for e, y in zip(exact, via_b))
    assert all((y - g) % big_q == 0 for y, g in zip(via_b, got))  # and exactly y mod Q after to_q_exact


@pytest.mark.parametrize("name", TEST_PRESETS)
def test_to_q_exact_reproduces_every_value_below_a_quarter_of_b(name):
    rng, _ = fresh_rng()
    s = session(name)
    tab = s.ctx.behz(1)
    quarter_b = tab.b.modulus // 4
    y = _random_ints(rng, s.n - 2, quarter_b) + [quarter_b - 1, -quarter_b + 1]
    got = behz.to_q_exact(tab, _residues(y, tab.b.primes, s.ctx.device))
    np.testing.assert_array_equal(np.array(got.tolist(), dtype=object),
                                  np.array([[v % q for v in y] for q in tab.q.primes], dtype=object))
