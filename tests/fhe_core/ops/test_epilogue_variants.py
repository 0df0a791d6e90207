"""ModDown's forward rows kernel variants (ops.kernel_variant "epilogue", issue 14 session 5): 1 copies the epilogue's
operands (c, add or its sigma_k gather) into shared memory at the kernel's start, 2 also truncates the rows stages'
Shoup quotients, 3 truncates them alone; 4 prefetches the first round's twiddles in ModUp's inverse rows kernels
(intt_product, intt_galois); 5 loads the addend with c, 6 also c before the last barrier, 7 is 5 with the last
round's twiddles prefetched into L1 (also in the plain forward NTT). Every value against variant 0 and the CPU build,
bit for bit: ops.mod_down_ntt with and without an addend (plain and through sigma_k), the plain forward NTT,
intt_product and intt_galois, primes on both sides of the truncated rows' limit (5 + 4 log N) q < 2^64 and a 61-bit
prime (Harvey's butterflies), residues at q - 1 (and 4q - 1 for the forward's inputs), and HRotate / HMult at a small
preset."""
import pytest
import torch

from fhe_core import ckks, ops, rlwe
from fhe_core.params import preset
from fhe_core.ring import RNSBasis, generate_primes, is_prime, shoup_constants
from fhe_reference import fresh_rng, random_residues

EPILOGUE_VARIANTS = tuple(range(8))


def test_epilogue_variant_is_read_set_and_checked():
    before = ops.kernel_variant("epilogue")
    assert before in EPILOGUE_VARIANTS
    with ops.use_kernel_variant("epilogue", 7 - before):
        assert ops.kernel_variant("epilogue") == 7 - before
    assert ops.kernel_variant("epilogue") == before
    with pytest.raises(RuntimeError, match="epilogue is 0 \\(reference\\) to 7, got 8"):
        ops.kernel_variant("epilogue", 8)


def _prime_near(limit: int, n: int, above: bool) -> int:
    """The prime q = 1 mod 2N nearest below (or above) limit."""
    q = limit - (limit - 1) % (2 * n) + (2 * n if above else 0)
    while not is_prime(q):
        q += 2 * n if above else -2 * n
    return q


def _primes(log_n: int) -> list[int]:
    """The largest prime with (5 + 4 log N) q < 2^64 (truncated rows), the smallest above it (truncated columns,
    lazy rows), a 61-bit one (Harvey's butterflies in both kernels) and a 40-bit one (the preset's Q primes)."""
    n = 1 << log_n
    limit = (2 ** 64 - 1) // (5 + 4 * log_n)
    return [_prime_near(limit, n, above=False), _prime_near(limit + 1, n, above=True),
            _prime_near(2 ** 61 - 1, n, above=False), *generate_primes([40], n)]


@pytest.mark.gpu
@pytest.mark.parametrize("log_n", [11, 16, 17])
def test_mod_down_ntt_every_epilogue_variant(log_n):
    """mod_down_ntt over 3 batches (an addend for the first one: blocks with and without it in one launch), plain,
    with the addend and with sigma_k(addend), c and the addend at q - 1 in places, in place: every epilogue variant
    == variant 0 == the CPU build."""
    rng, _ = fresh_rng()
    n, p_rows = 1 << log_n, 2
    primes = _primes(log_n)
    cpu, gpu = RNSBasis.get(primes, n, "cpu"), RNSBasis.get(primes, n, "cuda")
    q_col = cpu.moduli[:, :1]
    x = random_residues(rng, primes, (3,), n)
    x[2, :, : n // 2] = q_col - 1
    c = random_residues(rng, generate_primes([61] * p_rows, n) + primes, (3,), n)
    c[0, p_rows:, :64] = q_col - 1
    c[1, p_rows:, :] = 0
    add = random_residues(rng, primes, (1,), n)
    add[0, :, n // 2:] = q_col - 1
    consts = [int(rng.integers(1, q)) for q in primes]
    consts[0] = primes[0] - 1
    k_cpu, k_gpu = shoup_constants(consts, primes), shoup_constants(consts, primes, "cuda")
    galois = 2 * n - 1 if log_n == 11 else 5
    cases = {"plain": (None, 1), "add": (add, 1), "galois": (add, galois)}
    for label, (addend, k) in cases.items():
        expected = ops.mod_down_ntt(x, c, p_rows, *k_cpu, cpu.moduli, cpu.ntt_table, addend, add_galois=k)
        for variant in EPILOGUE_VARIANTS:
            with ops.use_kernel_variant("epilogue", variant):
                gpu_add = None if addend is None else addend.cuda()
                in_place = x.cuda()
                ops.mod_down_ntt(in_place, c.cuda(), p_rows, *k_gpu, gpu.moduli, gpu.ntt_table, gpu_add,
                                 add_galois=k, out=in_place)
            assert torch.equal(in_place.cpu(), expected), (label, variant)


@pytest.mark.gpu
@pytest.mark.parametrize("log_n", [11, 16])
def test_forward_ntt_every_epilogue_variant(log_n):
    """The plain forward NTT (variants 2 and 3 truncate its rows stages too) with inputs at q - 1 and 4q - 1 (the
    forward accepts [0, 4q)), on the same primes: == the CPU build; the inverse is untouched."""
    rng, _ = fresh_rng()
    n = 1 << log_n
    primes = _primes(log_n)
    cpu, gpu = RNSBasis.get(primes, n, "cpu"), RNSBasis.get(primes, n, "cuda")
    a = random_residues(rng, primes, (2,), n)
    q_col = cpu.moduli[:, :1]
    a[0, :, : n // 2] = q_col - 1
    a[1, :, : n // 2] = 4 * q_col - 1  # 4q < 2^63 for every prime here
    expected = cpu.ntt(a)
    for variant in EPILOGUE_VARIANTS:
        with ops.use_kernel_variant("epilogue", variant):
            assert torch.equal(gpu.ntt(a.cuda()).cpu(), expected), variant


@pytest.mark.gpu
@pytest.mark.parametrize("log_n", [11, 16])
def test_inverse_products_and_galois_every_epilogue_variant(log_n):
    """intt_product (HMult's ModUp input a1 b1) and intt_galois (HRotate's sigma_k(c1)), the inverse rows kernels of
    variant 4, with operands at q - 1 and a 61-bit prime (the reducing inverse): == the CPU build, both outputs."""
    rng, _ = fresh_rng()
    n = 1 << log_n
    primes = _primes(log_n)
    cpu, gpu = RNSBasis.get(primes, n, "cpu"), RNSBasis.get(primes, n, "cuda")
    q_col = cpu.moduli[:, :1]
    a, b = random_residues(rng, primes, (2,), n), random_residues(rng, primes, (2,), n)
    a[0, :, : n // 2] = q_col - 1
    b[0, :, : n // 4] = q_col - 1
    expected_product = ops.intt_product(a, b, cpu.moduli, cpu.ntt_table)
    expected_galois = ops.intt_galois(a, cpu.moduli, cpu.ntt_table, 5)
    for variant in EPILOGUE_VARIANTS:
        with ops.use_kernel_variant("epilogue", variant):
            product = ops.intt_product(a.cuda(), b.cuda(), gpu.moduli, gpu.ntt_table)
            galois = ops.intt_galois(a.cuda(), gpu.moduli, gpu.ntt_table, 5)
        for got, want, label in ((product, expected_product, "product"), (galois, expected_galois, "galois")):
            assert torch.equal(got[0].cpu(), want[0]), (label, variant)
            assert torch.equal(got[1].cpu(), want[1]), (label, variant, "stored")


def _seed(label: str) -> bytes:
    return label.encode().ljust(32, b"\0")  # a fixed seed: tests only


def _evaluator(device: str) -> tuple[ckks.Evaluator, rlwe.SecretKey]:
    """The same keys on either device (fixed seeds)."""
    params = preset("N12QP483L6D3Insecure", device=device, allow_insecure=True)
    ctx = ckks.rlwe_context(params)
    sk = rlwe.gen_secret_key(ctx, seed=_seed("epilogue/sk"))
    keys = rlwe.gen_eval_keys(ctx, sk, ckks.galois_elements(params.n, [1, 3]), seed=_seed("epilogue/evk"))
    return ckks.Evaluator(params, keys), sk


def _ops(ev, a, b):
    return [ev.rotate(a, 1), ev.rotate(b, 3), ev.mul_relin(a, a), ev.mul_relin(b, b)]


@pytest.mark.gpu
def test_rotate_and_mul_relin_every_epilogue_variant():
    """HRotate (ModDown's store adds sigma_k(c0)) and HMult + relin (no addend) at a small preset, at the top level
    and one below, every epilogue variant == the CPU, bit for bit."""
    ev, sk = _evaluator("cpu")
    encoder, encryptor = ckks.Encoder(ev.params), ckks.Encryptor(ev.params, sk)
    rng, _ = fresh_rng()
    z = rng.uniform(-1, 1, ev.params.slots) + 1j * rng.uniform(-1, 1, ev.params.slots)
    a = encryptor.encrypt(encoder.encode(z))
    b = encryptor.encrypt(encoder.encode(z[::-1].copy(), level=4))
    expected = _ops(ev, a, b)
    ev_gpu = _evaluator("cuda")[0]
    a_gpu, b_gpu = a.replace(data=a.data.cuda()), b.replace(data=b.data.cuda())
    for variant in EPILOGUE_VARIANTS:
        with ops.use_kernel_variant("epilogue", variant):
            got = _ops(ev_gpu, a_gpu, b_gpu)
        for i, (x, y) in enumerate(zip(got, expected)):
            assert (x.level, x.scale) == (y.level, y.scale), (variant, i)
            assert torch.equal(x.data.cpu(), y.data), (variant, i)
