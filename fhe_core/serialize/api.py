"""dumps / loads and the file helpers (the public face of :mod:`fhe_core.serialize`)."""
from __future__ import annotations

import functools
import mmap
import os
import tempfile
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import torch

from fhe_core.ckks.ciphertext import Ciphertext as CkksCiphertext
from fhe_core.ckks.plaintext import Plaintext
from fhe_core.errors import (
    SecurityError, SerializationError, SerializedParamsMismatchError, SerializedSecurityError, SizeLimitError,
    WrongKindError,
)
from fhe_core.params import Params
from fhe_core.ring import resolve_device
from fhe_core.rlwe import (Ciphertext, EncapsulationKey, EvalKeySet, GaloisKey, PublicKey, RelinKey, SecretKey,
                           SwitchingKey)
from fhe_core.rlwe.checks import mark_canonical
from fhe_core.serialize import codecs
from fhe_core.serialize.record import (DEFAULT_MAX_BYTES, Kind, Record, as_view, check_checksum, decode_metadata,
                                      pack_parts, parse, write_streamed)

# exact types only: a subclass (e.g. a CKKS ciphertext with a scale) must get its own kind, never
# be written silently as its base class
_ENCODERS: dict[type, tuple[Kind, Callable[..., codecs.Encoded]]] = {
    Params: (Kind.PARAMS, codecs.encode_params),
    Plaintext: (Kind.PLAINTEXT, codecs.encode_plaintext),
    Ciphertext: (Kind.CIPHERTEXT, codecs.encode_ciphertext),
    CkksCiphertext: (Kind.CKKS_CIPHERTEXT, codecs.encode_scaled_ciphertext),
    SecretKey: (Kind.SECRET_KEY, codecs.encode_secret_key),
    PublicKey: (Kind.PUBLIC_KEY, codecs.encode_public_key),
    SwitchingKey: (Kind.SWITCHING_KEY, codecs.encode_switching_key),
    RelinKey: (Kind.RELIN_KEY, codecs.encode_switching_key),
    GaloisKey: (Kind.GALOIS_KEY, codecs.encode_switching_key),
    EncapsulationKey: (Kind.ENCAPSULATION_KEY, codecs.encode_encapsulation_key),
    EvalKeySet: (Kind.EVAL_KEY_SET, codecs.encode_eval_key_set),
}
_COMPRESSIBLE = {Kind.CIPHERTEXT, Kind.CKKS_CIPHERTEXT, Kind.SWITCHING_KEY, Kind.RELIN_KEY, Kind.GALOIS_KEY,
                 Kind.ENCAPSULATION_KEY, Kind.EVAL_KEY_SET}
_DECODERS: dict[Kind, Callable[[Record, dict[str, Any], codecs.Env], codecs.Pending]] = {
    Kind.PLAINTEXT: codecs.decode_plaintext,
    Kind.CIPHERTEXT: codecs.decode_ciphertext,
    Kind.CKKS_CIPHERTEXT: codecs.scaled_ciphertext_decoder(CkksCiphertext),
    Kind.SECRET_KEY: codecs.decode_secret_key,
    Kind.PUBLIC_KEY: codecs.decode_public_key,
    Kind.SWITCHING_KEY: codecs.decode_switching_key,
    Kind.RELIN_KEY: codecs.decode_switching_key,
    Kind.GALOIS_KEY: codecs.decode_switching_key,
    Kind.ENCAPSULATION_KEY: codecs.decode_encapsulation_key,
    Kind.EVAL_KEY_SET: codecs.decode_eval_key_set,
}
_CLASSES = {kind: cls for cls, (kind, _) in _ENCODERS.items()}
T = TypeVar("T")


def dumps(obj: object, *, compress: bool = True, packed: bool = False) -> bytes:
    """Serialize ``obj`` (Params, Plaintext, rlwe or CKKS Ciphertext, SecretKey, PublicKey, SwitchingKey,
    RelinKey, GaloisKey, EncapsulationKey, EvalKeySet) into one self-checking record (format: package docstring).

    ``compress``: switching keys (alone or in an EvalKeySet) store only their b parts and the
    uniform seed, halving their size; the a parts are regenerated on load. It assumes the a
    parts come from the seed, as for every key made by ``rlwe.gen_*``. Fresh secret-key
    encryptions (``uniform_seed`` set) likewise store c_0 and the seed. Ignored for other kinds.
    ``packed``: store each limb's residues at the bit length of its largest one (about the
    prime's size: 40-bit primes take 40 bits, not 64) instead of as uint64 words.
    A SecretKey serializes like the rest, but its bytes are the secret: never send them to a
    server or store them beside evaluation keys.
    """
    return b"".join(_record_parts(obj, compress, packed))


def _record_parts(obj: object, compress: bool, packed: bool) -> list[bytes | memoryview]:
    """The unjoined pieces of ``obj``'s record (see :func:`record.pack_parts`)."""
    entry = _ENCODERS.get(type(obj))
    if entry is None:
        raise SerializationError(f"dumps: no format for {type(obj).__module__}.{type(obj).__qualname__} "
                                 f"(known: {', '.join(c.__name__ for c in _ENCODERS)}; subclasses need their own kind)")
    kind, encode = entry
    if kind == Kind.EVAL_KEY_SET:
        meta, payload = encode(obj, compress=compress, packed=packed)
    else:
        meta, payload = encode(obj, compress=compress) if kind in _COMPRESSIBLE else encode(obj)
        meta, payload = codecs.wire(meta, payload, packed)
    return pack_parts(kind, obj.params_id, meta, payload)


def loads(data: bytes | bytearray | memoryview, params: Params | None = None, *,
          device: torch.device | str | None = None, max_bytes: int = DEFAULT_MAX_BYTES,
          expect: type | tuple[type, ...] | None = None, allow_insecure: bool = False) -> Any:
    """Read one object written by :func:`dumps`.

    Args:
        data: the bytes (a bytes-like object; a memoryview avoids a copy).
        params: the parameter set the object must belong to (its params_id is compared with the
            header's). Required for every kind but Params; for a Params record it is optional,
            and when given the record must be that parameter set.
        device: where the tensors go (default: ``params.device``).
        max_bytes: refuse inputs, or declared sizes, above this many bytes.
        expect: a class or tuple of classes the object must be an instance of (e.g.
            ``EvalKeySet`` for a server endpoint); anything else raises WrongKindError before
            the checksum is even computed. A secret key loads only when ``expect`` names
            :class:`~fhe_core.rlwe.SecretKey` itself: code that reads untyped blobs never gets a
            secret by accident (WrongKindError otherwise).
        allow_insecure: for a Params record only: accept parameters below 128-bit security
            (else SerializedSecurityError, both a SerializationError and a SecurityError).

    Checks, in order, before any tensor is allocated: sizes (input and declared lengths
    against ``max_bytes`` and the input), magic, version, kind, checksum, params_id, metadata,
    shapes against the parameters, residue ranges. Each failure raises its own subclass of
    :class:`fhe_core.errors.SerializationError` naming the object and what is wrong; a
    ``device`` that is malformed or not present raises DeviceError first.
    """
    if params is not None and not isinstance(params, Params):
        raise SerializationError(f"loads: params must be a Params, got {type(params).__name__}")
    device = None if device is None else resolve_device(device, "loads")
    record = parse(data, max_bytes=max_bytes, expect=_expected_kinds(expect))
    _check_secret_key_wanted(record, expect, "loads")
    _check_params_id(record, params)
    if record.kind == Kind.PARAMS:
        return _load_params(record, params, device, allow_insecure)
    return _load_object(record, params, device)


def dumps_many(objs: Iterable[object], *, compress: bool = True, packed: bool = False) -> bytes:
    """Serialize a sequence of objects (e.g. a batch of ciphertexts) as their :func:`dumps`
    records back to back. Each record states its own length, so no framing is added; an empty
    sequence is refused (a reader could not tell it from a truncated one)."""
    parts = [part for obj in objs for part in _record_parts(obj, compress, packed)]
    if not parts:
        raise SerializationError("dumps_many: nothing to serialize (an empty sequence)")
    return b"".join(parts)  # the payloads are copied once, here


def loads_many(data: bytes | bytearray | memoryview, params: Params, *,
               device: torch.device | str | None = None, max_bytes: int = DEFAULT_MAX_BYTES,
               expect: type | tuple[type, ...] | None = None, max_count: int = 4096) -> list[Any]:
    """Read what :func:`dumps_many` wrote: a list of objects of ``params``.

    Every record is checked (sizes, magic, version, kind against ``expect``, checksum,
    params_id), and their number against ``max_count``, before any tensor is built; then each
    is loaded as :func:`loads` would (metadata, shapes, residue ranges). ``max_bytes`` bounds
    the whole input. Params records are not accepted in a sequence.
    """
    device = _sequence_device(params, max_count, device, "loads_many")
    records = _records(data, params, max_bytes, expect, max_count, "loads_many")
    return _decoded(records, params, device, lambda record, meta, env, build, checks: _built(build))


def check_many(data: bytes | bytearray | memoryview, params: Params, *,
               device: torch.device | str | None = None, max_bytes: int = DEFAULT_MAX_BYTES,
               expect: type | tuple[type, ...] | None = None, max_count: int = 4096) -> list[RecordInfo]:
    """Every check :func:`loads_many` makes, in the same order and with the same errors (sizes,
    kinds, checksums, params_id, metadata, shapes, then every residue < its prime, unpacked on
    ``device``), without building the objects: the seeded halves (the ``a`` of compressed keys,
    ``c_1`` of seeded ciphertexts) are not regenerated and nothing is kept. For a server that
    accepts an upload now and loads it where it is used, later. Returns each record's
    :class:`RecordInfo`."""
    device = _sequence_device(params, max_count, device, "check_many")
    records = _records(data, params, max_bytes, expect, max_count, "check_many")

    def check(record: Record, meta: dict[str, Any], env: codecs.Env, build: codecs.Pending,
              checks: _Checks) -> RecordInfo:
        for words in env.payloads:
            checks.submit(functools.partial(_check_residues, words, device))
        return RecordInfo(record.kind, record.params_id, meta, record.size)
    return _decoded(records, params, device, check)


def _check_residues(words: codecs.Residues, device: torch.device) -> None:
    """Unpack ``words`` on ``device`` and check every residue < its prime (ResidueRangeError); keep nothing."""
    words.tensor(device)


def _sequence_device(params: Params, max_count: int, device: torch.device | str | None, op: str) -> torch.device:
    if not isinstance(params, Params):
        raise SerializationError(f"{op}: params must be a Params, got {type(params).__name__}")
    if isinstance(max_count, bool) or not isinstance(max_count, int) or max_count < 1:
        raise SerializationError(f"{op}: max_count must be a positive int, got {max_count!r}")
    return resolve_device(device if device is not None else params.device, op)


class _Checks:
    """Checks that run in a pool of threads while the caller decodes (hashlib, numpy and torch
    release the GIL): the checksums of records and of their members, and what the caller adds.
    :meth:`raise_first` reports a bad checksum ahead of anything else, then the first other
    failure in the order the checks were added."""

    def __init__(self, pool: ThreadPoolExecutor):
        self.pool, self.sums, self.others = pool, [], []

    def checksums(self, records: Iterable[Record]) -> None:
        self.sums += [self.pool.submit(check_checksum, record.view, record.kind) for record in records]

    def submit(self, check: Callable[[], Any]) -> None:
        self.others.append(self.pool.submit(check))

    def raise_first(self, *, checksums_only: bool = False) -> None:
        for future in self.sums + ([] if checksums_only else self.others):
            future.result()


def _decoded(records: list[Record], params: Params, device: torch.device,
             finish: Callable[[Record, dict[str, Any], codecs.Env, codecs.Pending, _Checks], T]) -> list[T]:
    """Decode each record here (metadata and shapes; the members of a key set parsed without their
    checksums) and ``finish`` it, while a pool of threads computes every checksum: a multi-GB key
    set's BLAKE2b passes cost no time beyond the decoding's. A bad checksum is reported ahead of
    any other fault (as the format's order has it for one record), whatever the decoding found;
    the decoders read unverified bytes safely, as they read any crafted record."""
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        checks = _Checks(pool)
        checks.checksums(records)
        try:
            done = []
            for record in records:
                env = codecs.Env(params, device)
                try:
                    meta = decode_metadata(record)
                    build = _DECODERS[record.kind](record, meta, env)
                finally:  # the members parsed so far: a bad checksum among them reports first
                    checks.checksums(env.members)
                done.append(finish(record, meta, env, build, checks))
        except BaseException:
            checks.raise_first(checksums_only=True)
            raise
        checks.raise_first()
    return done


def _built(build: codecs.Pending) -> Any:
    obj = build()
    if isinstance(obj, (Ciphertext, Plaintext)):  # residues checked above: evaluators need not again
        mark_canonical(obj)
    return obj


def _records(data: bytes | bytearray | memoryview, params: Params, max_bytes: int,
             expect: type | tuple[type, ...] | None, max_count: int, op: str) -> list[Record]:
    """The records of a sequence, each parsed (sizes, magic, version, kind; the checksums are
    :func:`_decoded`'s) and of ``params``."""
    view = as_view(data)
    if len(view) > max_bytes:
        raise SizeLimitError(f"{op}: input of {len(view)} bytes exceeds max_bytes={max_bytes}")
    kinds = _expected_kinds(expect)
    kinds = [k for k in (kinds if kinds is not None else _DECODERS) if k != Kind.PARAMS]
    records, offset = [], 0
    while offset < len(view) or not records:
        if len(records) == max_count:
            raise SizeLimitError(f"{op}: more than max_count={max_count} records")
        record = parse(view[offset:], max_bytes=max_bytes, expect=kinds, exact=False, checksum=False)
        try:
            _check_secret_key_wanted(record, expect, op)
            _check_params_id(record, params)
        except SerializationError:
            check_checksum(record.view, record.kind)  # the earlier check reports first
            raise
        records.append(record)
        offset += record.size
    return records


def _check_secret_key_wanted(record: Record, expect: type | tuple[type, ...] | None, op: str) -> None:
    """WrongKindError for a secret-key record unless ``expect`` names SecretKey itself."""
    named = expect if isinstance(expect, tuple) else (expect,)
    if record.kind == Kind.SECRET_KEY and SecretKey not in named:
        raise WrongKindError(f"{op}: the record is a secret key; pass expect=rlwe.SecretKey to load one "
                             f"(secret keys are only read where the caller asks for one)")


def _check_params_id(record: Record, params: Params | None) -> None:
    if params is not None and record.params_id != params.params_id:
        raise SerializedParamsMismatchError(f"{record.kind.name.lower()}: belongs to params_id {record.params_id}, "
                                            f"expected {params.params_id}")


def _load_params(record: Record, params: Params | None, device: torch.device | str | None,
                 allow_insecure: bool) -> Params:
    """A Params record; given ``params`` (already accepted by the caller) it must be them."""
    target = device if device is not None else (params.device if params is not None else "cpu")
    try:
        return codecs.decode_params(record, decode_metadata(record), device=target,
                                    allow_insecure=allow_insecure or params is not None, reference=params)()
    except SecurityError as exc:
        if isinstance(exc, SerializationError):
            raise
        raise SerializedSecurityError(f"params: {exc}") from None


def _load_object(record: Record, params: Params | None, device: torch.device | str | None) -> Any:
    """Any other record: metadata, shapes and ranges checked against ``params``, then built."""
    if params is None:
        raise SerializationError(f"loads: a {record.kind.name.lower()} record needs the Params it was made for")
    if record.kind not in _DECODERS:
        raise SerializationError(f"loads: reading {record.kind.name.lower()} records is not implemented yet")
    env = codecs.Env(params, resolve_device(device if device is not None else params.device))
    try:
        build = _DECODERS[record.kind](record, decode_metadata(record), env)
    finally:  # a key set's keys, each with its own checksum (reported ahead of their contents' faults)
        for member in env.members:
            check_checksum(member.view, member.kind)
    return _built(build)


@dataclass(frozen=True)
class RecordInfo:
    """What :func:`peek` reports: the kind, the params_id (64 hex digits), the metadata object
    and the record size in bytes."""

    kind: Kind
    params_id: str
    metadata: dict[str, Any]
    size: int


def peek(data: bytes | bytearray | memoryview, *, max_bytes: int = DEFAULT_MAX_BYTES,
         expect: type | tuple[type, ...] | None = None) -> RecordInfo:
    """Kind, params_id and metadata of a record, after the size, magic, version, kind and
    checksum checks, without parameters and without reading the payload: a server can find
    the Params a blob needs, or see the Galois elements a key set holds, before loading it.
    (A secret key's metadata holds no secret: its seed is in the payload.)"""
    record = parse(data, max_bytes=max_bytes, expect=_expected_kinds(expect))
    return RecordInfo(record.kind, record.params_id, decode_metadata(record), record.size)


def _expected_kinds(expect: type | tuple[type, ...] | None) -> list[Kind] | None:
    """The kinds whose class is a subclass of ``expect``."""
    if expect is None:
        return None
    classes = expect if isinstance(expect, tuple) else (expect,)
    if not all(isinstance(c, type) for c in classes):
        raise SerializationError(f"loads: expect must be a class or a tuple of classes, got {expect!r}")
    kinds = [kind for kind, cls in _CLASSES.items() if issubclass(cls, classes)]
    if not kinds:
        raise SerializationError(f"loads: no serialized kind is an instance of {expect!r}")
    return kinds


def dump(obj: object, path: str | os.PathLike, *, compress: bool = True, packed: bool = False) -> int:
    """Write :func:`dumps` (obj) to ``path`` atomically (a temporary file in the same folder,
    then a rename); returns the number of bytes written. The file is created with mode 0600
    (owner only; ``tempfile.mkstemp``'s default), which is what a secret key needs."""
    blob = dumps(obj, compress=compress, packed=packed)
    _write_atomically(path, lambda f: f.write(blob))
    return len(blob)


def dump_eval_keys(keys: Iterable[RelinKey | GaloisKey | EncapsulationKey], path: str | os.PathLike, params: Params, *,
                   compress: bool = True, packed: bool = False) -> int:
    """Write an eval key set record to ``path`` from keys that arrive one at a time (e.g. a
    generator that makes each key when asked), holding two keys in memory instead of the set:
    a bootstrapping key set of 40-odd keys at N = 2^16 is about 10 GB. Each key is encoded
    (packed, hashed, written) in a worker thread while ``keys`` makes the next one. The file
    reads back with :func:`load` as an :class:`EvalKeySet`; given the keys in the canonical
    order (relin first, then Galois keys by increasing element, then encapsulation keys by
    direction) it is byte for byte ``dump(EvalKeySet(...))``.
    Returns the number of bytes written; the file appears atomically, as with :func:`dump`.
    """
    if not isinstance(params, Params):
        raise SerializationError(f"dump_eval_keys: params must be a Params, got {type(params).__name__}")
    path = Path(path)
    entries, seen = [], set()
    with tempfile.TemporaryFile(dir=path.parent, prefix=f".{path.name}.members.") as members, \
            ThreadPoolExecutor(max_workers=1) as encoder:

        def encode(key: RelinKey | GaloisKey | EncapsulationKey) -> dict[str, int | str]:
            entry, parts = codecs.encode_key_set_member(key, compress=compress, packed=packed)
            for part in parts:
                members.write(part)
            return entry

        encoding = None
        for key in keys:  # the generator makes this key while the previous one is encoded
            _, held = codecs.key_set_member_id(key)
            if key.params_id != params.params_id:
                raise SerializedParamsMismatchError(f"dump_eval_keys: a key belongs to params_id {key.params_id}, "
                                                    f"expected {params.params_id}")
            if held in seen:
                what = "the relin key" if held is None else f"galois element {held}" if isinstance(held, int) \
                    else f"the {held} key"
                raise SerializationError(f"dump_eval_keys: {what} comes twice")
            seen.add(held)
            if encoding is not None:
                entries.append(encoding.result())
            encoding = encoder.submit(encode, key)
        if encoding is not None:
            entries.append(encoding.result())
        payload_bytes = members.tell()
        members.seek(0)
        return _write_atomically(path, lambda f: write_streamed(
            f, Kind.EVAL_KEY_SET, params.params_id, {"records": entries}, members, payload_bytes))


def _write_atomically(path: str | os.PathLike, write: Callable[[Any], int]) -> int:
    """``write(file)`` into a temporary file beside ``path`` (mode 0600), fsync, then rename."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            written = write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return written


def load(path: str | os.PathLike, params: Params | None = None, *, max_bytes: int = DEFAULT_MAX_BYTES,
         **kwargs: Any) -> Any:
    """:func:`loads` of a file; a file larger than ``max_bytes`` is refused before it is read.
    The file is memory-mapped, not read into a buffer: a multi-GB key set costs its tensors,
    not a second copy of its bytes."""
    size = os.stat(path).st_size
    if size > max_bytes:
        raise SizeLimitError(f"{os.fspath(path)}: file of {size} bytes exceeds max_bytes={max_bytes}")
    with open(path, "rb") as f:
        if size == 0:
            return loads(b"", params, max_bytes=max_bytes, **kwargs)
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            return loads(memoryview(mapped), params, max_bytes=max_bytes, **kwargs)
        finally:
            try:
                mapped.close()
            except BufferError:  # an exception's traceback still holds a view; closed when collected
                pass
