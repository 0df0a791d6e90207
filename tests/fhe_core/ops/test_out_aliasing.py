"""Outputs that share memory with an input the kernel reads after writing ``out`` are refused.

ops.mod_down_ntt's addend is read in the NTT's last store, after ``out`` has been written (on the
CPU by the plain transform, on CUDA by the column pass). ops.ntt / intt of a strided input: torch's
overlap check answers "too hard" for a non-dense tensor and lets any ``out`` pass."""
import pytest
import torch

from fhe_core import ops
from fhe_core.ring import RNSBasis, generate_primes, shoup_constants
from fhe_reference import fresh_rng, random_residues


@pytest.mark.parametrize("device", [pytest.param("cpu"), pytest.param("cuda", marks=pytest.mark.gpu)])
def test_mod_down_ntt_refuses_out_aliasing_add(device):
    rng, _ = fresh_rng()
    n, p_rows = 1024, 2
    primes = generate_primes([61] * p_rows + [50] * 3, n)
    basis = RNSBasis.get(primes[p_rows:], n, device)
    x = random_residues(rng, basis.primes, (2,), n, device)
    c = random_residues(rng, primes, (2,), n, device)
    values = [int(rng.integers(1, q)) for q in basis.primes]
    consts, shoup = shoup_constants(values, basis.primes, device)
    addend = random_residues(rng, basis.primes, (2,), n, device)
    args = (c, p_rows, consts, shoup, basis.moduli, basis.ntt_table)
    expected = ops.add(ops.mod_down_ntt(x, *args), addend, basis.moduli)
    assert torch.equal(ops.mod_down_ntt(x, *args, addend), expected)  # separate out: accepted
    same = addend.clone()  # out is add
    with pytest.raises(RuntimeError, match="single memory location"):
        ops.mod_down_ntt(x, *args, same, out=same)
    in_place = x.clone()  # out is x and add
    with pytest.raises(RuntimeError, match="single memory location"):
        ops.mod_down_ntt(in_place, *args, in_place, out=in_place)
    out = torch.empty_like(x)  # add is out's first batch
    with pytest.raises(RuntimeError, match="single memory location"):
        ops.mod_down_ntt(x, *args, out[:1], out=out)


@pytest.mark.parametrize("device", [pytest.param("cpu"), pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("forward", [True, False])
def test_strided_ntt_refuses_out_in_the_same_memory(device, forward):
    rng, _ = fresh_rng()
    n = 1024
    basis = RNSBasis.get(generate_primes([50] * 3, n), n, device)
    c = random_residues(rng, list(basis.primes) * 3, (2,), n, device)  # [2, 9, N]; c[:, :3] is strided
    fn = ops.ntt if forward else ops.intt
    expected = fn(c[:, :3].contiguous(), basis.moduli, basis.ntt_table)
    separate = torch.empty_like(expected)
    assert torch.equal(fn(c[:, :3], basis.moduli, basis.ntt_table, out=separate), expected)
    shifted = c[0, 1:7].view(2, 3, n)  # out's row (0, 0) is the strided input's row (0, 1)
    with pytest.raises(RuntimeError, match="out must not share memory with a strided a"):
        fn(c[:, :3], basis.moduli, basis.ntt_table, out=shifted)
