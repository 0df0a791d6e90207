"""Collectives on ciphertexts and plaintexts over ``torch.distributed`` (NCCL on GPUs, gloo on CPUs).

The process group is the caller's (``torch.distributed.init_process_group``, torchrun or
``torch.multiprocessing.spawn``); every function here is a collective: every rank of ``group``
calls it with objects of the same kind, level, scale and shape, and the residues stay on the
device (NCCL) or in host memory (gloo) the whole way.

**Exact modular sum** (:func:`all_reduce_sum`). Residues are canonical, x in [0, q) with q < 2^61
(``fhe_core.params``: primes of at most 61 bits), and the backends sum int64 words: k words of up
to 61 bits stay below 2^63 only for k <= 4 (k (q - 1) < 2^63). Two exact ways:

* ``"sum"``: lift every residue to its centred representative c in (-q/2, q/2), all-reduce the
  int64 words, reduce once, ``torch.remainder(sum, q)`` (exact, in [0, q)). Any partial sum of k
  centred words has |s| <= k (q - 1) / 2, below 2^63 while k (q - 1) / 2 < 2^63: every k <= 8 at
  61-bit primes (any k <= 2^(64 - b) at b-bit primes), whatever order the backend adds in, so the
  result does not depend on the reduction order (integer addition is associative without
  overflow). A ring all-reduce sends and receives 2 (k - 1) / k S bytes per rank for S bytes of
  residues (the minimum for an all-reduce).
* ``"gather"``: all-gather the k canonical copies, then add them on the device one rank at a time
  with a conditional subtraction (each partial sum < 2q < 2^62). Each rank receives (k - 1) S
  bytes: the same as ``"sum"`` at k = 2, k / 2 times more above. The fallback where the centred
  bound fails (k > 8 at 61-bit primes: more than one host of GPUs).

``"auto"`` takes ``"sum"`` when its bound holds (:func:`sum_method`). Several objects travel in
one flat buffer: one collective per call, not per object.

**Broadcast** (:func:`broadcast`): the source's object (its metadata through a small pickled
message, then the residues through one broadcast); receivers allocate on ``params.device``.
**Gather** (:func:`gather`): lists of objects (a shard each, lengths may differ) concatenated in
rank order on one rank, for sharded predictions. :func:`check_replicated` proves replicas
identical (one broadcast and one flag all-reduce); :func:`shard_range` splits a count into
contiguous shares. :func:`spawn` runs a function on k fresh processes of one host (spawned, never
forked: CUDA cannot be forked) with a file rendezvous and returns what each rank returned; across
hosts, torchrun starts the ranks and the same functions run unchanged.

Objects: :class:`fhe_core.rlwe.Ciphertext` (CKKS and BFV ciphertexts: ``[d+1, l+1, N]`` over
Q_l), :class:`fhe_core.ckks.Plaintext` (``[l+1, N]`` over Q_l), :class:`fhe_core.bfv.Plaintext`
(``[N]`` mod t). Results carry the canonical mark (``rlwe.checks``); inputs without it are checked.

Layer: imports rlwe, ckks, bfv, params and errors (beside serialize; neither imports the other).
"""
from __future__ import annotations

import dataclasses
import datetime
import functools
import hashlib
import multiprocessing
import os
import queue
import tempfile
import traceback
from collections.abc import Callable, Sequence
from typing import Any, Literal, Union

import torch
import torch.distributed as dist

from fhe_core import bfv, ckks, rlwe
from fhe_core.errors import CollectiveError, FHEError, ParameterError, ParamsMismatchError, ResidueError
from fhe_core.params import Params
from fhe_core.rlwe.checks import is_marked_canonical, mark_canonical

Residues = Union[rlwe.Ciphertext, ckks.Plaintext, bfv.Plaintext]  # noqa: UP007 (a runtime alias)
Method = Literal["auto", "sum", "gather"]
KINDS = (rlwe.Ciphertext, ckks.Plaintext, bfv.Plaintext)
# torch >= 2.13 names all_gather_into_tensor all_gather_single (the old name warns)
_all_gather_single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_WORD_LIMIT = 2 ** 63  # int64: every partial sum of the "sum" method stays below it in absolute value


# ---- planning ----------------------------------------------------------------------------------------

def sum_method(world: int, max_modulus: int) -> Literal["sum", "gather"]:
    """``"sum"`` when k centred residues of a modulus up to ``max_modulus`` add up below 2^63
    in absolute value (k (q - 1) / 2 < 2^63), else ``"gather"`` (module docstring)."""
    return "sum" if world * ((max_modulus - 1) // 2) < _WORD_LIMIT else "gather"


def bytes_received(method: Literal["sum", "gather"], world: int, nbytes: int) -> int:
    """Bytes each rank receives for ``nbytes`` of residues: ring all-reduce 2 (k - 1) / k S,
    all-gather (k - 1) S (what the backends move at least; NCCL's trees and rings reach it)."""
    return 2 * (world - 1) * nbytes // world if method == "sum" else (world - 1) * nbytes


def shard_range(count: int, rank: int, world: int) -> range:
    """The contiguous share of ``count`` items of ``rank`` among ``world`` (sizes differ by at most
    one; the shares in rank order are range(count))."""
    if world < 1 or not 0 <= rank < world or count < 0:
        raise ParameterError(f"shard_range: need world >= 1, 0 <= rank < world and count >= 0; got "
                             f"count {count}, rank {rank}, world {world}")
    return range(rank * count // world, (rank + 1) * count // world)


# ---- the objects ---------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=64)
def _moduli_tensor(moduli: tuple[int, ...], device: torch.device, dims: int) -> torch.Tensor:
    """``[len(moduli)] + [1] * (dims - 1)`` int64 on ``device``: broadcasts over a limb-major tensor."""
    return torch.tensor(moduli, dtype=torch.int64, device=device).view(-1, *([1] * (dims - 1)))


def _moduli(obj: Residues, params: Params, op: str) -> torch.Tensor:
    """The moduli of ``obj``'s residues, shaped to broadcast against ``obj.data``."""
    if not isinstance(obj, KINDS):
        raise ParameterError(f"{op}: expected ciphertexts or plaintexts ({', '.join(k.__qualname__ for k in KINDS)}), "
                             f"got {type(obj).__name__}")
    if obj.params_id != params.params_id:
        raise ParamsMismatchError(f"{op}: an object belongs to params {obj.params_id[:12]!r}, "
                                  f"not {params.params_id[:12]!r}")
    if isinstance(obj, bfv.Plaintext):
        return _moduli_tensor((params.plaintext_modulus,), obj.data.device, 1)
    if obj.level > params.max_level:
        raise ParameterError(f"{op}: level {obj.level} above the parameters' {params.max_level}")
    return _moduli_tensor(params.q_primes[:obj.level + 1], obj.data.device, 2)


def _check_inputs(objs: Sequence[Residues], params: Params, group, op: str) -> list[torch.Tensor]:
    """The moduli of every object, after the local checks: kind, params, one device the group's
    backend reaches, canonical residues (objects without the mark are read once, as the evaluators do)."""
    moduli = [_moduli(obj, params, op) for obj in objs]
    if not objs:
        return moduli
    devices = {obj.data.device for obj in objs}
    if len(devices) > 1:
        raise CollectiveError(f"{op}: the objects are on several devices {sorted(map(str, devices))}")
    device = devices.pop()
    if dist.get_backend(group) == "nccl" and device.type != "cuda":
        raise CollectiveError(f"{op}: the NCCL backend needs CUDA tensors, the objects are on {device}")
    for obj, q in zip(objs, moduli):
        if not is_marked_canonical(obj) and bool(((obj.data < 0) | (obj.data >= q)).any()):
            raise ResidueError(f"{op}: an object has residues outside [0, q) (hand-built or corrupted data)")
    return moduli


def _signature(obj: Residues) -> list[int]:
    """What must agree across ranks for a sum: kind, shape, level, scale (exact), slots, domain, params."""
    kind = KINDS.index(next(k for k in KINDS if isinstance(obj, k)))
    shape = list(obj.data.shape) + [0] * (3 - obj.data.dim())
    scale = getattr(obj, "scale", 0.0)
    scale_bits = int(torch.tensor(float(scale), dtype=torch.float64).view(torch.int64))
    params = int.from_bytes(hashlib.blake2b(obj.params_id.encode(), digest_size=7).digest(), "little")
    return [kind, *shape, getattr(obj, "level", -1), scale_bits, getattr(obj, "slots", 0),
            int(getattr(obj, "is_ntt", False)), params]


def _group_device(group) -> torch.device:
    """Where the group's backend takes tensors: this rank's current GPU for NCCL, else the host."""
    return torch.device("cuda", torch.cuda.current_device()) if dist.get_backend(group) == "nccl" \
        else torch.device("cpu")


def _refused(op: str, refusal: Exception | None, refusing: list[int]) -> None:
    """Raise on every rank when some rank refused its inputs: its own error where it did, a
    CollectiveError naming the refusing ranks elsewhere (so that no rank waits in a collective)."""
    if refusal is not None:
        raise refusal
    if refusing:
        raise CollectiveError(f"{op}: rank(s) {refusing} refused their inputs (their error says why)")


def _agree(objs: Sequence[Residues], group, op: str, refusal: Exception | None = None) -> None:
    """CollectiveError on every rank (not a hang, not garbage) unless every rank accepted its inputs
    (``refusal`` None) and passed objects of the same signature: two small all-gathers, one sync."""
    device = _group_device(group)
    status = torch.tensor([len(objs), refusal is not None], dtype=torch.int64, device=device)
    statuses = [torch.empty_like(status) for _ in range(dist.get_world_size(group))]
    dist.all_gather(statuses, status, group=group)
    _refused(op, refusal, [rank for rank, s in enumerate(statuses) if int(s[1])])
    counts = [int(s[0]) for s in statuses]
    if len(set(counts)) != 1:
        raise CollectiveError(f"{op}: the ranks passed different numbers of objects {counts}")
    if not counts[0]:
        return
    mine = torch.tensor([_signature(obj) for obj in objs], dtype=torch.int64, device=device)
    every = [torch.empty_like(mine) for _ in statuses]
    dist.all_gather(every, mine, group=group)
    if any(not torch.equal(other, every[0]) for other in every[1:]):
        raise CollectiveError(f"{op}: the ranks passed objects that differ in kind, shape, level, scale, slots, "
                              "domain or parameters")


def _header(obj: Residues) -> tuple:
    """What a receiver needs to rebuild ``obj`` around its residues: class, fields, shape, mark."""
    fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.name != "data"}
    return type(obj), fields, tuple(obj.data.shape), is_marked_canonical(obj)


def _rebuild(header: tuple, data: torch.Tensor, params: Params, op: str) -> Residues:
    """The object of :func:`_header` around ``data`` (on ``params.device``), after checking that
    the sender named a ciphertext or plaintext class of these parameters."""
    kind, fields, _, canonical = header
    if not (isinstance(kind, type) and issubclass(kind, KINDS)):
        raise CollectiveError(f"{op}: a rank sent a {kind!r}, not a ciphertext or plaintext")
    if fields.get("params_id") != params.params_id:
        raise ParamsMismatchError(f"{op}: a rank sent an object of other parameters than {params.params_id[:12]!r}")
    out = kind(data=data.to(params.device), **fields)
    return mark_canonical(out) if canonical else out


def _with_data(obj: Residues, data: torch.Tensor) -> Residues:
    """``obj`` with new canonical ``data`` (every other field kept; a fresh encryption's seed dropped)."""
    out = obj.replace(data=data) if isinstance(obj, rlwe.Ciphertext) else dataclasses.replace(obj, data=data)
    return mark_canonical(out)


def _flat(objs: Sequence[Residues], device: torch.device) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """One contiguous int64 buffer for every object's residues, and a view of it shaped as each."""
    total = sum(obj.data.numel() for obj in objs)
    flat = torch.empty(total, dtype=torch.int64, device=device)
    views, start = [], 0
    for obj in objs:
        views.append(flat[start:start + obj.data.numel()].view(obj.data.shape))
        start += obj.data.numel()
    return flat, views


# ---- collectives -------------------------------------------------------------------------------------

def all_reduce_sum(objs: Sequence[Residues], params: Params, *, group=None, method: Method = "auto",
                   check: bool = True) -> list[Residues]:
    """The exact sum over the ranks of each object (mod its moduli), on every rank.

    Args:
        objs: this rank's summands, one per sum (ciphertexts, CKKS or BFV plaintexts of ``params``);
            every rank passes the same kinds, shapes, levels and scales in the same order.
        method: ``"sum"``, ``"gather"`` or ``"auto"`` (module docstring; ``"sum"`` refuses a world
            where its bound fails).
        check: compare the objects' metadata across ranks first (one small all-gather and a device
            sync); a caller whose ranks run one deterministic program may skip it.
    Returns new objects with the metadata of ``objs`` (a ciphertext sum keeps the common scale).
    """
    op = "all_reduce_sum"
    objs = list(objs)
    world, refusal, moduli = dist.get_world_size(group), None, []
    largest = max(max(params.q_primes), params.plaintext_modulus)
    chosen = sum_method(world, largest) if method == "auto" else method
    try:
        if chosen not in ("sum", "gather"):
            raise ParameterError(f"{op}: method must be 'auto', 'sum' or 'gather', got {method!r}")
        if chosen == "sum" and sum_method(world, largest) != "sum":
            raise CollectiveError(f"{op}: {world} centred residues of up to {largest.bit_length()} bits can reach "
                                  "2^63; use method='gather' (or 'auto')")
        moduli = _check_inputs(objs, params, group, op)
    except FHEError as exc:
        refusal = exc
    if check:
        _agree(objs, group, op, refusal)
    elif refusal is not None:
        raise refusal
    if not objs:
        return []
    device = objs[0].data.device
    flat, views = _flat(objs, device)
    if chosen == "sum":
        for obj, view, q in zip(objs, views, moduli):
            torch.where(obj.data > q // 2, obj.data - q, obj.data, out=view)  # centred: |c| <= (q - 1) / 2
        dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=group)
        return [_with_data(obj, torch.remainder(view, q)) for obj, view, q in zip(objs, views, moduli)]
    for obj, view in zip(objs, views):
        view.copy_(obj.data)
    gathered = torch.empty(world * flat.numel(), dtype=torch.int64, device=device)
    _all_gather_single(gathered, flat, group=group)
    gathered = gathered.view(world, flat.numel())
    out, start = [], 0
    for obj, q in zip(objs, moduli):
        parts = gathered[:, start:start + obj.data.numel()].reshape(world, *obj.data.shape)
        start += obj.data.numel()
        total = parts[0].clone()
        for part in parts[1:]:  # a loop over ranks, each step one elementwise pass: total < 2q < 2^62
            total += part
            total -= q * (total >= q)
        out.append(_with_data(obj, total))
    return out


def broadcast(obj: Residues | None, params: Params, *, src: int = 0, group=None) -> Residues:
    """The object of rank ``src`` on every rank (``obj`` is ignored elsewhere: pass None).
    Receivers get it on ``params.device``; the canonical mark travels with it. An object ``src``
    refuses raises on every rank."""
    op = "broadcast"
    device = _group_device(group)
    header: list = [None]
    if dist.get_rank() == src:
        try:
            _check_inputs([obj], params, group, op)
            header = [_header(obj)]
        except FHEError as exc:
            header = [exc]
    dist.broadcast_object_list(header, src=src, group=group, device=device)
    if isinstance(header[0], FHEError):
        _refused(op, header[0] if dist.get_rank() == src else None, [src])
    if dist.get_rank() == src:
        dist.broadcast(obj.data.contiguous(), src=src, group=group)
        return obj
    data = torch.empty(header[0][2], dtype=torch.int64, device=device)
    dist.broadcast(data, src=src, group=group)
    return _rebuild(header[0], data, params, op)


def gather(objs: Sequence[Residues], params: Params, *, dst: int = 0, group=None) -> list[Residues] | None:
    """Every rank's ``objs`` (lists of any lengths, e.g. the shares of :func:`shard_range`), in rank
    order, on rank ``dst`` (on ``params.device``); None on the others. Metadata through one small
    pickled all-gather, the residues through one gather of each rank's flat buffer (padded to the
    longest). Inputs one rank refuses raise on every rank."""
    op = "gather"
    objs = list(objs)
    device = _group_device(group)
    try:
        _check_inputs(objs, params, group, op)
        mine: object = [_header(o) for o in objs]
    except FHEError as exc:
        mine = exc
    headers: list = [None] * dist.get_world_size(group)
    dist.all_gather_object(headers, mine, group=group)
    _refused(op, mine if isinstance(mine, FHEError) else None,
             [rank for rank, h in enumerate(headers) if isinstance(h, FHEError)])
    sizes = [sum(torch.Size(h[2]).numel() for h in header) for header in headers]
    padded = torch.zeros(max(sizes), dtype=torch.int64, device=device)
    start = 0
    for obj in objs:
        padded[start:start + obj.data.numel()] = obj.data.reshape(-1)
        start += obj.data.numel()
    receive = [torch.empty_like(padded) for _ in headers] if dist.get_rank() == dst else None
    dist.gather(padded, receive, dst=dst, group=group)
    if receive is None:
        return None
    out = []
    for header, buffer in zip(headers, receive):
        start = 0
        for h in header:
            size = torch.Size(h[2]).numel()
            out.append(_rebuild(h, buffer[start:start + size].view(h[2]).clone(), params, op))
            start += size
    return out


def check_replicated(objs: Sequence[Residues], params: Params, *, group=None, src: int = 0) -> None:
    """CollectiveError on every rank unless every rank holds objects identical (metadata and every
    residue) to rank ``src``'s: one broadcast of the residues and one all-reduce of a flag."""
    op = "check_replicated"
    objs = list(objs)
    try:
        _check_inputs(objs, params, group, op)
        refusal = None
    except FHEError as exc:
        refusal = exc
    _agree(objs, group, op, refusal)
    if not objs:
        return
    device = objs[0].data.device
    flat, views = _flat(objs, device)
    for obj, view in zip(objs, views):
        view.copy_(obj.data)
    reference = flat.clone()
    dist.broadcast(reference, src=src, group=group)
    differs = torch.tensor([int(not torch.equal(reference, flat))], dtype=torch.int64, device=device)
    dist.all_reduce(differs, op=dist.ReduceOp.MAX, group=group)
    if int(differs):
        raise CollectiveError(f"{op}: the replicas differ from rank {src}'s (residues)")


# ---- launching -------------------------------------------------------------------------------------------

def spawn(fn: Callable[..., Any], world: int, *args: Any, backend: str = "gloo",
          timeout_s: float = 600.0) -> list[Any]:
    """``fn(rank, world, *args)`` on ``world`` spawned processes in one process group; returns the
    values in rank order. ``backend="nccl"`` gives rank r the GPU r (mod the count); with gloo the
    ranks share the host's cores (torch threads split among them). ``fn`` and ``args`` must pickle
    (``fn`` a module-level function). A rank that raises stops every rank (killed: the others may
    wait in a collective) and its traceback is raised here as a CollectiveError; so is a rank that
    dies, or a run past ``timeout_s``."""
    if world < 1:
        raise ParameterError(f"spawn: world must be >= 1, got {world}")
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    with tempfile.TemporaryDirectory(prefix="fhe-dist-") as folder:
        init = f"file://{os.path.join(folder, 'rendezvous')}"
        ranks = [context.Process(target=_rank_main, args=(fn, rank, world, backend, init, timeout_s, results, args),
                                 name=f"fhe-rank-{rank}") for rank in range(world)]
        for process in ranks:
            process.start()
        done = False
        try:
            values = _collect(ranks, results, timeout_s)
            done = True
        finally:
            for process in ranks:
                if done:  # every rank has answered: let it leave its process group and exit
                    process.join(timeout=60)
                if process.is_alive():
                    process.kill()
                process.join()
            results.close()
            results.join_thread()
    return values


def _collect(ranks: list, results, timeout_s: float) -> list[Any]:
    values: dict[int, Any] = {}
    waited = 0.0
    while len(values) < len(ranks):
        try:
            rank, ok, value = results.get(timeout=1.0)
        except queue.Empty:
            waited += 1.0
            dead = [p.name for p in ranks if p.exitcode not in (None, 0)]
            if dead or waited > timeout_s:
                raise CollectiveError(f"spawn: {', '.join(dead)} died" if dead else
                                      f"spawn: no result after {timeout_s:.0f} s") from None
            continue
        if not ok:
            raise CollectiveError(f"spawn: rank {rank} raised:\n{value}")
        values[rank] = value
    return [values[rank] for rank in range(len(ranks))]


def _rank_main(fn, rank: int, world: int, backend: str, init: str, timeout_s: float, results, args) -> None:
    try:
        if backend == "nccl":
            torch.cuda.set_device(rank % torch.cuda.device_count())
        else:
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
        dist.init_process_group(backend, init_method=init, rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=timeout_s))
        try:
            results.put((rank, True, fn(rank, world, *args)))
        finally:
            dist.destroy_process_group()
    except BaseException:  # noqa: B036 (reported to the parent, which stops every rank)
        results.put((rank, False, traceback.format_exc()))


__all__ = ["KINDS", "Residues", "all_reduce_sum", "broadcast", "bytes_received", "check_replicated", "gather",
           "shard_range", "spawn", "sum_method"]
