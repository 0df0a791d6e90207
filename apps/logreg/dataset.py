"""The encrypted training set a client sends to the server: z = y x packed block by block.

Block b of the public mini-batch schedule (``MiniBatchSchedule.block_rows(b)``) is packed in
``ciphertexts_per_batch`` ciphertexts of :class:`ml.packing.ColumnMajorLayout` (zero rows pad a short
last block). Serialized as a small JSON header (a length-prefixed record) followed by every
ciphertext through :func:`fhe_core.serialize.dumps_many`.
"""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass

from fhe_core import serialize
from fhe_core.ckks import Ciphertext
from fhe_core.errors import SerializationError
from fhe_core.params import Params

MAGIC = b"HELRDATA"
_HEADER = struct.Struct("<8sI")  # magic, JSON length
MAX_HEADER_BYTES = 1 << 16


@dataclass(frozen=True)
class EncryptedDataset:
    """``blocks[b]``: the ciphertexts of schedule block b (``[n_blocks][per_block]``).

    samples: training rows; features: design-matrix columns (bias included); batch_size: rows per
    block. All ciphertexts share one level, scale and slot count.
    """

    blocks: tuple[tuple[Ciphertext, ...], ...]
    samples: int
    features: int
    batch_size: int

    @property
    def n_blocks(self) -> int:
        return len(self.blocks)

    @property
    def ciphertexts(self) -> list[Ciphertext]:
        return [ct for block in self.blocks for ct in block]

    def to_bytes(self) -> bytes:
        header = json.dumps({"samples": self.samples, "features": self.features, "batch_size": self.batch_size,
                             "blocks": [len(b) for b in self.blocks]}, sort_keys=True).encode()
        return _HEADER.pack(MAGIC, len(header)) + header + serialize.dumps_many(self.ciphertexts, packed=True)

    @classmethod
    def from_bytes(cls, data: bytes, params: Params, *, device=None,
                   max_bytes: int = serialize.DEFAULT_MAX_BYTES) -> EncryptedDataset:
        """Read :meth:`to_bytes` output for ``params`` (every ciphertext record is checked)."""
        view = memoryview(data)
        if len(view) < _HEADER.size:
            raise SerializationError("EncryptedDataset: truncated header")
        magic, length = _HEADER.unpack_from(view)
        if magic != MAGIC or length > MAX_HEADER_BYTES or len(view) < _HEADER.size + length:
            raise SerializationError("EncryptedDataset: not an encrypted HELR dataset (bad magic or header length)")
        try:
            header = json.loads(bytes(view[_HEADER.size:_HEADER.size + length]))
            counts = [int(c) for c in header["blocks"]]
            samples, features, batch = (int(header[k]) for k in ("samples", "features", "batch_size"))
        # OverflowError: int() of an infinity (1e999 in JSON); RecursionError: nesting too deep
        except (ValueError, KeyError, TypeError, OverflowError, RecursionError) as exc:
            raise SerializationError(f"EncryptedDataset: bad header ({exc})") from None
        if not counts or min(counts) < 1 or min(samples, features, batch) < 1:
            raise SerializationError(f"EncryptedDataset: bad header {header}")
        cts = serialize.loads_many(view[_HEADER.size + length:], params, device=device, max_bytes=max_bytes,
                                   expect=Ciphertext, max_count=sum(counts))
        if len(cts) != sum(counts):
            raise SerializationError(f"EncryptedDataset: {len(cts)} ciphertexts, the header says {sum(counts)}")
        blocks, start = [], 0
        for count in counts:
            blocks.append(tuple(cts[start:start + count]))
            start += count
        return cls(tuple(blocks), samples, features, batch)
