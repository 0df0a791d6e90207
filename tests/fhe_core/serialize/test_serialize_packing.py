"""Bit packing of residue payloads against a Python-integer reference of the documented layout
(limb i of each leading index: one little-endian bit stream of w_i bits per residue), for every
width 0..64, mixed runs of widths and several leading indices; the host path (numpy) and the
device path (torch ops, run here on CPU tensors; on CUDA under ``gpu``) give the same words."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from fhe_core.serialize import fields


def _reference_pack(data: np.ndarray, widths: list[int]) -> bytes:
    out = b""
    for row in data.reshape(-1, *data.shape[-2:]):
        for limb, w in zip(row, widths):
            stream = sum(int(v) << (j * w) for j, v in enumerate(limb))
            out += stream.to_bytes(len(limb) * w // 8, "little")
    return out


def _residues(rng, outer: int, widths: list[int], n: int) -> np.ndarray:
    data = np.zeros((outer, len(widths), n), dtype=np.uint64)
    for i, w in enumerate(widths):
        if w:
            top = rng.integers(0, 2**63, (outer, n), dtype=np.uint64) * np.uint64(2) + np.uint64(1)
            data[:, i] = top >> np.uint64(64 - w)   # w bits, the top one often set
    return data


CASES = [[w] for w in range(0, 65, 7)] + [[64, 1, 63, 0, 40], [58, 40, 40, 40, 58, 58], [43, 43, 44, 44]]


@pytest.mark.parametrize("widths", CASES)
def test_pack_matches_the_bit_stream_reference_and_round_trips(widths):
    rng = np.random.default_rng(sum(widths))
    for outer in (1, 3):
        data = _residues(rng, outer, widths, 128)
        t = torch.from_numpy(data.view(np.int64).copy())
        assert fields.limb_widths(t) == [int(data[:, i].max()).bit_length() for i in range(len(widths))]
        packed = fields.pack_residues(t, fields.limb_widths(t))
        assert packed.tobytes() == _reference_pack(data, fields.limb_widths(t))
        back = fields._unpack(np.frombuffer(packed.tobytes(), dtype=np.uint64), data.shape,
                              tuple(fields.limb_widths(t)))
        assert np.array_equal(back.reshape(data.shape), data)


@pytest.mark.parametrize("w", [1, 13, 40, 43, 58, 61, 64])
def test_device_path_equals_host_path(w):
    """The torch kernels (what a GPU runs) and the numpy ones (the host) on the same groups."""
    rng = np.random.default_rng(w)
    groups = _residues(rng, 1, [w], 64 * 37)[0, 0].reshape(37, 64)
    host = fields._pack_groups(groups, w)
    device = fields._pack_groups(torch.from_numpy(groups.view(np.int64).copy()), w)
    assert np.array_equal(device.numpy().view(np.uint64), host)
    assert np.array_equal(fields._unpack_groups(host, w), groups)
    assert np.array_equal(fields._unpack_groups(device, w).numpy().view(np.uint64), groups)


def test_key_shaped_payload_from_a_strided_view_packs_in_blocks():
    """A compressed key's b parts are a strided view of [dnum, 2, limbs, N] and span many host
    blocks: the same bytes as the contiguous copy, and back."""
    rng = np.random.default_rng(5)
    widths = [61, 61] + [58] * 34 + [40, 40]   # a run of 34 limbs: 2176 groups of 64 per leading index
    key = torch.from_numpy(np.stack([_residues(rng, 2, widths, 4096) for _ in range(2)], axis=1).view(np.int64))
    b = key[:, 0]
    assert not b.is_contiguous() and 34 * 4096 // 64 > fields.CPU_BLOCK_GROUPS
    packed = fields.pack_residues(b, widths)
    assert packed.tobytes() == fields.pack_residues(b.contiguous(), widths).tobytes()
    back = fields._unpack(np.frombuffer(packed.tobytes(), dtype=np.uint64), tuple(b.shape), tuple(widths))
    assert np.array_equal(back.reshape(b.shape).view(np.int64), b.numpy())


@pytest.mark.gpu
def test_cuda_packs_and_unpacks_the_same_bytes():
    rng = np.random.default_rng(9)
    widths = [58, 40, 40, 61, 0, 64]
    data = torch.from_numpy(_residues(rng, 2, widths, 1024).view(np.int64).copy())
    cpu = fields.pack_residues(data, widths)
    assert fields.pack_residues(data.cuda(), widths).tobytes() == cpu.tobytes()
    words = torch.from_numpy(cpu.view(np.int64).copy()).cuda()
    assert torch.equal(fields._unpack(words, tuple(data.shape), tuple(widths)).reshape(data.shape).cpu(), data)
