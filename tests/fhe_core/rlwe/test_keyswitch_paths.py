"""The two compositions of ModUp for large digits (ops.kernel_variant "mod_up": 1 = one Conv and one
NTT over every digit, 0 = per digit and per run of rows) give the same digits bit for bit, on the
CPU and against the CUDA build; and the NTT's row skipping that the first one relies on."""
import pytest
import torch

from fhe_core import ops, rlwe
from fhe_core.rlwe import keyswitch
from fhe_core.ring import RNSBasis, generate_primes, shoup_constants
from fhe_reference import fresh_rng, random_residues
from rlwe_helpers import Shape, context, fixed_seed

# alpha = 5 > BATCHED_MODUP_MAX_ALPHA: 12 primes of Q in digits of 5, 5, 2
LARGE_DIGITS = Shape(10, (40,) * 12, (50,) * 5)
# the same with 50- and 60-bit primes (conv 3-8 leave ModUp's and ModDown's conversions lazy before their
# NTTs; LARGE_DIGITS' 40-bit ones too, also above the 2^32 edge of their fast reduction)
WIDE_PRIMES = Shape(10, (50,) * 12, (60,) * 5)


def _key_switch_outputs(ctx, d, key, level, *, mod_up: int, conv: int = 1, mod_down: int = 1):
    """(digits, key switch) with the given variants; mod_up = 1 takes the all-digit path on the CPU
    as well (which by itself uses it on CUDA only)."""
    with ops.use_kernel_variant("mod_up", mod_up), ops.use_kernel_variant("conv", conv), \
            ops.use_kernel_variant("mod_down", mod_down), pytest.MonkeyPatch.context() as patch:
        patch.setattr(keyswitch, "_mod_up_all_digits_at_once", lambda ctx: mod_up == 1)
        return (rlwe.decompose_mod_up(ctx, d, level).cpu(), rlwe.key_switch(ctx, d, key, level).cpu())


def _inputs(ctx, level, rng):
    t = ctx.tables(level)
    d = random_residues(rng, t.q.primes, n=ctx.n)
    d[:, 0] = t.q.moduli[:, 0] - 1
    return t.q.ntt(d.to(ctx.device))


@pytest.mark.parametrize("level", [11, 10, 6, 4, 0])
def test_mod_up_paths_are_bit_identical_on_cpu(level):
    """At the top level, with a short last digit of every length, with one digit only (level 4)."""
    rng, _ = fresh_rng()
    ctx = context(LARGE_DIGITS)
    assert ctx.alpha == 5 and ctx.digit_count(level) == -(-(level + 1) // 5)
    sk = rlwe.gen_secret_key(ctx, seed=fixed_seed("paths/sk"))
    key = rlwe.gen_eval_keys(ctx, sk, [], seed=fixed_seed("paths/evk")).relin_key("t")
    d = _inputs(ctx, level, rng)
    fused = _key_switch_outputs(ctx, d, key, level, mod_up=1, mod_down=1)
    per_digit = _key_switch_outputs(ctx, d, key, level, mod_up=0, mod_down=0)
    assert torch.equal(fused[0], per_digit[0]) and torch.equal(fused[1], per_digit[1])


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [LARGE_DIGITS, WIDE_PRIMES], ids=lambda s: s.id)
@pytest.mark.parametrize("level", [11, 10, 6, 0])
def test_mod_up_paths_are_bit_identical_on_cuda(level, shape):
    """Every combination of the CUDA variants against the CPU's per-digit composition."""
    rng, _ = fresh_rng()
    cpu, gpu = context(shape), context(shape, "cuda")
    sk = rlwe.gen_secret_key(cpu, seed=fixed_seed("paths/sk"))
    keys = rlwe.gen_eval_keys(cpu, sk, [], seed=fixed_seed("paths/evk"))
    sk_gpu = rlwe.gen_secret_key(gpu, seed=fixed_seed("paths/sk"))
    keys_gpu = rlwe.gen_eval_keys(gpu, sk_gpu, [], seed=fixed_seed("paths/evk"))
    d = _inputs(cpu, level, rng)
    expected = _key_switch_outputs(cpu, d, keys.relin_key("t"), level, mod_up=0, mod_down=0)
    for variants in [(1, 1, 1), (0, 1, 0), (1, 0, 1), (0, 0, 0), (0, 1, 1), (1, 2, 1), (0, 2, 0), (1, 3, 1),
                     (0, 3, 0), (1, 4, 1), (0, 4, 1), (1, 5, 1), (0, 5, 0), (1, 6, 1), (0, 6, 0), (1, 7, 1),
                     (1, 8, 1), (0, 8, 0)]:
        mod_up, conv, mod_down = variants
        got = _key_switch_outputs(gpu, d.cuda(), keys_gpu.relin_key("t"), level, mod_up=mod_up, conv=conv,
                                  mod_down=mod_down)
        assert torch.equal(got[0], expected[0]), f"(mod_up, conv, mod_down) = {variants}: digits"
        assert torch.equal(got[1], expected[1]), f"(mod_up, conv, mod_down) = {variants}: key switch"


@pytest.mark.parametrize("device", [pytest.param("cpu"), pytest.param("cuda", marks=pytest.mark.gpu)])
def test_mod_down_ntt_is_ntt_then_sub_mul_const(device):
    """ops.mod_down_ntt == NTT, then (c - .) * consts per batch, in place and not, and with an addend
    on the first component."""
    rng, _ = fresh_rng()
    n, p_rows = 2048, 3
    primes = generate_primes([61] * p_rows + [50] * 5, n)
    basis = RNSBasis.get(primes[p_rows:], n, device)
    x = random_residues(rng, basis.primes, (2,), n, device)
    c = random_residues(rng, primes, (2,), n, device)
    consts, shoup = shoup_constants([int(rng.integers(1, q)) for q in basis.primes], basis.primes, device)
    ntt_x = basis.ntt(x)
    expected = torch.stack([ops.sub_mul_const(c[b, p_rows:], ntt_x[b], consts, shoup, basis.moduli) for b in range(2)])
    got = ops.mod_down_ntt(x, c, p_rows, consts, shoup, basis.moduli, basis.ntt_table)
    in_place = x.clone()
    ops.mod_down_ntt(in_place, c, p_rows, consts, shoup, basis.moduli, basis.ntt_table, out=in_place)
    assert torch.equal(got, expected) and torch.equal(in_place, expected)
    addend = random_residues(rng, basis.primes, (1,), n, device)  # added to the first component only
    with_add = ops.mod_down_ntt(x, c, p_rows, consts, shoup, basis.moduli, basis.ntt_table, addend)
    assert torch.equal(with_add[0], ops.add(expected[0], addend[0], basis.moduli))
    assert torch.equal(with_add[1], expected[1])
    with pytest.raises(RuntimeError, match="mod_down_ntt: c must be"):
        ops.mod_down_ntt(x, c[:, 1:], p_rows, consts, shoup, basis.moduli, basis.ntt_table)


@pytest.mark.parametrize("device", [pytest.param("cpu"), pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("forward", [True, False])
def test_ntt_skip_leaves_rows_alone(device, forward):
    """skip = (begin, stride, length): per batch b, rows begin + b*stride ... + length - 1 keep out's
    values (in place: the input's); every other row equals the plain transform."""
    rng, _ = fresh_rng()
    n = 1024
    basis = RNSBasis.get(generate_primes([50] * 7, n), n, device)
    x = random_residues(rng, basis.primes, (3,), n, device)
    transform = basis.ntt if forward else basis.intt
    fn = ops.ntt if forward else ops.intt
    full = transform(x)
    skip = (2, 2, 3)  # batch 0: rows 2-4, batch 1: rows 4-6, batch 2: rows 6-8 (only 6 exists)
    skipped = {(0, 2), (0, 3), (0, 4), (1, 4), (1, 5), (1, 6), (2, 6)}
    in_place = x.clone()
    fn(in_place, basis.moduli, basis.ntt_table, skip=skip, out=in_place)
    functional = fn(x, basis.moduli, basis.ntt_table, skip=skip)
    for b in range(3):
        for r in range(7):
            want = x[b, r] if (b, r) in skipped else full[b, r]
            assert torch.equal(in_place[b, r], want) and torch.equal(functional[b, r], want), (b, r)
    with pytest.raises(RuntimeError, match="skip must be \\(begin, stride, length\\)"):
        fn(x, basis.moduli, basis.ntt_table, skip=(1, 2))


@pytest.mark.parametrize("device", [pytest.param("cpu"), pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("forward", [True, False])
def test_ntt_reads_a_strided_batch(device, forward):
    """ops.ntt / intt of c[:, :l] (a strided batch of contiguous [l, N] blocks) == of its contiguous
    copy; in place on a strided view is refused."""
    rng, _ = fresh_rng()
    n = 1024
    basis = RNSBasis.get(generate_primes([50] * 3, n), n, device)
    c = random_residues(rng, list(basis.primes) * 3, (2,), n, device)  # [2, 9, N]; rows 0-2 are the view
    fn = ops.ntt if forward else ops.intt
    got = fn(c[:, :3], basis.moduli, basis.ntt_table)
    assert torch.equal(got, fn(c[:, :3].contiguous(), basis.moduli, basis.ntt_table))
    view = c[:, :3]
    with pytest.raises(RuntimeError, match="contiguous \\[limbs, N\\] blocks"):
        fn(view, basis.moduli, basis.ntt_table, out=view)


@pytest.mark.parametrize("level", [11, 4])
def test_mod_down_paths_with_an_addend_are_bit_identical_on_cpu(level):
    """relinearize, apply_galois and apply_galois_hoisted add (d0, d1) or sigma(c0) in ModDown's last
    step: inside ops.mod_down_ntt (mod_down = 1) or by a separate ops.add (mod_down = 0, the path the
    other tests never take with an addend). Both give the same ciphertexts bit for bit."""
    rng, _ = fresh_rng()
    ctx = context(LARGE_DIGITS)
    sk = rlwe.gen_secret_key(ctx, seed=fixed_seed("paths/sk"))
    elements = [rlwe.galois_element_for_rotation(r, ctx.n) for r in (1, 3)]
    keys = rlwe.gen_eval_keys(ctx, sk, elements, seed=fixed_seed("paths/evk"))
    degree2 = rlwe.Ciphertext(data=torch.stack([_inputs(ctx, level, rng) for _ in range(3)]), level=level,
                              params_id=ctx.params_id)
    degree1 = degree2.replace(data=degree2.data[:2].clone())
    outputs = []
    for mod_down in (1, 0):
        with ops.use_kernel_variant("mod_down", mod_down):
            hoisted = rlwe.apply_galois_hoisted(ctx, degree1, elements, keys)
            outputs.append([rlwe.relinearize(ctx, degree2, keys).data,
                            rlwe.apply_galois(ctx, degree1, elements[0], keys).data,
                            *(hoisted[k].data for k in elements)])
    for name, fused, separate in zip(["relinearize", "apply_galois", "hoisted 1", "hoisted 3"], *outputs):
        assert torch.equal(fused, separate), name


def _rotations(ctx, degree1, elements, keys, *, galois: int):
    """apply_galois and apply_galois_hoisted with sigma_k read inside the key switch (galois 1) or by
    automorphism passes first (0); on the CPU the fused composition is forced (it runs there, unused)."""
    with pytest.MonkeyPatch.context() as patch:
        if ctx.device.type == "cpu":
            patch.setattr(keyswitch, "_mod_up_all_digits_at_once", lambda ctx: galois > 0)
            patch.setattr(keyswitch, "_galois_in_key_switch", lambda ctx: galois > 0)
        with ops.use_kernel_variant("galois", galois):
            hoisted = rlwe.apply_galois_hoisted(ctx, degree1, elements, keys)
            return [*(rlwe.apply_galois(ctx, degree1, k, keys).data.cpu() for k in elements),
                    *(hoisted[k].data.cpu() for k in elements)]


@pytest.mark.parametrize("level", [11, 4])
def test_galois_in_key_switch_is_bit_identical_on_cpu(level):
    """A rotation with sigma_k read by ModUp's inverse NTT and ModDown's last store (ops.intt_galois,
    mod_down_ntt's add_galois) == automorphism_ntt of both components first, bit for bit."""
    rng, _ = fresh_rng()
    ctx = context(LARGE_DIGITS)
    sk = rlwe.gen_secret_key(ctx, seed=fixed_seed("paths/sk"))
    elements = [rlwe.galois_element_for_rotation(r, ctx.n) for r in (1, 3)] + [2 * ctx.n - 1]
    keys = rlwe.gen_eval_keys(ctx, sk, elements, seed=fixed_seed("paths/evk"))
    degree1 = rlwe.Ciphertext(data=torch.stack([_inputs(ctx, level, rng) for _ in range(2)]), level=level,
                              params_id=ctx.params_id)
    fused = _rotations(ctx, degree1, elements, keys, galois=1)
    separate = _rotations(ctx, degree1, elements, keys, galois=0)
    for i, (a, b) in enumerate(zip(fused, separate)):
        assert torch.equal(a, b), i


@pytest.mark.gpu
@pytest.mark.parametrize("level", [11, 4])
def test_galois_in_key_switch_is_bit_identical_on_cuda(level):
    """On CUDA, galois 1 (default) and 0, on every NTT variant (0: intt_galois's automorphism fallback) ==
    the CPU, bit for bit."""
    rng, _ = fresh_rng()
    cpu, gpu = context(LARGE_DIGITS), context(LARGE_DIGITS, "cuda")
    elements = [rlwe.galois_element_for_rotation(r, cpu.n) for r in (1, 3)] + [2 * cpu.n - 1]
    sk = rlwe.gen_secret_key(cpu, seed=fixed_seed("paths/sk"))
    keys = rlwe.gen_eval_keys(cpu, sk, elements, seed=fixed_seed("paths/evk"))
    sk_gpu = rlwe.gen_secret_key(gpu, seed=fixed_seed("paths/sk"))
    keys_gpu = rlwe.gen_eval_keys(gpu, sk_gpu, elements, seed=fixed_seed("paths/evk"))
    data = torch.stack([_inputs(cpu, level, rng) for _ in range(2)])
    degree1 = rlwe.Ciphertext(data=data, level=level, params_id=cpu.params_id)
    expected = _rotations(cpu, degree1, elements, keys, galois=0)
    on_gpu = degree1.replace(data=data.cuda())
    for variant in (6, 5, 4, 3, 2, 1, 0):
        with ops.use_kernel_variant("ntt", variant):
            for galois in (1, 0):
                got = _rotations(gpu, on_gpu, elements, keys_gpu, galois=galois)
                for i, (a, b) in enumerate(zip(got, expected)):
                    assert torch.equal(a, b), (variant, galois, i)
