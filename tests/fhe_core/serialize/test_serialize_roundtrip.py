"""Round trips of every object kind: tensors compared exactly, metadata field by field; loaded
keys and ciphertexts decrypt and key-switch exactly like the originals, and the decoded
messages match the numpy inputs; seed-compressed switching keys are half the raw size."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from fhe_core import rlwe, serialize
from fhe_core.ckks import Plaintext
from fhe_core.errors import SecurityError, SerializationError, WrongKindError
from fhe_core.params import Params, preset, preset_literal
from serialize_helpers import split


def _bits(got: np.ndarray, expected: np.ndarray) -> float:
    return float(-np.log2(np.max(np.abs(got - expected))))


def _decode(world, m: torch.Tensor, level: int, scale: float) -> np.ndarray:
    pt = Plaintext(data=m, level=level, scale=scale, params_id=world.params.params_id, slots=world.params.slots)
    return world.encoder.decode(pt)


def _same_tensor(a: torch.Tensor, b: torch.Tensor) -> None:
    assert a.dtype == b.dtype == torch.int64 and a.shape == b.shape and a.device == b.device
    assert torch.equal(a, b)


# ---- params -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["N10QP241L3D4Insecure", "N11QP342L4D3Insecure", "N14QP437L8D9"])
def test_params_round_trip(name):
    params = preset(name, allow_insecure=True)
    loaded = serialize.loads(serialize.dumps(params), params)
    assert loaded == params and loaded.params_id == params.params_id
    assert loaded.q_primes == params.q_primes and loaded.p_primes == params.p_primes
    assert loaded.literal.to_json() == params.literal.to_json()
    assert split(serialize.dumps(params)).payload == params.literal.to_json().encode()


def test_params_without_reference_need_allow_insecure_when_insecure():
    secure, tiny = preset("N14QP437L8D9"), preset("N10QP241L3D4Insecure", allow_insecure=True)
    assert serialize.loads(serialize.dumps(secure)).params_id == secure.params_id
    with pytest.raises(SecurityError):
        serialize.loads(serialize.dumps(tiny))
    assert serialize.loads(serialize.dumps(tiny), allow_insecure=True).params_id == tiny.params_id


def test_params_id_is_recomputed_from_the_literal():
    """The id stored is SHA-256 of the content: a literal built again from its JSON gives it."""
    params = preset("N10QP241L3D4Insecure", allow_insecure=True)
    blob = serialize.dumps(params)
    literal = preset_literal("N10QP241L3D4Insecure")
    fresh = Params.from_literal(literal, allow_insecure=True)
    assert split(blob).params_id.hex() == fresh.params_id


# ---- plaintexts and ciphertexts -----------------------------------------------------------------------

def _check_plaintext(loaded, pt):
    assert isinstance(loaded, Plaintext)
    _same_tensor(loaded.data, pt.data)
    assert (loaded.level, loaded.scale, loaded.slots, loaded.is_ntt, loaded.params_id) == \
           (pt.level, pt.scale, pt.slots, pt.is_ntt, pt.params_id)


def test_plaintext_round_trip(world):
    _check_plaintext(serialize.loads(serialize.dumps(world.pt), world.params), world.pt)


@pytest.mark.parametrize("scale", [2.0 ** 40, 2.0 ** 40 * (1 + 2.0 ** -52), 1234567.890123, 2.0 ** 59 / 3])
def test_plaintext_scale_level_slots_and_domain_are_kept_exactly(world, scale):
    """Scales that are not powers of two survive bit for bit; sparse slots, lower levels and
    coefficient-domain data too."""
    z = np.linspace(-1, 1, 8)
    pt = world.encoder.encode(z, level=1, scale=scale, slots=8)
    coeffs = Plaintext(data=world.params.q_basis(1).intt(pt.data), level=1, scale=scale,
                       params_id=pt.params_id, slots=8, is_ntt=False)
    for original in (pt, coeffs):
        loaded = serialize.loads(serialize.dumps(original), world.params)
        _check_plaintext(loaded, original)
        assert loaded.scale.hex() == scale.hex()
    error = np.max(np.abs(world.encoder.decode(serialize.loads(serialize.dumps(pt), world.params)) - z))
    assert error < max(64 / scale, 2.0 ** -40)  # rounding to integers at this scale, or float64


@pytest.mark.parametrize("level", [3, 0])
def test_ciphertext_round_trip_decrypts_with_a_loaded_secret_key(world, level):
    pt = world.encoder.encode(world.z, level=level)
    ct = rlwe.encrypt_sk(world.ctx, world.sk, pt.data, level)
    loaded_ct = serialize.loads(serialize.dumps(ct), world.params)
    loaded_sk = serialize.loads(serialize.dumps(world.sk), world.params, expect=rlwe.SecretKey)
    _same_tensor(loaded_ct.data, ct.data)
    assert (type(loaded_ct), loaded_ct.level, loaded_ct.is_ntt, loaded_ct.degree, loaded_ct.params_id) == \
           (rlwe.Ciphertext, level, True, 1, world.params.params_id)
    m_loaded = rlwe.decrypt(world.ctx, loaded_sk, loaded_ct)
    _same_tensor(m_loaded, rlwe.decrypt(world.ctx, world.sk, ct))
    assert _bits(_decode(world, m_loaded, level, pt.scale), world.z) >= 25


@pytest.mark.parametrize("level", [3, 1])
def test_fresh_secret_key_ciphertexts_travel_seeded(world, level):
    """A fresh secret-key encryption stores c_0 and its 32-byte uniform seed: half the bytes of
    the full record (and of the packed one), read back bit for bit with c_1 regenerated;
    compress=False and public-key encryptions store both components."""
    pt = world.encoder.encode(world.z, level=level)
    ct = rlwe.encrypt_sk(world.ctx, world.sk, pt.data, level)
    full, seeded = serialize.dumps(ct, compress=False), serialize.dumps(ct)
    components = (level + 1) * world.params.n * 8
    assert len(split(full).payload) == 2 * components and len(split(seeded).payload) == components
    assert split(seeded).meta["uniform_seed"] == ct.uniform_seed.hex()
    assert len(serialize.dumps(ct, packed=True)) < len(serialize.dumps(ct, compress=False, packed=True)) * 0.51
    for blob in (seeded, serialize.dumps(ct, packed=True)):
        loaded = serialize.loads(blob, world.params)
        _same_tensor(loaded.data, ct.data)
        assert loaded.uniform_seed == ct.uniform_seed
    public = rlwe.encrypt_pk(world.ctx, world.pk, pt.data, level)
    assert public.uniform_seed is None and len(split(serialize.dumps(public)).payload) == 2 * components


def test_results_of_operations_are_never_seeded(world):
    """Only the fresh encryption's c_1 is the seed's: any new data drops the seed, so a result
    serializes in full (a seeded record of it would decrypt to something else)."""
    ct = rlwe.encrypt_sk(world.ctx, world.sk, world.pt.data, world.pt.level)
    assert ct.uniform_seed is not None
    relabelled = ct.replace(is_ntt=True)
    assert relabelled.uniform_seed == ct.uniform_seed  # the same data: still the fresh encryption
    for result in (ct.replace(data=ct.data.clone()), world.degree_two(ct),
                   rlwe.apply_galois(world.ctx, ct, rlwe.galois_element_for_rotation(1, world.params.n), world.keys)):
        assert result.uniform_seed is None
        loaded = serialize.loads(serialize.dumps(result), world.params)
        _same_tensor(loaded.data, result.data)


def test_degree_two_ciphertext_round_trip_and_relinearization_with_loaded_keys(world):
    """(ct x ct) stored at degree 2, reloaded, relinearized with reloaded keys: bit-identical to
    the originals, and decrypts to z^2 (numpy) at scale^2."""
    ct2 = world.degree_two(world.ct)
    loaded = serialize.loads(serialize.dumps(ct2), world.params)
    _same_tensor(loaded.data, ct2.data)
    assert loaded.degree == 2
    keys = serialize.loads(serialize.dumps(world.keys), world.params)
    relin = rlwe.relinearize(world.ctx, loaded, keys)
    _same_tensor(relin.data, rlwe.relinearize(world.ctx, ct2, world.keys).data)
    m = rlwe.decrypt(world.ctx, world.sk, relin)
    assert _bits(_decode(world, m, relin.level, world.pt.scale ** 2), world.z ** 2) >= 20


# ---- keys -------------------------------------------------------------------------------------------

def test_secret_key_round_trip(world):
    loaded = serialize.loads(serialize.dumps(world.sk), world.params, expect=rlwe.SecretKey)
    _same_tensor(loaded.data, world.sk.data)
    assert (loaded.seed, loaded.hamming_weight, loaded.params_id) == \
           (world.sk.seed, world.sk.hamming_weight, world.sk.params_id)
    assert torch.equal(rlwe.gen_secret_key(world.ctx, seed=loaded.seed).data, world.sk.data)


def test_public_key_round_trip_encrypts(world):
    loaded = serialize.loads(serialize.dumps(world.pk), world.params)
    _same_tensor(loaded.data, world.pk.data)
    assert loaded.uniform_seed == world.pk.uniform_seed
    ct = rlwe.encrypt_pk(world.ctx, loaded, world.pt.data, world.pt.level)
    m = rlwe.decrypt(world.ctx, world.sk, ct)
    assert _bits(_decode(world, m, ct.level, world.pt.scale), world.z) >= 20


@pytest.mark.parametrize("compress", [True, False])
@pytest.mark.parametrize("which", ["world", "world11"])
def test_switching_keys_round_trip_exactly(request, which, compress):
    """Relin, Galois and plain switching keys: the regenerated a parts equal the originals."""
    w = request.getfixturevalue(which)
    other = rlwe.gen_secret_key(w.ctx)
    originals = [w.keys.relin_key("t"), w.keys.galois_key(w.rotate_one, "t"),
                 rlwe.gen_switching_key(w.ctx, other, w.sk)]
    for key in originals:
        loaded = serialize.loads(serialize.dumps(key, compress=compress), w.params)
        assert type(loaded) is type(key)
        _same_tensor(loaded.data, key.data)
        assert loaded.uniform_seed == key.uniform_seed and loaded.params_id == key.params_id
        assert getattr(loaded, "galois_element", None) == getattr(key, "galois_element", None)


@pytest.mark.parametrize("which", ["world", "world11"])
def test_compressed_keys_are_half_the_raw_size(request, which):
    """Exact sizes from the layout: 88-byte header + metadata + dnum (x2 raw) x (alpha + L + 1) x N
    words; compressed / raw <= 0.5 + 0.1%."""
    w = request.getfixturevalue(which)
    p = w.params
    key = w.keys.relin_key("t")
    raw, packed = serialize.dumps(key, compress=False), serialize.dumps(key)
    words = p.dnum * (p.alpha + p.max_level + 1) * p.n
    assert len(split(raw).payload) == 2 * words * 8 and len(split(packed).payload) == words * 8
    assert len(raw) == 88 + len(split(raw).meta_bytes) + 2 * words * 8
    assert len(packed) / len(raw) <= 0.501
    key_set = serialize.dumps(w.keys)
    assert len(key_set) / len(serialize.dumps(w.keys, compress=False)) <= 0.501


def test_rotations_with_reloaded_keys_match_the_originals(world):
    keys = serialize.loads(serialize.dumps(world.keys), world.params)
    k, conj = world.rotate_one, rlwe.galois_element_for_conjugation(world.params.n)
    for element, expected in ((k, np.roll(world.z, -1)), (conj, np.conj(world.z))):
        got = rlwe.apply_galois(world.ctx, world.ct, element, keys)
        _same_tensor(got.data, rlwe.apply_galois(world.ctx, world.ct, element, world.keys).data)
        m = rlwe.decrypt(world.ctx, world.sk, got)
        assert _bits(_decode(world, m, got.level, world.pt.scale), expected) >= 20
    hoisted = rlwe.apply_galois_hoisted(world.ctx, world.ct, [k, conj], keys)
    reference = rlwe.apply_galois_hoisted(world.ctx, world.ct, [k, conj], world.keys)
    for element in (k, conj):
        _same_tensor(hoisted[element].data, reference[element].data)


def test_eval_key_set_round_trip(world11):
    w = world11
    loaded = serialize.loads(serialize.dumps(w.keys), w.params)
    assert isinstance(loaded, rlwe.EvalKeySet) and loaded.params_id == w.params.params_id
    assert loaded.has_relin and loaded.galois_elements == w.keys.galois_elements == {
        rlwe.galois_element_for_rotation(1, w.params.n), 2 * w.params.n - 1}
    assert loaded.rotation_steps(w.params.n) == ([1], True)
    _same_tensor(loaded.relin_key("t").data, w.keys.relin_key("t").data)
    for k in w.keys.galois_elements:
        _same_tensor(loaded.galois_key(k, "t").data, w.keys.galois_key(k, "t").data)
    meta = split(serialize.dumps(w.keys)).meta
    assert [(e["kind"], e.get("galois_element")) for e in meta["records"]] == \
           [(7, None)] + [(8, k) for k in sorted(w.keys.galois_elements)]


def test_eval_key_sets_without_relin_or_without_any_key(world):
    p = world.params
    only_galois = rlwe.EvalKeySet(p.params_id, galois=[world.keys.galois_key(world.rotate_one, "t")])
    empty = rlwe.EvalKeySet(p.params_id)
    loaded = serialize.loads(serialize.dumps(only_galois), p)
    assert not loaded.has_relin and loaded.galois_elements == {world.rotate_one}
    loaded = serialize.loads(serialize.dumps(empty), p)
    assert not loaded.has_relin and loaded.galois_elements == frozenset()


# ---- API details ------------------------------------------------------------------------------------

def test_file_helpers_round_trip(world, tmp_path):
    path = tmp_path / "keys.fhe"
    size = serialize.dump(world.keys, path)
    assert path.stat().st_size == size and not list(tmp_path.glob(".*.tmp"))
    loaded = serialize.load(path, world.params, expect=rlwe.EvalKeySet)
    assert loaded.galois_elements == world.keys.galois_elements
    assert serialize.load(tmp_path / "keys.fhe", world.params).has_relin


def test_expect_restricts_the_kind(world):
    blob = serialize.dumps(world.keys.relin_key("t"))
    assert isinstance(serialize.loads(blob, world.params, expect=rlwe.SwitchingKey), rlwe.RelinKey)
    assert isinstance(serialize.loads(blob, world.params, expect=(rlwe.Ciphertext, rlwe.RelinKey)), rlwe.RelinKey)
    with pytest.raises(WrongKindError, match="relin_key is not one of the expected: eval_key_set"):
        serialize.loads(blob, world.params, expect=rlwe.EvalKeySet)


def test_dumps_refuses_unknown_types_and_subclasses(world):
    class Scaled(rlwe.Ciphertext):
        pass

    sub = Scaled(data=world.ct.data, level=world.ct.level, params_id=world.ct.params_id)
    for obj in (sub, world.ct.data, "text", None):
        with pytest.raises(SerializationError, match="no format for"):
            serialize.dumps(obj)


def test_loads_needs_params_for_everything_but_params(world):
    with pytest.raises(SerializationError, match="needs the Params"):
        serialize.loads(serialize.dumps(world.ct))


@pytest.mark.gpu
def test_loads_onto_cuda(world):
    loaded = serialize.loads(serialize.dumps(world.keys), world.params, device="cuda")
    relin = loaded.relin_key("t")
    assert relin.data.is_cuda and torch.equal(relin.data.cpu(), world.keys.relin_key("t").data)


@pytest.mark.gpu
def test_seeded_ciphertexts_expand_on_cuda_as_on_the_cpu(world):
    """The server regenerates c_1 where the ciphertext is headed: the same words on the GPU."""
    ct = rlwe.encrypt_sk(world.ctx, world.sk, world.pt.data, world.pt.level)
    loaded = serialize.loads(serialize.dumps(ct, packed=True), world.params, device="cuda")
    assert loaded.data.is_cuda and torch.equal(loaded.data.cpu(), ct.data)


# ---- bit-packed payloads ----------------------------------------------------------------------------

def _widths(t: torch.Tensor) -> list[int]:
    """Per limb (axis -2) the bit length of the largest residue, with Python ints."""
    rows = t.reshape(-1, *t.shape[-2:]).numpy().view(np.uint64)
    return [max(int(v) for v in rows[:, i, :].reshape(-1)).bit_length() for i in range(t.shape[-2])]


@pytest.mark.parametrize("which", ["world", "world11"])
def test_packed_round_trips_of_every_residue_kind(request, which):
    w = request.getfixturevalue(which)
    objects = [w.pt, w.ct, w.degree_two(w.ct), w.sk, w.pk, w.keys.relin_key("t"),
               w.keys.galois_key(w.rotate_one, "t")]
    for obj in objects:
        blob = serialize.dumps(obj, packed=True)
        loaded = serialize.loads(blob, w.params, expect=type(obj))
        _same_tensor(loaded.data, obj.data)
        # what the payload holds: the b parts of a key, c_0 of a seeded (fresh secret-key) ciphertext
        data = obj.data[:, 0] if isinstance(obj, rlwe.SwitchingKey) else \
            obj.data[:1] if isinstance(obj, rlwe.Ciphertext) and obj.uniform_seed else obj.data
        assert split(blob).meta["bits"] == _widths(data)
        words = data.numel() // data.shape[-1] // data.shape[-2]
        seed = 32 if isinstance(obj, rlwe.SecretKey) else 0
        assert len(split(blob).payload) == seed + words * data.shape[-1] * sum(_widths(data)) // 8
    loaded = serialize.loads(serialize.dumps(w.keys, packed=True), w.params)
    _same_tensor(loaded.relin_key("t").data, w.keys.relin_key("t").data)


def test_packed_bit_layout(world):
    """Limb i of component c is one little-endian bit stream: residue j = bits [j w_i, (j+1) w_i)."""
    ct, n = world.ct, world.params.n
    p = split(serialize.dumps(ct, compress=False, packed=True))
    widths = p.meta["bits"]
    data = ct.data.numpy().view(np.uint64)
    at = 0
    for c in range(2):
        for i, w in enumerate(widths):
            stream = int.from_bytes(p.payload[at:at + n * w // 8], "little")
            for j in (0, 1, 7, n // 2 + 3, n - 1):
                assert (stream >> (j * w)) & ((1 << w) - 1) == int(data[c, i, j])
            at += n * w // 8
    assert at == len(p.payload)


def test_packed_keys_are_a_third_smaller(world11):
    """60/40-bit q primes and 61-bit special primes: about 47 bits per residue instead of 64."""
    key = world11.keys.relin_key("t")
    ratio = len(serialize.dumps(key, packed=True)) / len(serialize.dumps(key))
    expected = sum(_widths(key.data[:, 0])) / (64 * key.data.shape[-2])
    assert abs(ratio - expected) < 0.002 and ratio < 0.8


def test_peek_reports_kind_params_id_and_metadata_without_params(world):
    blob = serialize.dumps(world.keys)
    info = serialize.peek(blob)
    assert (info.kind, info.params_id, info.size) == (serialize.Kind.EVAL_KEY_SET, world.params.params_id, len(blob))
    assert {e.get("galois_element") for e in info.metadata["records"]} == {None, *world.keys.galois_elements}
    sk_info = serialize.peek(serialize.dumps(world.sk))
    assert world.sk.seed.hex() not in str(sk_info.metadata)
    with pytest.raises(WrongKindError):
        serialize.peek(blob, expect=rlwe.SecretKey)


def test_ckks_ciphertext_record_is_the_rlwe_record_plus_scale_and_slots(world, monkeypatch):
    """A stand-in for the CKKS ciphertext (an rlwe Ciphertext with scale and slots), registered
    the way the real one will be: same payload, two more metadata fields, exact round trip."""
    from dataclasses import dataclass

    from fhe_core.serialize import api, codecs

    @dataclass(frozen=True, kw_only=True, eq=False)
    class ScaledCiphertext(rlwe.Ciphertext):
        scale: float
        slots: int

    kind = serialize.Kind.CKKS_CIPHERTEXT
    monkeypatch.setitem(api._ENCODERS, ScaledCiphertext, (kind, codecs.encode_scaled_ciphertext))
    monkeypatch.setitem(api._DECODERS, kind, codecs.scaled_ciphertext_decoder(ScaledCiphertext))
    ct = ScaledCiphertext(data=world.ct.data, level=world.ct.level, params_id=world.ct.params_id,
                          scale=world.pt.scale * 1.25, slots=world.pt.slots)
    blob, plain = split(serialize.dumps(ct)), split(serialize.dumps(world.ct, compress=False))
    assert blob.kind == 10 and blob.payload == plain.payload
    assert blob.meta == {**plain.meta, "scale": (world.pt.scale * 1.25).hex(), "slots": world.pt.slots}
    loaded = serialize.loads(serialize.dumps(ct, packed=True), world.params)
    assert type(loaded) is ScaledCiphertext
    assert (loaded.scale, loaded.slots, loaded.level) == (ct.scale, ct.slots, ct.level)
    _same_tensor(loaded.data, ct.data)


# ---- linear key switching's keys ---------------------------------------------------------------------

def test_linear_keys_round_trip_and_switch_like_the_originals():
    """A linear key set (preprocessed keys, residues mod the auxiliary primes) round trips exactly compressed, packed
    and raw; compressed is half of raw (the a parts regenerated and preprocessed on load); the reloaded keys rotate
    to the same words; a hybrid record is refused by the linear parameters, which have another params_id."""
    from fuzz_targets import linear_world, world

    params, keys = linear_world()
    ctx = rlwe.RLWEContext.from_params(params)
    element = rlwe.galois_element_for_rotation(1, params.n)
    for flags in ({}, {"packed": True}, {"compress": False}):
        loaded = serialize.loads(serialize.dumps(keys, **flags), params)
        for key, again in ((keys.relin_key("t"), loaded.relin_key("t")),
                           (keys.galois_key(element, "t"), loaded.galois_key(element, "t"))):
            assert type(again) is type(key) and again.method == "linear" and again.uniform_seed == key.uniform_seed
            _same_tensor(again.data, key.data)
    raw, compressed = (serialize.dumps(keys.relin_key("t"), compress=c) for c in (False, True))
    assert len(split(raw).payload) == 2 * len(split(compressed).payload) == keys.relin_key("t").data.numel() * 8
    sk = rlwe.gen_secret_key(ctx)
    ct = rlwe.encrypt_sk(ctx, sk, ctx.q_basis.ntt(ctx.q_basis.to_residues(list(range(params.n)))), params.max_level)
    assert torch.equal(rlwe.apply_galois(ctx, ct, element, loaded).data, rlwe.apply_galois(ctx, ct, element, keys).data)
    with pytest.raises(SerializationError, match="params_id"):
        serialize.loads(serialize.dumps(world().keys.relin_key("t")), params)
