"""One encoder and one decoder per object kind.

An encoder turns an object into (metadata, payload parts): residue parts stay tensors where the
object is until :func:`wire` writes them as words or bit-packed (packed there). A decoder
checks a record's metadata and payload lengths against the parameters without allocating
anything, and returns a :data:`Pending`: a function that, called later, copies the residues to
the target device, unpacks them and checks their ranges there, expands seeds there, and builds
the object. Key sets check every key's metadata and lengths before building any.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from fhe_core.ckks.plaintext import Plaintext
from fhe_core.errors import (
    MetadataError, SecurityError, SerializationError, SerializedParamsMismatchError, ShapeError, SizeLimitError,
    WrongKindError,
)
from fhe_core.params import Params, ParamsLiteral
from fhe_core.rlwe import (
    Ciphertext, EncapsulationKey, EvalKeySet, GaloisKey, PublicKey, RelinKey, RLWEContext, SecretKey, SwitchingKey,
    encapsulation_key_uniform, sk_encryption_uniform, switching_key_uniform,
)
from fhe_core.rlwe.context import linear_aux_primes
from fhe_core.rlwe.keys import DENSE_TO_SPARSE, ENCAPSULATION_DIRECTIONS, EPHEMERAL_ID_BYTES
from fhe_core.serialize.fields import (
    Residues, bool_field, check_keys, hex_bytes_field, host_words, int_field, limb_widths, pack_residues, q_labels,
    qp_labels, residue_tensor, residues, scale_field, shape_field,
)
from fhe_core.serialize.record import HEADER_BYTES, Kind, Record, decode_metadata, float_hex, pack_parts, parse

SEED_BYTES = 32
MAX_DEGREE = 2          # ciphertexts of degree 1, or 2 before relinearization
BITS = ("bits",)        # the optional metadata field of bit-packed residue payloads
Pending = Callable[[], Any]
Encoded = tuple[dict[str, Any], list[bytes | memoryview | np.ndarray | torch.Tensor]]


@dataclass(frozen=True, eq=False)
class Env:
    """What decoding needs: the parameters and the target device (the context is built lazily,
    only for keys whose uniform parts are regenerated). Every residue payload a decoder accepts
    is also listed in ``payloads``, so a caller can check them all without building the objects
    (``serialize.check_many``), and every member record of a key set in ``members``: their
    checksums are the caller's to verify (in parallel, ``api._decoded``)."""

    params: Params
    device: torch.device
    payloads: list[Residues] = field(default_factory=list)
    members: list[Record] = field(default_factory=list)  # of a key set, parsed without checksums: the caller's

    def residues(self, payload: memoryview, shape: tuple[int, ...], what: str, meta: dict[str, Any],
                 primes: Sequence[int], labels: Sequence[str],
                 outer: Callable[[tuple[int, ...]], str] = lambda i: "") -> Residues:
        """:func:`fields.residues` (lengths checked, nothing allocated), remembered in ``payloads``."""
        words = residues(payload, shape, what, meta, primes, labels, outer)
        self.payloads.append(words)
        return words

    @property
    def ctx(self) -> RLWEContext:
        return _context(self.params, self.device)

    @property
    def qp_rows(self) -> int:
        return self.params.alpha + self.params.max_level + 1

    @property
    def qp_primes(self) -> tuple[int, ...]:
        return self.params.p_primes + self.params.q_primes


@functools.lru_cache(maxsize=8)
def _context(params: Params, device: torch.device) -> RLWEContext:
    return RLWEContext.from_params(params.with_device(device), device)


# ---- shared pieces ---------------------------------------------------------------------------------

def _level(meta: dict[str, Any], what: str, params: Params) -> int:
    """The ``level`` field; a level above L is a ShapeError (it needs more limbs than exist)."""
    level = int_field(meta, "level", what, 0, 1 << 30)
    if level > params.max_level:
        raise ShapeError(f"{what}: level {level} needs {level + 1} limbs, the parameters have "
                         f"L = {params.max_level} ({params.max_level + 1} primes q_0..q_{params.max_level})")
    return level


def _slots(meta: dict[str, Any], what: str, params: Params) -> int:
    slots = int_field(meta, "slots", what, 1, params.slots)
    if slots & (slots - 1):
        raise MetadataError(f"{what}: slots must be a power of two, got {slots}")
    return slots


def scale_meta(scale: float, slots: int) -> dict[str, Any]:
    """The CKKS metadata a plaintext (and a CKKS ciphertext) adds: exact scale and slot count."""
    return {"scale": float_hex(scale), "slots": int(slots)}


def _q_residues(payload: memoryview, shape: tuple[int, ...], what: str, env: Env, meta: dict[str, Any],
                outer: Callable[[tuple[int, ...]], str] = lambda i: "") -> Residues:
    """The payload as ``shape`` = [..., l+1, N] residues over Q_l (lengths checked)."""
    return env.residues(payload, shape, what, meta, env.params.q_primes[:shape[-2]], q_labels(shape[-2]), outer)


def _qp_residues(payload: memoryview, shape: tuple[int, ...], what: str, env: Env, meta: dict[str, Any],
                 outer: Callable[[tuple[int, ...]], str] = lambda i: "") -> Residues:
    """The payload as ``shape`` = [..., alpha + L + 1, N] residues over QP_L (P first, lengths checked)."""
    p = env.params
    return env.residues(payload, shape, what, meta, env.qp_primes, qp_labels(p.alpha, p.max_level + 1), outer)


def wire(meta: dict[str, Any], parts: list, packed: bool) -> Encoded:
    """The encoder's residue part (the one tensor) as it travels: with ``packed``, each limb at the
    bit length of its largest residue (packed where the tensor is, the widths recorded as the
    metadata field ``bits``), otherwise as uint64 words."""
    out = []
    for part in parts:
        if isinstance(part, torch.Tensor):
            if packed:
                meta = {**meta, "bits": limb_widths(part)}
                part = pack_residues(part, meta["bits"])
            else:
                part = host_words(part)
        out.append(part)
    return meta, out


def _seed(value: object, what: str) -> bytes:
    if not isinstance(value, (bytes, bytearray)) or len(value) != SEED_BYTES:
        raise SerializationError(f"{what}: the seed must be {SEED_BYTES} bytes")
    return bytes(value)


# ---- params ----------------------------------------------------------------------------------------

def encode_params(params: Params) -> Encoded:
    """Payload: the normalised literal as canonical JSON (UTF-8); no metadata fields."""
    return {}, [params.literal.to_json().encode("utf-8")]


MAX_PRIMES = 512   # a literal from untrusted bytes may not ask for more primes (prime generation is slow)


def decode_params(record: Record, meta: dict[str, Any], *, device: torch.device | str,
                  allow_insecure: bool, reference: Params | None = None) -> Pending:
    """Rebuild the parameters from the literal and refuse them unless their recomputed
    params_id is the one in the header. With a ``reference`` (the caller's Params, whose id
    the header matches) the literal must also be the reference's, checked before any prime is
    generated. Security: as :meth:`Params.from_literal`."""
    check_keys(meta, "params", ())
    text = _literal_text(record)
    if reference is not None and text != reference.literal.to_json():
        raise SerializedParamsMismatchError("params: the literal is not the one of the given parameters")
    try:
        literal = ParamsLiteral.from_json(text)
        primes = len(literal.log_q) + len(literal.log_p) if isinstance(literal.log_q, list) and \
            isinstance(literal.log_p, list) else 0
        if primes > MAX_PRIMES:
            raise SizeLimitError(f"params: the literal asks for {primes} primes, more than {MAX_PRIMES}")
        canonical = literal.to_json() == text
        params = Params.from_literal(literal, allow_insecure=allow_insecure, device=device) if canonical else None
    except (SecurityError, SizeLimitError):
        raise
    except (ValueError, TypeError) as exc:   # ParameterError is a ValueError
        raise MetadataError(f"params: the literal is invalid: {exc}") from None
    if params is None:
        raise MetadataError("params: the literal is not in canonical JSON form")
    if params.params_id != record.params_id:
        raise SerializedParamsMismatchError(f"params: the literal hashes to params_id {params.params_id}, "
                                            f"the header claims {record.params_id}")
    return lambda: params


def _literal_text(record: Record) -> str:
    try:
        return bytes(record.payload).decode("utf-8")
    except UnicodeDecodeError:
        raise MetadataError("params: the literal is not UTF-8") from None


# ---- plaintexts and ciphertexts ----------------------------------------------------------------------

def encode_plaintext(pt: Plaintext) -> Encoded:
    data = residue_tensor(pt.data, "plaintext", 2)
    meta = {"level": int(pt.level), "is_ntt": bool(pt.is_ntt), "shape": list(data.shape),
            **scale_meta(pt.scale, pt.slots)}
    return meta, [data]


def decode_plaintext(record: Record, meta: dict[str, Any], env: Env) -> Pending:
    what, p = "plaintext", env.params
    check_keys(meta, what, ("is_ntt", "level", "scale", "shape", "slots"), BITS)
    level = _level(meta, what, p)
    slots, scale, is_ntt = _slots(meta, what, p), scale_field(meta, "scale", what), bool_field(meta, "is_ntt", what)
    shape = shape_field(meta, what, (level + 1, p.n), f"level {level}: {level + 1} limbs of N = {p.n}")
    words = _q_residues(record.payload, shape, what, env, meta)
    return lambda: Plaintext(data=words.tensor(env.device), level=level, scale=scale,
                             params_id=p.params_id, slots=slots, is_ntt=is_ntt)


def encode_ciphertext(ct: Ciphertext, *, compress: bool = True) -> Encoded:
    """Metadata: level, is_ntt, shape [d+1, l+1, N]; payload: the components in order. A fresh
    secret-key encryption (``ct.uniform_seed`` set), compressed: the payload is c_0 alone and
    the metadata adds ``uniform_seed``; c_1 is regenerated from it on load.
    (A CKKS ciphertext adds :func:`scale_meta` to this metadata; see the package docstring.)"""
    data = residue_tensor(ct.data, "ciphertext", 3)
    meta = {"level": int(ct.level), "is_ntt": bool(ct.is_ntt), "shape": list(data.shape)}
    if compress and ct.uniform_seed is not None:
        meta["uniform_seed"] = _seed(ct.uniform_seed, "ciphertext").hex()
        data = data[:1]
    return meta, [data]


def ciphertext_fields(record: Record, meta: dict[str, Any], env: Env, what: str) -> Callable[[], dict[str, Any]]:
    """Check an rlwe ciphertext record (metadata keys beyond the rlwe ones are the caller's);
    returns a builder of the rlwe Ciphertext constructor's arguments."""
    p = env.params
    level = _level(meta, what, p)
    is_ntt = bool_field(meta, "is_ntt", what)
    declared = meta["shape"]
    components = declared[0] if isinstance(declared, list) and declared and isinstance(declared[0], int) else 0
    if not 2 <= components <= MAX_DEGREE + 1:
        raise ShapeError(f"{what}: shape {declared!r} must start with the component count d + 1 in "
                         f"[2, {MAX_DEGREE + 1}]")
    shape = shape_field(meta, what, (components, level + 1, p.n),
                        f"degree {components - 1}, level {level}: {level + 1} limbs of N = {p.n}")
    seed = None
    if "uniform_seed" in meta:
        seed = hex_bytes_field(meta, "uniform_seed", what, SEED_BYTES)
        if components != 2 or not is_ntt:
            raise MetadataError(f"{what}: uniform_seed is for fresh degree-1 NTT-domain ciphertexts, this one has "
                                f"{components} components{'' if is_ntt else ' in the coefficient domain'}")
        shape = (1, *shape[1:])  # the payload holds c_0; c_1 comes from the seed
    words = _q_residues(record.payload, shape, what, env, meta, lambda i: f"component {i[0]}, ")

    def build() -> dict[str, Any]:
        data = words.tensor(env.device)
        if seed is not None:  # expanded where the ciphertext is headed
            data = torch.stack((data[0], sk_encryption_uniform(env.ctx, seed, level)))
        return {"data": data, "level": level, "params_id": p.params_id, "is_ntt": is_ntt, "uniform_seed": seed}
    return build


def decode_ciphertext(record: Record, meta: dict[str, Any], env: Env) -> Pending:
    check_keys(meta, "ciphertext", ("is_ntt", "level", "shape"), (*BITS, "uniform_seed"))
    fields = ciphertext_fields(record, meta, env, "ciphertext")
    return lambda: Ciphertext(**fields())


def encode_scaled_ciphertext(ct: Ciphertext, *, compress: bool = True) -> Encoded:
    """A CKKS ciphertext (an rlwe Ciphertext subclass with ``scale`` and ``slots``): the
    ciphertext record's metadata plus :func:`scale_meta`, the same payload."""
    meta, parts = encode_ciphertext(ct, compress=compress)
    return {**meta, **scale_meta(ct.scale, ct.slots)}, parts


def scaled_ciphertext_decoder(cls: type) -> Callable[[Record, dict[str, Any], Env], Pending]:
    """The decoder of :func:`encode_scaled_ciphertext` records, building ``cls(data=, level=,
    params_id=, is_ntt=, scale=, slots=)``; registering the CKKS ciphertext is
    ``_ENCODERS[cls] = (Kind.CKKS_CIPHERTEXT, encode_scaled_ciphertext)`` and
    ``_DECODERS[Kind.CKKS_CIPHERTEXT] = scaled_ciphertext_decoder(cls)`` in ``api.py``."""
    def decode(record: Record, meta: dict[str, Any], env: Env) -> Pending:
        what = "ckks ciphertext"
        check_keys(meta, what, ("is_ntt", "level", "scale", "shape", "slots"), (*BITS, "uniform_seed"))
        scale, slots = scale_field(meta, "scale", what), _slots(meta, what, env.params)
        fields = ciphertext_fields(record, meta, env, what)
        return lambda: cls(**fields(), scale=scale, slots=slots)
    return decode


# ---- secret and public keys --------------------------------------------------------------------------

def encode_secret_key(sk: SecretKey) -> Encoded:
    """Payload: the 32-byte master seed, then s over QP_L.

    The result IS the secret key: whoever holds these bytes decrypts everything. It must never
    be sent to a server, logged, or stored beside evaluation keys; only the client writes it.
    """
    data = residue_tensor(sk.data, "secret key", 2)
    meta = {"hamming_weight": int(sk.hamming_weight), "shape": list(data.shape)}
    return meta, [_seed(sk.seed, "secret key"), data]


def decode_secret_key(record: Record, meta: dict[str, Any], env: Env) -> Pending:
    what, p = "secret key", env.params
    check_keys(meta, what, ("hamming_weight", "shape"), BITS)
    weight = int_field(meta, "hamming_weight", what, 0, p.n)
    if weight != p.hamming_weight:
        raise MetadataError(f"{what}: Hamming weight {weight} differs from the parameters' {p.hamming_weight}")
    shape = shape_field(meta, what, (env.qp_rows, p.n), f"alpha + L + 1 = {env.qp_rows} limbs of QP_L, N = {p.n}")
    seed = bytes(record.payload[:SEED_BYTES])
    words = _qp_residues(record.payload[SEED_BYTES:], shape, what, env, meta)
    return lambda: SecretKey(data=words.tensor(env.device), params_id=p.params_id,
                             hamming_weight=weight, seed=seed)


def encode_public_key(pk: PublicKey) -> Encoded:
    """Payload: (b, a) over Q_L; the uniform seed travels in the metadata."""
    data = residue_tensor(pk.data, "public key", 3)
    return {"shape": list(data.shape), "uniform_seed": _seed(pk.uniform_seed, "public key").hex()}, [data]


def decode_public_key(record: Record, meta: dict[str, Any], env: Env) -> Pending:
    what, p = "public key", env.params
    check_keys(meta, what, ("shape", "uniform_seed"), BITS)
    seed = hex_bytes_field(meta, "uniform_seed", what, SEED_BYTES)
    shape = shape_field(meta, what, (2, p.max_level + 1, p.n), f"(b, a) over Q_L: {p.max_level + 1} limbs")
    words = _q_residues(record.payload, shape, what, env, meta, lambda i: f"part {'ba'[i[0]]}, ")
    return lambda: PublicKey(data=words.tensor(env.device), params_id=p.params_id, uniform_seed=seed)


# ---- switching keys ----------------------------------------------------------------------------------

_SWITCHING_KINDS = {Kind.SWITCHING_KEY: (SwitchingKey, "switching key"), Kind.RELIN_KEY: (RelinKey, "relin key"),
                    Kind.GALOIS_KEY: (GaloisKey, "galois key")}


def encode_switching_key(key: SwitchingKey, *, compress: bool = True) -> Encoded:
    """Compressed: only the b_j, ``[dnum, alpha + L + 1, N]``; the a_j are regenerated from the
    uniform seed on load (valid for every key made by ``rlwe.gen_*``). Raw: the whole key. A linear key
    (``method="linear"``, metadata ``method``) travels in its preprocessed form ``[L + 1, alpha + L + 1, (2,) A, N]``
    (residues mod the auxiliary primes; compressed: the b parts, the a parts regenerated and preprocessed on load)."""
    what = type(key).__name__
    linear = _key_method(key, what) == "linear"
    data = residue_tensor(key.data, what, 5 if linear else 4)
    if compress:
        data = data[:, :, 0] if linear else data[:, 0]
    meta = {"compressed": bool(compress), "shape": list(data.shape),
            "uniform_seed": _seed(key.uniform_seed, what).hex()}
    if linear:
        meta["method"] = "linear"
    if isinstance(key, GaloisKey):
        meta["galois_element"] = int(key.galois_element)
    return meta, [data]


def _key_method(key: SwitchingKey, what: str) -> str:
    if key.method not in ("hybrid", "linear"):
        raise SerializationError(f"{what}: method must be 'hybrid' or 'linear', got {key.method!r}")
    return key.method


def decode_switching_key(record: Record, meta: dict[str, Any], env: Env) -> Pending:
    """A hybrid key, or a linear key where the parameters switch keys linearly (the record then says so)."""
    (cls, what), p = _SWITCHING_KINDS[record.kind], env.params
    linear = p.key_switching == "linear"
    extra = (("galois_element",) if cls is GaloisKey else ()) + (("method",) if linear else ())
    check_keys(meta, what, ("compressed", "shape", "uniform_seed", *extra), BITS)
    if linear and meta["method"] != "linear":
        raise MetadataError(f"{what}: method must be 'linear' (the parameters switch keys linearly), "
                            f"got {meta['method']!r}")
    seed = hex_bytes_field(meta, "uniform_seed", what, SEED_BYTES)
    compressed = bool_field(meta, "compressed", what)
    fields = {"galois_element": _galois_element(meta, what, p.n)} if cls is GaloisKey else {}
    words = (_linear_key_residues if linear else _hybrid_key_residues)(record, meta, env, what, compressed)

    def build() -> SwitchingKey:
        data = words.tensor(env.device)
        if compressed:  # b and the regenerated a written into the key's one buffer (no stacked copies)
            half = 2 if linear else 1
            b, data = data, torch.empty((*data.shape[:half], 2, *data.shape[half:]), dtype=data.dtype,
                                        device=data.device)
            data.select(half, 0).copy_(b)
            del b
            switching_key_uniform(env.ctx, seed, out=data.select(half, 1))
        return cls(data=data, params_id=p.params_id, uniform_seed=seed, method=p.key_switching, **fields)
    return build


def _hybrid_key_residues(record: Record, meta: dict[str, Any], env: Env, what: str, compressed: bool) -> Residues:
    p = env.params
    shape = (p.dnum, env.qp_rows, p.n) if compressed else (p.dnum, 2, env.qp_rows, p.n)
    shape_field(meta, what, shape, f"dnum = {p.dnum} digits{'' if compressed else ' of (b, a)'} over "
                                   f"QP_L: alpha + L + 1 = {env.qp_rows} limbs (alpha = {p.alpha}), N = {p.n}")
    outer = (lambda i: f"digit {i[0]} b, ") if compressed else (lambda i: f"digit {i[0]} {'ba'[i[1]]}, ")
    return _qp_residues(record.payload, shape, what, env, meta, outer)


def _linear_key_residues(record: Record, meta: dict[str, Any], env: Env, what: str, compressed: bool) -> Residues:
    """A linear key's words: residues mod the auxiliary primes (the innermost limb axis), one block per digit, target
    prime of QP_L (and component)."""
    p = env.params
    aux = linear_aux_primes(p.n, p.q_primes, env.qp_primes)
    digits, rows = p.max_level + 1, env.qp_rows
    shape = (digits, rows, len(aux), p.n) if compressed else (digits, rows, 2, len(aux), p.n)
    shape_field(meta, what, shape, f"L + 1 = {digits} one-prime digits over QP_L's {rows} primes"
                                   f"{'' if compressed else ' of (b, a)'}, A = {len(aux)} auxiliary primes, N = {p.n}")
    labels = qp_labels(p.alpha, p.max_level + 1)
    outer = ((lambda i: f"digit {i[0]} row {labels[i[1]]} b, ") if compressed
             else (lambda i: f"digit {i[0]} row {labels[i[1]]} {'ba'[i[2]]}, "))
    return env.residues(record.payload, shape, what, meta, aux, [f"m_{k}" for k in range(len(aux))], outer)


def _galois_element(meta: dict[str, Any], what: str, n: int) -> int:
    k = int_field(meta, "galois_element", what, 1, 2 * n - 1)
    if k % 2 == 0:
        raise MetadataError(f"{what}: galois_element must be odd, got {k}")
    return k


# ---- encapsulation keys ------------------------------------------------------------------------------

def encode_encapsulation_key(key: EncapsulationKey, *, compress: bool = True) -> Encoded:
    """Compressed: b alone, ``[1, rows, N]`` (a from the uniform seed on load); raw: ``[1, 2, rows, N]``.
    Rows: (p_0, q_0) for dense -> sparse, QP_L for sparse -> dense."""
    what = "encapsulation key"
    data = residue_tensor(key.data, what, 4)
    if compress:
        data = data[:, 0]
    meta = {"compressed": bool(compress), "shape": list(data.shape),
            "uniform_seed": _seed(key.uniform_seed, what).hex(), "direction": key.direction,
            "ephemeral_weight": int(key.ephemeral_weight),
            "ephemeral_id": bytes(key.ephemeral_id).hex()}
    return meta, [data]


def decode_encapsulation_key(record: Record, meta: dict[str, Any], env: Env) -> Pending:
    what, p = "encapsulation key", env.params
    check_keys(meta, what, ("compressed", "direction", "ephemeral_id", "ephemeral_weight", "shape", "uniform_seed"),
               BITS)
    direction = _direction(meta, what)
    seed = hex_bytes_field(meta, "uniform_seed", what, SEED_BYTES)
    tag = hex_bytes_field(meta, "ephemeral_id", what, EPHEMERAL_ID_BYTES)
    weight = int_field(meta, "ephemeral_weight", what, 1, p.n)
    compressed = bool_field(meta, "compressed", what)
    if direction == DENSE_TO_SPARSE:
        primes, labels, basis = (p.p_primes[0], p.q_primes[0]), ["p_0", "q_0"], "(p_0, q_0)"
    else:
        primes, labels, basis = env.qp_primes, qp_labels(p.alpha, p.max_level + 1), "QP_L"
    shape = (1, len(primes), p.n) if compressed else (1, 2, len(primes), p.n)
    shape_field(meta, what, shape, f"one digit{'' if compressed else ' of (b, a)'} over {basis}: {len(primes)} "
                                   f"limbs, N = {p.n}")
    outer = (lambda i: "b, ") if compressed else (lambda i: f"{'ba'[i[1]]}, ")
    words = env.residues(record.payload, shape, what, meta, primes, labels, outer)

    def build() -> EncapsulationKey:
        data = words.tensor(env.device)
        if compressed:
            data = torch.stack((data, encapsulation_key_uniform(env.ctx, direction, seed)), dim=1)
        return EncapsulationKey(data=data, params_id=p.params_id, uniform_seed=seed, direction=direction,
                                ephemeral_weight=weight, ephemeral_id=tag)
    return build


def _direction(meta: dict[str, Any], what: str) -> str:
    direction = meta.get("direction")
    if direction not in ENCAPSULATION_DIRECTIONS:
        raise MetadataError(f"{what}: direction must be one of {list(ENCAPSULATION_DIRECTIONS)}, got {direction!r}")
    return direction


# ---- evaluation key sets -----------------------------------------------------------------------------

def encode_eval_key_set(keys: EvalKeySet, *, compress: bool = True, packed: bool = False) -> Encoded:
    """Payload: complete RELIN_KEY / GALOIS_KEY / ENCAPSULATION_KEY records back to back (relin first, then
    Galois keys by element, then encapsulation keys by direction); metadata: one {kind, length[, galois_element |
    direction]} entry per record."""
    members = ([keys.relin_key("dumps")] if keys.has_relin else []) + \
              [keys.galois_key(k, "dumps") for k in sorted(keys.galois_elements)] + \
              [keys.encapsulation_key(d, "dumps") for d in sorted(keys.encapsulation_directions)]
    pairs = [encode_key_set_member(key, compress=compress, packed=packed) for key in members]
    return {"records": [entry for entry, _ in pairs]}, [part for _, parts in pairs for part in parts]


def key_set_member_id(key: object) -> tuple[Kind, int | str | None]:
    """The record kind of a key set member and what identifies it in the set (None: the relin key, a Galois
    element, an encapsulation direction); SerializationError for anything that is no member."""
    if isinstance(key, GaloisKey):
        return Kind.GALOIS_KEY, int(key.galois_element)
    if isinstance(key, RelinKey):
        return Kind.RELIN_KEY, None
    if isinstance(key, EncapsulationKey):
        return Kind.ENCAPSULATION_KEY, key.direction
    raise SerializationError(f"eval key set: a member must be a RelinKey, GaloisKey or EncapsulationKey, got "
                             f"{type(key).__name__}")


def encode_key_set_member(key: RelinKey | GaloisKey | EncapsulationKey, *, compress: bool,
                          packed: bool) -> tuple[dict[str, int | str], list[bytes | memoryview]]:
    """One member of an eval key set: its metadata entry {kind, length[, galois_element | direction]} and
    its complete record as unjoined pieces (:func:`record.pack_parts`: the payload is not copied)."""
    kind, element = key_set_member_id(key)
    encode = encode_encapsulation_key if kind == Kind.ENCAPSULATION_KEY else encode_switching_key
    parts = pack_parts(kind, key.params_id, *wire(*encode(key, compress=compress), packed))
    entry = {"kind": int(kind), "length": sum(memoryview(part).nbytes for part in parts)}
    if kind == Kind.GALOIS_KEY:
        entry["galois_element"] = element
    elif kind == Kind.ENCAPSULATION_KEY:
        entry["direction"] = element
    return entry, parts


def decode_eval_key_set(record: Record, meta: dict[str, Any], env: Env) -> Pending:
    """Check every member record (sizes, kind, checksum, params_id, shapes, ranges) before
    building any key."""
    what = "eval key set"
    check_keys(meta, what, ("records",))
    entries = meta["records"]
    if not isinstance(entries, list):
        raise MetadataError(f"{what}: records must be a list")
    pending, seen, at = [], set(), 0
    for i, entry in enumerate(entries):
        kind, length, element = _key_set_entry(entry, i, env.params.n)
        if element in seen:
            held = "the relin key" if element is None else f"galois element {element}" if isinstance(element, int) \
                else f"the {element} key"
            raise MetadataError(f"{what}: record {i} repeats {held}")
        seen.add(element)
        if length > len(record.payload) - at:
            raise ShapeError(f"{what}: record {i} of {length} bytes runs past the payload "
                             f"({len(record.payload)} bytes)")
        pending.append(_key_set_member(record, record.payload[at:at + length], kind, element, i, env))
        at += length
    if at != len(record.payload):
        raise ShapeError(f"{what}: the records cover {at} of the {len(record.payload)} payload bytes")
    return lambda: _build_key_set(env.params.params_id, [build() for build in pending])


def _key_set_entry(entry: object, i: int, n: int) -> tuple[Kind, int, int | str | None]:
    what = f"eval key set: record {i}"
    if not isinstance(entry, dict):
        raise MetadataError(f"{what} must be an object")
    kind = int_field({"kind": entry.get("kind")}, "kind", what, 0, 1 << 16)
    if kind == Kind.RELIN_KEY:
        check_keys(entry, what, ("kind", "length"))
        element = None
    elif kind == Kind.GALOIS_KEY:
        check_keys(entry, what, ("galois_element", "kind", "length"))
        element = _galois_element(entry, what, n)
    elif kind == Kind.ENCAPSULATION_KEY:
        check_keys(entry, what, ("direction", "kind", "length"))
        element = _direction(entry, what)
    else:
        raise WrongKindError(f"{what}: kind {kind} is not a relin key ({int(Kind.RELIN_KEY)}), galois key "
                             f"({int(Kind.GALOIS_KEY)}) or encapsulation key ({int(Kind.ENCAPSULATION_KEY)})")
    return Kind(kind), int_field(entry, "length", what, 0, 1 << 62), element


def _key_set_member(outer: Record, blob: memoryview, kind: Kind, element: int | str | None, i: int,
                    env: Env) -> Pending:
    inner = parse(blob, max_bytes=max(len(blob), HEADER_BYTES), expect=[kind], checksum=False)
    env.members.append(inner)
    if inner.params_id != outer.params_id:
        raise SerializedParamsMismatchError(f"eval key set: record {i} belongs to params_id {inner.params_id}, "
                                            f"the set to {outer.params_id}")
    meta = decode_metadata(inner)
    if kind == Kind.ENCAPSULATION_KEY:
        if meta.get("direction") != element:
            raise MetadataError(f"eval key set: record {i} holds the {meta.get('direction')!r} key, the set lists "
                                f"{element}")
        return decode_encapsulation_key(inner, meta, env)
    if element is not None and meta.get("galois_element") != element:
        raise MetadataError(f"eval key set: record {i} holds galois element {meta.get('galois_element')!r}, "
                            f"the set lists {element}")
    return decode_switching_key(inner, meta, env)


def _build_key_set(params_id: str, keys: list[SwitchingKey]) -> EvalKeySet:
    relin = [k for k in keys if isinstance(k, RelinKey)]
    return EvalKeySet(params_id, relin=relin[0] if relin else None,
                      galois=[k for k in keys if isinstance(k, GaloisKey)],
                      encapsulation=[k for k in keys if isinstance(k, EncapsulationKey)])
