"""The two compositions of ModUp for large digits (KernelPlan.mod_up_in_one_launch: one Conv and one NTT over every
digit; the reference: per digit and per run of rows) give the same digits bit for bit, on the CPU and against the CUDA
build with every plan; the additions a key switch makes in ModDown's last store (relinearization's (d0, d1), a
rotation's sigma_k(c0), with sigma_k(c1) read by ModUp's inverse NTT) equal separate passes; and the NTT's row skipping
that the one-launch ModUp relies on."""
import pytest
import torch

from fhe_core import ops, rlwe
from fhe_core.ring import RNSBasis, generate_primes, shoup_constants
from fhe_reference import fresh_rng, random_residues
from plan_cases import KERNEL_PLANS, REFERENCE, TUNED
from rlwe_helpers import Shape, context, fixed_seed

# alpha = 5 > BATCHED_MODUP_MAX_ALPHA: 12 primes of Q in digits of 5, 5, 2
LARGE_DIGITS = Shape(10, (40,) * 12, (50,) * 5)
# the same with 50- and 60-bit primes (the tensor-core Conv leaves ModUp's and ModDown's conversions lazy before
# their NTTs; LARGE_DIGITS' 40-bit ones too, also above the 2^32 edge of their fast reduction)
WIDE_PRIMES = Shape(10, (50,) * 12, (60,) * 5)
# every plan, and the tuned kernels under the per-digit ModUp (bconv and NTT on the runs of rows)
PLANS = {**KERNEL_PLANS, "per digit, tuned kernels": TUNED.replace(mod_up_in_one_launch=False,
                                                                   inner_product_in_mod_up=False)}


def _key_switch_outputs(ctx, d, key, level):
    """(digits, key switch) in ctx (its plan)."""
    return rlwe.decompose_mod_up(ctx, d, level).cpu(), rlwe.key_switch(ctx, d, key, level).cpu()


def _inputs(ctx, level, rng):
    t = ctx.tables(level)
    d = random_residues(rng, t.q.primes, n=ctx.n)
    d[:, 0] = t.q.moduli[:, 0] - 1
    return t.q.ntt(d.to(ctx.device))


@pytest.mark.parametrize("level", [11, 10, 6, 4, 0])
def test_mod_up_paths_are_bit_identical_on_cpu(level):
    """At the top level, with a short last digit of every length, with one digit only (level 4)."""
    rng, _ = fresh_rng()
    ctx = context(LARGE_DIGITS, plan=REFERENCE)
    one_launch = context(LARGE_DIGITS, plan=REFERENCE.replace(mod_up_in_one_launch=True))
    assert ctx.alpha == 5 and ctx.digit_count(level) == -(-(level + 1) // 5)
    sk = rlwe.gen_secret_key(ctx, seed=fixed_seed("paths/sk"))
    key = rlwe.gen_eval_keys(ctx, sk, [], seed=fixed_seed("paths/evk")).relin_key("t")
    d = _inputs(ctx, level, rng)
    fused = _key_switch_outputs(one_launch, d, key, level)
    per_digit = _key_switch_outputs(ctx, d, key, level)
    assert torch.equal(fused[0], per_digit[0]) and torch.equal(fused[1], per_digit[1])


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [LARGE_DIGITS, WIDE_PRIMES], ids=lambda s: s.id)
@pytest.mark.parametrize("level", [11, 10, 6, 0])
def test_mod_up_paths_are_bit_identical_on_cuda(level, shape):
    """Every plan's ModUp and key switch on CUDA against the CPU's per-digit composition."""
    rng, _ = fresh_rng()
    cpu = context(shape)
    sk = rlwe.gen_secret_key(cpu, seed=fixed_seed("paths/sk"))
    keys = rlwe.gen_eval_keys(cpu, sk, [], seed=fixed_seed("paths/evk"))
    d = _inputs(cpu, level, rng)
    expected = _key_switch_outputs(cpu, d, keys.relin_key("t"), level)
    for name, plan in PLANS.items():
        gpu = context(shape, "cuda", plan)
        sk_gpu = rlwe.gen_secret_key(gpu, seed=fixed_seed("paths/sk"))
        keys_gpu = rlwe.gen_eval_keys(gpu, sk_gpu, [], seed=fixed_seed("paths/evk"))
        got = _key_switch_outputs(gpu, d.cuda(), keys_gpu.relin_key("t"), level)
        assert torch.equal(got[0], expected[0]), f"{name}: digits"
        assert torch.equal(got[1], expected[1]), f"{name}: key switch"


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


def _switch_cases(ctx, level, rng):
    """(keys, the Galois elements, a degree-2 and a degree-1 ciphertext at level) for the addend tests."""
    sk = rlwe.gen_secret_key(ctx, seed=fixed_seed("paths/sk"))
    elements = [rlwe.galois_element_for_rotation(r, ctx.n) for r in (1, 3)] + [2 * ctx.n - 1]
    keys = rlwe.gen_eval_keys(ctx, sk, elements, seed=fixed_seed("paths/evk"))
    degree2 = rlwe.Ciphertext(data=torch.stack([_inputs(ctx, level, rng) for _ in range(3)]), level=level,
                              params_id=ctx.params_id)
    return keys, elements, degree2, degree2.replace(data=degree2.data[:2].clone())


def _switches(ctx, keys, elements, degree2, degree1):
    """relinearize, apply_galois and apply_galois_hoisted in ctx."""
    hoisted = rlwe.apply_galois_hoisted(ctx, degree1, elements, keys)
    return [rlwe.relinearize(ctx, degree2, keys).data.cpu(),
            *(rlwe.apply_galois(ctx, degree1, k, keys).data.cpu() for k in elements),
            *(hoisted[k].data.cpu() for k in elements)]


@pytest.mark.parametrize("level", [11, 4])
def test_mod_down_addends_are_the_separate_passes_on_cpu(level):
    """relinearize, apply_galois and apply_galois_hoisted add (d0, d1) or sigma_k(c0) in ModDown's last step
    (ops.mod_down_ntt's add and add_galois) and read sigma_k(c1) in ModUp's inverse NTT (ops.intt_galois): the same
    ciphertexts, bit for bit, as the separate passes (automorphism_ntt of both components, the key switch of
    sigma_k(c1), ModDown, then ops.add), in either ModUp composition."""
    rng, _ = fresh_rng()
    ctx = context(LARGE_DIGITS, plan=REFERENCE)
    keys, elements, degree2, degree1 = _switch_cases(ctx, level, rng)
    q = ctx.q_at(level)
    d = degree2.data
    expected = [ops.add(d[:2], rlwe.key_switch(ctx, d[2], keys.relin_key("t"), level), q.moduli)]
    for k in elements:  # the rotation: sigma_k of both components first
        permuted = ops.automorphism_ntt(degree1.data, q.moduli, k)
        out = rlwe.key_switch(ctx, permuted[1], keys.galois_key(k, "t"), level)
        out[0] = ops.add(out[0], permuted[0], q.moduli)
        expected.append(out)
    qp = ctx.qp_at(level)
    digits = rlwe.decompose_mod_up(ctx, degree1.data[1], level)
    for k in elements:  # hoisted: the extended digits permuted, then sigma_k(c0) added after ModDown
        extended = rlwe.inner_product(ctx, ops.automorphism_ntt(digits, qp.moduli, k), keys.galois_key(k, "t"), level)
        out = rlwe.mod_down(ctx, extended, level)
        out[0] = ops.add(out[0], ops.automorphism_ntt(degree1.data[0], q.moduli, k), q.moduli)
        expected.append(out)
    for plan in (REFERENCE, REFERENCE.replace(mod_up_in_one_launch=True)):
        got = _switches(context(LARGE_DIGITS, plan=plan), keys, elements, degree2, degree1)
        for i, (a, b) in enumerate(zip(got, expected)):
            assert torch.equal(a, b.cpu()), (plan, i)


@pytest.mark.gpu
@pytest.mark.parametrize("level", [11, 4])
def test_key_switch_addends_on_cuda_every_plan(level):
    """relinearize, apply_galois and apply_galois_hoisted on CUDA with every plan (the reference kernels: the
    automorphism passes inside intt_galois and mod_down_ntt) == the CPU, bit for bit."""
    rng, _ = fresh_rng()
    cpu = context(LARGE_DIGITS)
    keys, elements, degree2, degree1 = _switch_cases(cpu, level, rng)
    expected = _switches(cpu, keys, elements, degree2, degree1)
    for name, plan in PLANS.items():
        gpu = context(LARGE_DIGITS, "cuda", plan)
        keys_gpu = _switch_cases(gpu, level, rng)[0]
        on_gpu = [ct.replace(data=ct.data.cuda()) for ct in (degree2, degree1)]
        got = _switches(gpu, keys_gpu, elements, *on_gpu)
        for i, (a, b) in enumerate(zip(got, expected)):
            assert torch.equal(a, b), (name, i)
