"""Secret- and public-key encryption: decryptions against the exact message (centred CRT), seeds,
and the typed errors of the entry checks."""
import numpy as np
import pytest
import torch

from fhe_core import rlwe
from fhe_core.errors import DomainMismatchError, LevelMismatchError, ParameterError, ParamsMismatchError
from fhe_reference import fresh_rng
from rlwe_helpers import (
    SHAPES, context, decode, encode, fixed_seed, fresh_noise_bound_pk, max_diff, q_modulus, random_poly,
)


def _message(rng: np.random.Generator, ctx, level: int, large: bool) -> list[int]:
    """Small coefficients, or coefficients spread over the whole of Q_l (decryption must not care)."""
    bound = q_modulus(ctx, level) // 2 - 1 if large else 1 << 20
    return random_poly(rng, ctx.n, bound)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.id)
def test_secret_key_encryption_noise_is_the_fresh_error(shape):
    """dec(enc_sk(m)) - m = e with |e|_inf <= eta exactly (CBD support), and e != 0."""
    rng, _ = fresh_rng()
    ctx = context(shape)
    sk = rlwe.gen_secret_key(ctx)
    for level, large in [(ctx.max_level, True), (1, False), (0, True)]:
        m = _message(rng, ctx, level, large)
        ct = rlwe.encrypt_sk(ctx, sk, encode(ctx, m, level), level)
        assert ct.data.shape == (2, level + 1, ctx.n) and ct.is_ntt and ct.level == level
        got = decode(ctx, rlwe.decrypt(ctx, sk, ct), level)
        noise = max_diff(got, m, q_modulus(ctx, level))
        assert 0 < noise <= ctx.error_eta, f"level {level}: |e| = {noise}"


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.id)
def test_public_key_encryption_noise_bound(shape):
    """dec(enc_pk(m)) - m = e u + e0 + e1 s, |.|_inf < 2^6 sqrt(N) (about 17 sigma)."""
    rng, _ = fresh_rng()
    ctx = context(shape)
    sk = rlwe.gen_secret_key(ctx)
    pk = rlwe.gen_public_key(ctx, sk)
    for level, large in [(ctx.max_level, False), (0, True)]:
        m = _message(rng, ctx, level, large)
        ct = rlwe.encrypt_pk(ctx, pk, encode(ctx, m, level), level)
        noise = max_diff(decode(ctx, rlwe.decrypt(ctx, sk, ct), level), m, q_modulus(ctx, level))
        print(f"pk noise at level {level}: {noise} (bound {fresh_noise_bound_pk(ctx)})")
        assert ctx.error_eta < noise < fresh_noise_bound_pk(ctx)


def test_fixed_seeds_are_deterministic_and_os_seeds_differ():
    ctx = context(SHAPES[0])
    level = 2
    sk = rlwe.gen_secret_key(ctx, seed=fixed_seed("sk"))
    assert torch.equal(sk.data, rlwe.gen_secret_key(ctx, seed=fixed_seed("sk")).data)
    pk = rlwe.gen_public_key(ctx, sk, seed=fixed_seed("pk"))
    assert torch.equal(pk.data, rlwe.gen_public_key(ctx, sk, seed=fixed_seed("pk")).data)
    m = encode(ctx, list(range(ctx.n)), level)
    for encrypt, key in ((rlwe.encrypt_sk, sk), (rlwe.encrypt_pk, pk)):
        one = encrypt(ctx, key, m, level, seed=fixed_seed("enc"))
        assert torch.equal(one.data, encrypt(ctx, key, m, level, seed=fixed_seed("enc")).data)
        a, b = encrypt(ctx, key, m, level), encrypt(ctx, key, m, level)
        assert not torch.equal(a.data[0], b.data[0]) and not torch.equal(a.data[1], b.data[1])
        assert not torch.equal(a.data[1], one.data[1])
    assert not torch.equal(sk.data, rlwe.gen_secret_key(ctx).data)



def test_encryption_of_zero_equals_encrypt_pk_of_zeros_and_checks_its_key():
    """encrypt_zero_pk (flooding's fresh encryption, no message to check) gives encrypt_pk's words for the zero
    message with the same seed, at every level, and refuses what encrypt_pk refuses."""
    ctx, other = context(SHAPES[0]), context(SHAPES[1])
    sk = rlwe.gen_secret_key(ctx)
    pk = rlwe.gen_public_key(ctx, sk)
    for level in (ctx.max_level, 0):
        zero = torch.zeros((level + 1, ctx.n), dtype=torch.int64)
        got = rlwe.encrypt_zero_pk(ctx, pk, level, seed=fixed_seed("zero"))
        assert got.data.equal(rlwe.encrypt_pk(ctx, pk, zero, level, seed=fixed_seed("zero")).data)
        assert got.level == level and max(abs(v) for v in decode(ctx, rlwe.decrypt(ctx, sk, got), level)) > 0
    with pytest.raises(ParameterError, match="encrypt_zero_pk: expected a PublicKey"):
        rlwe.encrypt_zero_pk(ctx, sk, 0)
    with pytest.raises(ParamsMismatchError, match="encrypt_zero_pk: the public key belongs"):
        rlwe.encrypt_zero_pk(other, pk, 0)
    with pytest.raises(LevelMismatchError):
        rlwe.encrypt_zero_pk(ctx, pk, ctx.max_level + 1)

def test_entry_checks_raise_typed_errors_naming_the_operation():
    ctx, other = context(SHAPES[0]), context(SHAPES[1])
    sk, sk_other = rlwe.gen_secret_key(ctx), rlwe.gen_secret_key(other)
    m = encode(ctx, [1] * ctx.n, 2)
    with pytest.raises(LevelMismatchError, match="encrypt_sk: the message has 3 limbs, expected 2"):
        rlwe.encrypt_sk(ctx, sk, m, 1)
    with pytest.raises(LevelMismatchError, match="encrypt_sk: level"):
        rlwe.encrypt_sk(ctx, sk, m, ctx.max_level + 1)
    with pytest.raises(ParamsMismatchError, match="encrypt_sk: the secret key belongs to params"):
        rlwe.encrypt_sk(ctx, sk_other, m, 2)
    ct = rlwe.encrypt_sk(ctx, sk, m, 2)
    with pytest.raises(ParamsMismatchError, match="decrypt: the ciphertext belongs"):
        rlwe.decrypt(other, sk_other, ct)
    with pytest.raises(DomainMismatchError, match="decrypt: the ciphertext must be in the NTT domain"):
        rlwe.decrypt(ctx, sk, ct.replace(is_ntt=False))
    with pytest.raises(ParameterError, match="encrypt_pk: expected a PublicKey"):
        rlwe.encrypt_pk(ctx, sk, m, 2)
    with pytest.raises(LevelMismatchError):
        rlwe.Ciphertext(data=ct.data, level=1, params_id=ctx.params_id)
    with pytest.raises(ParameterError, match="encrypt_sk: the message must be an int64 tensor"):
        rlwe.encrypt_sk(ctx, sk, m.to(torch.int32), 2)
