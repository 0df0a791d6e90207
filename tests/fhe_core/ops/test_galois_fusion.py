"""A rotation's automorphism inside the key switch's kernels: ops.intt_galois (ModUp's inverse NTT reading
sigma_k(a)) and ops.mod_down_ntt's add_galois (ModDown's last store adding sigma_k(add)) against automorphism_ntt
followed by the plain ops, on the CPU and on every CUDA kernel plan (the reference kernels compose them so),
bit for bit; and the slot-run property the CUDA kernels rely on."""
import pytest
import torch

from fhe_core import ops
from fhe_core.ring import RNSBasis, generate_primes, shoup_constants
from fhe_core.ring.primes import is_prime
from fhe_reference import fresh_rng, random_residues
from plan_cases import KERNEL_PLANS


def _elements(n: int, rng) -> list[int]:
    """1 (identity), 5 (a rotation's generator), 2N - 1 (conjugation) and two random odd elements."""
    return [1, 5, 2 * n - 1, *(int(k) | 1 for k in rng.integers(1, 2 * n, size=2))]


@pytest.mark.parametrize("log_n", [10, 12])
def test_galois_maps_aligned_slot_runs_onto_aligned_runs(log_n):
    """In the NTT's bit-reversed slot order, sigma_k sends every aligned run of 2^j slots onto another aligned
    run, permuted inside: so each CUDA thread's 8 output slots read one aligned run of 8 input slots."""
    rng, _ = fresh_rng()
    n = 1 << log_n
    basis = RNSBasis.get(generate_primes([61], n), n)
    slots = torch.arange(n, dtype=torch.int64).unsqueeze(0)
    for k in _elements(n, rng):
        source = ops.automorphism_ntt(slots, basis.moduli, k)[0]  # slot i holds the index it reads
        for j in range(log_n + 1):
            runs = source.view(-1, 1 << j)
            first = runs.min(dim=1).values
            assert torch.all(first % (1 << j) == 0), (k, j)
            assert torch.equal(runs.sort(dim=1).values - first.unsqueeze(1),
                               torch.arange(1 << j).expand_as(runs)), (k, j)


def _case(rng, n, batches=2):
    primes = generate_primes([61, 58, 50], n)
    basis = RNSBasis.get(primes, n)
    a = random_residues(rng, primes, (batches,), n)
    a[0, :, :64] = basis.moduli[:, :1] - 1  # q - 1 at the edge of the range
    return primes, basis, a


def test_intt_galois_on_cpu_is_automorphism_then_intt():
    rng, _ = fresh_rng()
    n = 1 << 11
    _, basis, a = _case(rng, n)
    for k in _elements(n, rng):
        coeffs, permuted = ops.intt_galois(a, basis.moduli, basis.ntt_table, k)
        sigma = ops.automorphism_ntt(a, basis.moduli, k)
        assert torch.equal(permuted, sigma), k
        assert torch.equal(coeffs, basis.intt(sigma)), k
    with pytest.raises(RuntimeError, match="odd Galois element"):
        ops.intt_galois(a, basis.moduli, basis.ntt_table, 2)
    with pytest.raises(RuntimeError, match="contiguous"):
        ops.intt_galois(a.transpose(0, 1), basis.moduli, basis.ntt_table, 5)


def _mod_down_case(rng, n, primes, p_rows=2, batches=3):
    basis = RNSBasis.get(primes, n)
    x = random_residues(rng, primes, (batches,), n)
    c = random_residues(rng, generate_primes([61] * p_rows, n) + list(primes), (batches,), n)
    consts = shoup_constants([int(rng.integers(1, q)) for q in primes], primes)
    add = random_residues(rng, primes, (2,), n)
    add[0, :, :64] = basis.moduli[:, :1] - 1
    return basis, x, c, consts, add


def test_mod_down_ntt_add_galois_on_cpu_adds_the_automorphism():
    rng, _ = fresh_rng()
    n = 1 << 11
    primes = generate_primes([61, 58, 50], n)
    basis, x, c, consts, add = _mod_down_case(rng, n, primes)
    args = (x, c, 2, *consts, basis.moduli, basis.ntt_table)
    for k in _elements(n, rng):
        expected = ops.mod_down_ntt(*args, ops.automorphism_ntt(add, basis.moduli, k))
        assert torch.equal(ops.mod_down_ntt(*args, add, add_galois=k), expected), k
    with pytest.raises(RuntimeError, match="add_galois"):
        ops.mod_down_ntt(*args, add, add_galois=4 * n + 1)


@pytest.mark.gpu
@pytest.mark.parametrize("log_n", [11, 16, 17])
def test_intt_galois_on_cuda_every_plan(log_n):
    """intt_galois on every kernel plan (the reference kernels and views off 16-byte alignment: automorphism_ntt,
    then the inverse; the tuned ones: sigma_k read by the inverse rows kernel) == the CPU build."""
    rng, _ = fresh_rng()
    n = 1 << log_n
    primes, cpu, a = _case(rng, n)
    gpu = RNSBasis.get(primes, n, "cuda")
    flat = torch.empty(1 + a.numel(), dtype=torch.int64, device="cuda")
    shifted = flat[1:].view(a.shape)  # 8 bytes past an aligned address
    shifted.copy_(a)
    for k in _elements(n, rng):
        expected = ops.intt_galois(a, cpu.moduli, cpu.ntt_table, k)
        for plan_name, plan in KERNEL_PLANS.items():
            got = ops.intt_galois(a.cuda(), gpu.moduli, gpu.ntt_table, k, plan=plan)
            got_shifted = ops.intt_galois(shifted, gpu.moduli, gpu.ntt_table, k, plan=plan)
            for name, pair in (("aligned", got), ("misaligned", got_shifted)):
                assert torch.equal(pair[1].cpu(), expected[1]), (k, plan_name, name, "permuted")
                assert torch.equal(pair[0].cpu(), expected[0]), (k, plan_name, name)


@pytest.mark.gpu
@pytest.mark.parametrize("log_n", [11, 16, 17])
def test_mod_down_ntt_add_galois_on_cuda_every_plan(log_n):
    """mod_down_ntt(add, add_galois=k) on every kernel plan (the rows kernel's store reads sigma_k(add) in place)
    == the CPU build, also with the lazy forward's largest prime."""
    rng, _ = fresh_rng()
    n = 1 << log_n
    limit = (2 ** 64 - 1) // (5 + 2 * log_n)
    lazy_edge = limit - (limit - 1) % (2 * n)  # the largest prime q = 1 mod 2N with (5 + 2 log N) q < 2^64
    while not is_prime(lazy_edge):
        lazy_edge -= 2 * n
    primes = [lazy_edge] + generate_primes([58, 50], n)
    basis, x, c, consts, add = _mod_down_case(rng, n, primes)
    gpu = RNSBasis.get(primes, n, "cuda")
    gpu_args = (x.cuda(), c.cuda(), 2, *(t.cuda() for t in consts), gpu.moduli, gpu.ntt_table)
    for k in _elements(n, rng)[:4]:
        expected = ops.mod_down_ntt(x, c, 2, *consts, basis.moduli, basis.ntt_table, add, add_galois=k)
        for name, plan in KERNEL_PLANS.items():
            got = ops.mod_down_ntt(*gpu_args, add.cuda(), add_galois=k, plan=plan).cpu()
            assert torch.equal(got, expected), (k, name)
