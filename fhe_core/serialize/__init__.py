"""A versioned, self-checking binary format for parameters, plaintexts, ciphertexts and keys.

API::

    blob = dumps(obj, *, compress=True, packed=False) -> bytes
    obj  = loads(blob, params, *, device=None, max_bytes=DEFAULT_MAX_BYTES, expect=None,
                 allow_insecure=False)
    info = peek(blob, *, max_bytes=..., expect=None) -> RecordInfo(kind, params_id, metadata, size)
    head = read_header(first_88_bytes) -> Header(kind, params_id, ...)   no checksum: a record's start
    blob = dumps_many(objs) / objs = loads_many(blob, params, *, expect=, max_count=, ...)
                                  a sequence (e.g. a batch of ciphertexts): records back to back
    infos = check_many(blob, params, ...)   every check of loads_many, nothing built, no seed expanded
    dump(obj, path, ...) / load(path, params, ...)   atomic write; size checked, then memory-mapped
    dump_eval_keys(keys, path, params)   an eval key set streamed from keys made one at a time

Objects: :class:`~fhe_core.params.Params`, :class:`~fhe_core.ckks.Plaintext`,
:class:`~fhe_core.rlwe.Ciphertext` (degree 1 or 2), :class:`~fhe_core.rlwe.SecretKey`,
:class:`~fhe_core.rlwe.PublicKey`, :class:`~fhe_core.rlwe.SwitchingKey`,
:class:`~fhe_core.rlwe.RelinKey`, :class:`~fhe_core.rlwe.GaloisKey`,
:class:`~fhe_core.rlwe.EvalKeySet`. A **SecretKey record is the secret itself**: it must never
be sent to a server, logged, or stored beside evaluation keys; only client code writes one.

Record layout (format version 1; every integer little-endian)
=============================================================

====== ======= ================ ===========================================================
offset bytes   field            meaning
====== ======= ================ ===========================================================
0      8       magic            ``89 46 48 45 53 45 52 0A`` (``b"\\x89FHESER\\n"``)
8      2       version          uint16, format version = 1
10     2       kind             uint16, :class:`Kind` (1 params, 2 plaintext, 3 ciphertext,
                                4 secret key, 5 public key, 6 switching key, 7 relin key,
                                8 galois key, 9 eval key set, 10 CKKS ciphertext (reserved),
                                11 encapsulation key)
12     4       metadata length  uint32 M, a multiple of 8, at most 2^20
16     8       payload length   uint64 P
24     32      params_id        the raw 32 bytes of ``Params.params_id`` (hex SHA-256)
56     32      checksum         BLAKE2b-256 (personalisation ``fhe_core.serial1``) of all bytes
                                of the record except these 32: [0, 56) ‖ [88, 88 + M + P)
88     M       metadata         canonical JSON object (sorted keys, no whitespace, ASCII),
                                padded with spaces to a multiple of 8 bytes
88+M   P       payload          see below; 8-byte aligned
====== ======= ================ ===========================================================

The record is exactly 88 + M + P bytes; shorter input is truncated, longer has trailing data.

Metadata and payload by kind (shapes are C order, the tensors' own layout: limb-major, the N
residues of one prime contiguous; residues are little-endian uint64, each < its prime):

=================== ================================================= =========================================
kind                metadata fields                                   payload
=================== ================================================= =========================================
params              (none)                                            the normalised literal, canonical JSON
                                                                      (``ParamsLiteral.to_json``), UTF-8
plaintext           level, scale, slots, is_ntt, shape = [l+1, N]     residues over Q_l
ciphertext          level, is_ntt, shape = [d+1, l+1, N], d in {1,2}, components c_0..c_d over Q_l; seeded:
                    (uniform_seed: a fresh secret-key encryption,     c_0 alone, c_1 being
                    d = 1, NTT domain)                                ``sk_encryption_uniform(ctx, seed, l)``
secret key          hamming_weight, shape = [alpha+L+1, N]            32-byte master seed, then s over QP_L
                                                                      (P first), NTT domain
public key          uniform_seed, shape = [2, L+1, N]                 (b, a) over Q_L
switching / relin / compressed, uniform_seed, shape, (galois_element) compressed: b_j only, shape
galois key                                                            [dnum, alpha+L+1, N]; the a_j are
                                                                      ``switching_key_uniform(ctx, seed)``;
                                                                      raw: shape [dnum, 2, alpha+L+1, N]
encapsulation key   compressed, uniform_seed, shape, direction,       compressed: b only, shape [1, rows, N]
                    ephemeral_weight, ephemeral_id (32 hex digits)    (rows: 2 = (p_0, q_0) dense_to_sparse,
                                                                      alpha+L+1 sparse_to_dense); a is
                                                                      ``encapsulation_key_uniform``; raw:
                                                                      [1, 2, rows, N]
eval key set        records = [{kind, length[, galois_element |       the member records (relin key, galois
                    direction]}, ...]                                 keys by element, encapsulation keys by
                                                                      direction), complete, back to back
=================== ================================================= =========================================

Every residue kind may carry the optional metadata field ``bits`` (``dumps(..., packed=True)``):
one width w_i <= 64 per limb i (the bit length of the limb's largest residue, about the prime's
size). The residue payload is then, for each leading index in C order and each limb i, the
limb's N residues as one little-endian bit stream of w_i bits each (residue j at bits
[j w_i, (j+1) w_i)), N w_i / 8 bytes; the secret key's seed still comes first. Without
``bits`` the payload is the plain uint64 words, byte for byte the tensor's memory. As 64 | N,
64 residues fill w_i words: writers pack where the object is (numpy on the host, torch ops on a
GPU, so only packed words cross to the host), readers unpack where it is headed (``fields``).

``scale`` is the exact float64 as ``float.hex`` text (``"0x1.0000000000000p+40"``); seeds are
64 lowercase hex digits; ``galois_element`` is an odd int in [1, 2N).

Checks on load, in this order, before any tensor is allocated: input size and declared
lengths against ``max_bytes`` and the input; magic; version; kind (and the caller's
``expect``); checksum; params_id against the given Params; metadata (canonical JSON, exact
field set, types); shapes against the parameters (N, limbs <= L+1, alpha, dnum, payload
length). Then, on the target device as each object is built: every residue < its prime (one
vectorised reduction per tensor, after unpacking; seeds are expanded there too). Each failure raises
a subclass of :class:`fhe_core.errors.SerializationError` naming the object and the problem
(e.g. ``ciphertext: component 0, limb 3 has a residue >= q_3 (coefficient 17: ...)``).

CKKS ciphertexts (kind 10, reserved): the ciphertext record's metadata plus ``scale`` and
``slots`` (as a plaintext's), the same payload. :func:`codecs.encode_scaled_ciphertext` and
:func:`codecs.scaled_ciphertext_decoder` implement it (tested with a stand-in subclass);
enabling it for ``fhe_core.ckks`` 's ciphertext class is two registration lines in ``api.py``.
Until then, exact-type dispatch refuses to write a CKKS ciphertext as a plain rlwe one (which
would lose its scale).

Sizes at the N16QP1766L30D3 preset (N = 2^16, L = 30, alpha = 11, dnum = 3, 42 limbs of QP_L;
payload bytes, the header and metadata add about 200): a relinearization or Galois key is
3 * 2 * 42 * 2^16 * 8 = 132,120,576 raw, 66,060,288 seed-compressed, and about 43.4-43.8 MB
compressed and packed (1766-1781 bits per coefficient of a digit, depending on whether the
41-bit scaling primes' largest residues reach 2^40); a fresh ciphertext is 32,505,856 bytes
(2 * 31 * 2^16 * 8), 20.6-20.9 MB packed, and half of either when seeded (a fresh secret-key
encryption: c_0 and a 32-byte seed).

A params record from untrusted bytes asks for at most 512 primes (checked before any prime is
generated); with ``params`` given, its literal must be theirs before anything is computed.

No pickle, no eval: metadata is JSON with a fixed schema, payloads are raw words.

Layer: the top of fhe_core's libraries; imports rlwe, ckks, params and ring (never bfv: a BFV
ciphertext is an rlwe Ciphertext record).
"""
from fhe_core.serialize.api import (
    RecordInfo, check_many, dump, dump_eval_keys, dumps, dumps_many, load, loads, loads_many, peek,
)
from fhe_core.serialize.record import DEFAULT_MAX_BYTES, FORMAT_VERSION, HEADER_BYTES, MAGIC, Header, Kind, read_header

__all__ = ["dumps", "loads", "dumps_many", "loads_many", "check_many", "dump", "dump_eval_keys", "load", "peek",
           "read_header",
           "Header", "RecordInfo", "Kind", "DEFAULT_MAX_BYTES", "FORMAT_VERSION", "HEADER_BYTES", "MAGIC"]
