"""seed= is for tests: a context that meets 128-bit security refuses a fixed seed (anyone who knows
it could regenerate the secret key or an encryption's randomness) unless FHE_CORE_TEST_SEEDS=1
opts in; tiny insecure rings take seeds freely and reproduce their objects."""
import pytest
import torch

from fhe_core import rlwe
from fhe_core.errors import SecurityError
from fhe_core.params import preset
from fhe_core.ring import generate_primes
from fhe_core.rlwe.sampling import TEST_SEEDS_ENV

SEED = bytes(range(32))


@pytest.fixture(scope="module")
def secure_ctx():
    """N = 2^11 with log2(QP) ~ 45 <= 54: within the HE Standard's 128-bit bound, and small."""
    q, p = generate_primes([20, 25], 1 << 11)
    ctx = rlwe.RLWEContext(1 << 11, [q], [p])
    assert ctx.meets_128_bits
    return ctx


@pytest.fixture(scope="module")
def tiny_ctx():
    ctx = rlwe.RLWEContext.from_params(preset("N10QP241L3D4Insecure", allow_insecure=True))
    assert not ctx.meets_128_bits
    return ctx


def _seeded_calls(ctx, sk, pk):
    m = torch.zeros((ctx.max_level + 1, ctx.n), dtype=torch.int64)
    return {
        "gen_secret_key": lambda: rlwe.gen_secret_key(ctx, seed=SEED),
        "gen_public_key": lambda: rlwe.gen_public_key(ctx, sk, seed=SEED),
        "gen_switching_key": lambda: rlwe.gen_switching_key(ctx, sk, sk, seed=SEED),
        "gen_relin_key": lambda: rlwe.gen_relin_key(ctx, sk, seed=SEED),
        "gen_galois_key": lambda: rlwe.gen_galois_key(ctx, sk, 5, seed=SEED),
        "encrypt_sk": lambda: rlwe.encrypt_sk(ctx, sk, m, ctx.max_level, seed=SEED),
        "encrypt_pk": lambda: rlwe.encrypt_pk(ctx, pk, m, ctx.max_level, seed=SEED),
    }


def test_a_secure_context_refuses_fixed_seeds(secure_ctx, monkeypatch):
    monkeypatch.delenv(TEST_SEEDS_ENV, raising=False)
    sk = rlwe.gen_secret_key(secure_ctx)  # OS randomness: fine
    pk = rlwe.gen_public_key(secure_ctx, sk)
    for op, call in _seeded_calls(secure_ctx, sk, pk).items():
        with pytest.raises(SecurityError, match=f"^{op}: seed= fixes the randomness"):
            call()
    with pytest.raises(SecurityError, match="^gen_relin_key: "):  # the sub-seeds of a key set too
        rlwe.gen_eval_keys(secure_ctx, sk, [5], seed=SEED)


def test_the_test_opt_in_reproduces_objects_on_a_secure_context(secure_ctx, monkeypatch):
    monkeypatch.setenv(TEST_SEEDS_ENV, "1")
    first, again = rlwe.gen_secret_key(secure_ctx, seed=SEED), rlwe.gen_secret_key(secure_ctx, seed=SEED)
    assert torch.equal(first.data, again.data)
    monkeypatch.setenv(TEST_SEEDS_ENV, "yes")  # only "1" opts in
    with pytest.raises(SecurityError):
        rlwe.gen_secret_key(secure_ctx, seed=SEED)


def test_an_insecure_test_ring_takes_seeds(tiny_ctx, monkeypatch):
    monkeypatch.delenv(TEST_SEEDS_ENV, raising=False)
    sk = rlwe.gen_secret_key(tiny_ctx, seed=SEED)
    assert torch.equal(sk.data, rlwe.gen_secret_key(tiny_ctx, seed=SEED).data)
    pk = rlwe.gen_public_key(tiny_ctx, sk, seed=SEED)
    for call in _seeded_calls(tiny_ctx, sk, pk).values():
        call()
