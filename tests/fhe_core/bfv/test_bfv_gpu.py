"""CPU and CUDA give bit-identical BFV keys and ciphertexts for the same fixed seeds (tests only).

The CUDA run carries the ``gpu`` marker (skipped without a device); the CPU-only case checks the
pipeline is reproducible, so the body is exercised everywhere.
"""
import numpy as np
import pytest
import torch

from bfv_helpers import METHODS, SMALL, TEST_PRESETS, fixed_seed, session


def _pipeline(name: str, device: str, method: str = "hybrid") -> dict[str, torch.Tensor]:
    """Fixed-seed keys and encryptions, then every evaluator operation, decrypted results too."""
    s = session(name, device, seed_label=f"bfv-gpu/{name}", key_switching=method)
    ev, enc = s.evaluator, s.encoder
    a = np.arange(s.n, dtype=np.int64) * 7919 % s.t
    b = (np.arange(s.n, dtype=np.int64) ** 2 + 3) % s.t
    pa, pb = enc.encode(a), enc.encode(b)
    ca = s.encryptor.encrypt(pa, seed=fixed_seed("ct/a"))
    cb = s.sk_encryptor.encrypt(pb, seed=fixed_seed("ct/b"))
    out = {"pt": pa.data, "enc_pk": ca.data, "enc_sk": cb.data, "relin_key": ev.keys.relin_key("test").data}
    product = ev.multiply(ca, cb)
    relin = ev.relinearize(product)
    out.update({
        "add": ev.add(ca, cb).data, "sub": ev.sub(ca, cb).data, "negate": ev.negate(ca).data,
        "add_plain": ev.add_plain(ca, pb).data, "multiply_plain": ev.multiply_plain(ca, pb).data,
        "multiply_scalar": ev.multiply_scalar(ca, -5).data, "multiply": product.data, "relin": relin.data,
        "rotate": ev.rotate_rows(relin, 3).data, "rotate_back": ev.rotate_rows(ca, -1).data,
        "swap": ev.swap_columns(ca).data, "hoisted": ev.rotate_rows_hoisted(ca, [1, -7])[-7].data,
        "mod_switch": ev.mod_switch_to_next(product).data,
        "decrypted": s.decryptor.decrypt(relin).data,
    })
    return {k: v.cpu() for k, v in out.items()}


def _assert_identical(x: dict, y: dict) -> None:
    assert x.keys() == y.keys()
    for name in x:
        assert torch.equal(x[name], y[name]), name


@pytest.mark.parametrize("method", METHODS)
def test_fixed_seed_pipeline_is_reproducible_on_cpu(method):
    _assert_identical(_pipeline(SMALL, "cpu", method), _pipeline(SMALL, "cpu", method))


@pytest.mark.gpu
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", TEST_PRESETS)
def test_cpu_and_cuda_bfv_ciphertexts_are_bit_identical(name, method):
    _assert_identical(_pipeline(name, "cpu", method), _pipeline(name, "cuda", method))


@pytest.mark.gpu
def test_graph_replay_equals_eager_and_a_capture_keeps_no_plaintext_form():
    """The evaluator's operations captured in one CUDA graph (as scripts/bench.py times them) replay to the eager
    words; a plaintext first used inside the capture keeps no operand form (plain_operand: its kernels had only been
    recorded), and its eager use afterwards gives the same words."""
    from fhe_core.bfv.encryption import PLAIN_FORMS

    s = session(SMALL, "cuda", seed_label="bfv-graph")
    ev, enc = s.evaluator, s.encoder
    ca = s.encryptor.encrypt(enc.encode(np.arange(s.n, dtype=np.int64) * 31 % s.t), seed=fixed_seed("graph/a"))
    cb = s.encryptor.encrypt(enc.encode(np.arange(s.n, dtype=np.int64) * 17 % s.t), seed=fixed_seed("graph/b"))

    def circuit(pt):
        product = ev.multiply_relin(ca, cb)
        return [product.data, ev.rotate_rows(product, 1).data, ev.swap_columns(ca).data, ev.add(ca, cb).data,
                ev.multiply_plain(ca, pt).data, ev.add_plain(ca, pt).data, ev.multiply_scalar(ca, 3).data,
                ev.mod_switch_to_next(product).data]

    circuit(enc.encode(np.ones(s.n, dtype=np.int64)))  # warm-up: tables built outside the capture
    fresh = enc.encode(np.arange(s.n, dtype=np.int64) % s.t)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        captured = circuit(fresh)
    torch.cuda.current_stream().wait_stream(stream)
    assert not fresh.__dict__.get(PLAIN_FORMS)
    graph.replay()
    torch.cuda.synchronize()
    replayed = [t.clone() for t in captured]
    eager = circuit(fresh)
    assert fresh.__dict__.get(PLAIN_FORMS)
    for i, (x, y) in enumerate(zip(replayed, eager)):
        assert torch.equal(x, y), i


def test_graphed_evaluator_needs_a_cuda_device():
    from fhe_core.errors import ParameterError

    with pytest.raises(ParameterError, match="GraphedEvaluator: CUDA graphs need an evaluator on a CUDA device"):
        session(SMALL).evaluator.graphed()


@pytest.mark.gpu
@pytest.mark.parametrize("method", METHODS)
def test_graphed_evaluator_equals_eager_bit_for_bit_and_checks_like_it(method):
    """Evaluator.graphed(): every graphed operation, captured on its first call and replayed on the next ones (other
    inputs, other levels: a graph per key), gives the eager words; errors are the eager ones (a corrupted operand, a
    degree or level mismatch, a missing key) and capture nothing."""
    from fhe_core.bfv.graphed import GRAPHED
    from fhe_core.errors import LevelMismatchError, MissingKeyError, ParameterError, ResidueError

    s = session(SMALL, "cuda", seed_label=f"bfv-graphed/{method}", key_switching=method)
    ev, graphed = s.evaluator, s.evaluator.graphed()
    cts = [s.encryptor.encrypt(s.encoder.encode(np.arange(s.n, dtype=np.int64) * (7 + i) % s.t),
                               seed=fixed_seed(f"graphed/{i}")) for i in range(3)]
    low = [ev.mod_switch_to_next(ct) for ct in cts]
    for a, b in ((cts[0], cts[1]), (cts[1], cts[2]), (low[0], low[1]), (cts[2], cts[0])):
        product = ev.multiply(a, b)
        calls = {"multiply": (a, b), "relinearize": (product,), "multiply_relin": (a, b), "rotate_rows": (a, 3),
                 "swap_columns": (a,), "mod_switch_to_next": (product,)}
        assert set(calls) == set(GRAPHED)
        for op, args in calls.items():
            assert getattr(graphed, op)(*args).data.equal(getattr(ev, op)(*args).data), op
    assert graphed.add(cts[0], cts[1]).data.equal(ev.add(cts[0], cts[1]).data)  # the rest: the evaluator's
    bad = cts[0].replace(data=cts[0].data.clone())
    bad.data[1, 0, 5] = -3
    with pytest.raises(ResidueError, match="multiply_relin"):
        graphed.multiply_relin(bad, cts[1])
    with pytest.raises(ParameterError, match="degree-1"):
        graphed.multiply(ev.multiply(cts[0], cts[1]), cts[1])
    with pytest.raises(LevelMismatchError):
        graphed.multiply_relin(cts[0], low[1])
    with pytest.raises(MissingKeyError):
        graphed.rotate_rows(cts[0], 2)  # no key for 2 steps in this session
