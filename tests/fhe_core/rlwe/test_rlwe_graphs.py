"""fhe_core.rlwe.graphs: CUDA-graph replay of ciphertext circuits against the eager calls.

Exactness required everywhere: every word of every output and its metadata equal to the eager
circuit's (the same kernels on the same data). Keys and values are fresh each run (the values'
rng seed is printed: fhe_reference.fresh_rng).

On CUDA: results equal the eager circuit's bit for bit on the captured input and on new data,
one graph per metadata signature (levels), the least recently used dropped past the bound, and
a replay still right after the evaluator's constant cache was cleared and its memory reused (the
graph keeps the constants it reads). Everywhere: the refusals (inputs without checked residues,
inputs off CUDA) and what a signature tells apart.
"""
import threading

import pytest
import torch

from fhe_core import ckks, rlwe
from fhe_core.ckks import evaluator as evaluator_module
from fhe_core.errors import ParameterError
from fhe_core.params import preset
from fhe_core.rlwe.checks import mark_canonical
from fhe_core.rlwe.graphs import CapturedCircuit, GraphedFunction, StreamFanOut, signature
from fhe_reference import fresh_rng
from object_lifetime import assert_freed_when_dropped

PRESET = "N11QP342L4D3Insecure"  # N = 2^11, L = 4, scale 2^40


class Setup:
    def __init__(self, device: str):
        self.params = preset(PRESET, allow_insecure=True, device=device)
        ctx = ckks.rlwe_context(self.params)
        self.sk = rlwe.gen_secret_key(ctx)
        self.keys = rlwe.gen_eval_keys(ctx, self.sk, ckks.galois_elements(self.params.n, [1, 5]))
        self.encoder = ckks.Encoder(self.params)
        self.encryptor = ckks.Encryptor(self.params, self.sk)
        self.evaluator = ckks.Evaluator(self.params, self.keys)
        self.rng, _ = fresh_rng()

    def encrypt(self, level: int | None = None):
        """A fresh encryption of fresh random values (the seed printed: fhe_reference.fresh_rng)."""
        values = self.rng.uniform(-1, 1, self.params.slots)
        return self.encryptor.encrypt(self.encoder.encode(values, level=level))

    def circuit(self, a, b):
        """A product, rotations, a constant added at the product's scale (a constant that follows the
        scale, as the HELR cubic's), and a second output: what a graph must reproduce."""
        ev = self.evaluator
        prod = ev.rescale(ev.mul_relin(a, b))
        rotated = ev.add(ev.rotate(prod, 1), ev.rotate(prod, 5))
        return ev.add(rotated, 0.375), ev.sub(a, b)


def assert_same(outs, expected):
    assert len(outs) == len(expected)
    for out, ref in zip(outs, expected):
        assert torch.equal(out.data, ref.data)
        assert (out.level, out.scale, out.slots) == (ref.level, ref.scale, ref.slots)


@pytest.fixture(scope="module")
def cuda_setup():
    return Setup("cuda")


@pytest.mark.gpu
def test_replays_equal_the_eager_circuit_bit_for_bit(cuda_setup):
    s = cuda_setup
    graphed = GraphedFunction(s.circuit, keep=s.evaluator.device_constants)
    for _ in range(3):  # captured on the first, replayed on new data after
        a, b = s.encrypt(), s.encrypt()
        assert_same(graphed(a, b), s.circuit(a, b))
    assert graphed.graphs == 1
    a, b = s.encrypt(level=2), s.encrypt(level=2)  # another signature: another graph
    assert_same(graphed(a, b), s.circuit(a, b))
    assert graphed.graphs == 2


@pytest.mark.gpu
def test_a_constant_that_changes_enters_as_a_plaintext(cuda_setup):
    """One graph (the multiplier's metadata is the same), three constants: each replay multiplies by
    the plaintext it is given, as the eager product does."""
    s = cuda_setup
    ev = s.evaluator
    a = s.encrypt()
    q = float(s.params.q_primes[a.level])

    def scaled(ct, multiplier):
        return (ev.rescale(ev.mul(ct, multiplier)),)

    graphed = GraphedFunction(scaled, keep=ev.device_constants)
    for value in (0.5, -1.75, 3.125):
        multiplier = mark_canonical(ckks.Plaintext(data=ev.encode_constant(value, q, a.level), level=a.level,
                                                   scale=q, params_id=s.params.params_id, slots=a.slots))
        assert_same(graphed(a, multiplier), scaled(a, multiplier))
        assert torch.equal(graphed(a, multiplier)[0].data, ev.rescale(ev.mul(a, value)).data)
    assert graphed.graphs == 1


@pytest.mark.gpu
def test_least_recently_used_graph_is_dropped_past_the_bound(cuda_setup):
    s = cuda_setup
    graphed = GraphedFunction(s.circuit, keep=s.evaluator.device_constants, max_graphs=1)
    for level in (3, 2, 3):
        a, b = s.encrypt(level=level), s.encrypt(level=level)
        assert_same(graphed(a, b), s.circuit(a, b))
        assert graphed.graphs == 1


@pytest.mark.gpu
def test_a_replay_survives_the_constant_cache_being_cleared(cuda_setup, monkeypatch):
    """The graph reads the constant 0.375 from the evaluator's cache by address; the cache clears
    when full and its freed memory is taken by new tensors. Without the kept references the replay
    would read those tensors' bytes."""
    s = cuda_setup
    ev = ckks.Evaluator(s.params, s.keys)  # a fresh cache
    monkeypatch.setattr(evaluator_module, "CONSTANT_CACHE_SIZE", 4)

    def circuit(a, b):
        return (ev.add(ev.rescale(ev.mul_relin(a, b)), 0.375),)

    graphed = GraphedFunction(circuit, keep=ev.device_constants)
    a, b = s.encrypt(), s.encrypt()
    expected = circuit(a, b)
    graphed(a, b)  # captured
    x = s.encrypt()
    for k in range(40):  # clears the cache several times; its constants go back to the allocator
        ev.add(x, 1.0 + k / 64)
    litter = [torch.full((4096,), -1, dtype=torch.int64, device="cuda") for _ in range(64)]
    assert_same(graphed(a, b), expected)
    del litter


@pytest.mark.gpu
def test_capture_beside_another_thread_working_on_the_device(cuda_setup):
    """As in a server's worker: a job thread captures while the main thread evaluates, allocates and
    reads results back to the host (a synchronising copy) on the same device. Neither thread fails
    and both get the eager results."""
    s = cuda_setup
    a, b = s.encrypt(), s.encrypt()
    expected = s.circuit(a, b)
    other = ckks.Evaluator(s.params, s.keys)
    x = s.encrypt()
    reference = other.rescale(other.mul_relin(x, x)).data.cpu()
    stop, errors, rounds = threading.Event(), [], [0]

    def predictions():
        try:
            while not stop.is_set():
                assert torch.equal(other.rescale(other.mul_relin(x, x)).data.cpu(), reference)
                rounds[0] += 1
        except Exception as exc:  # noqa: BLE001 (reported below)
            errors.append(exc)

    thread = threading.Thread(target=predictions)
    thread.start()
    try:
        for level in (3, 2, 1):  # three captures while the other thread runs
            la, lb = (ct if level == ct.level else s.evaluator.drop_level(ct, level) for ct in (a, b))
            graphed = GraphedFunction(s.circuit, keep=s.evaluator.device_constants)
            assert_same(graphed(la, lb), s.circuit(la, lb))
    finally:
        stop.set()
        thread.join()
    assert not errors, errors
    assert rounds[0] > 0
    assert_same(GraphedFunction(s.circuit)(a, b), expected)


@pytest.mark.gpu
def test_fan_out_on_streams_equals_one_after_another_eager_and_graphed(cuda_setup):
    s = cuda_setup
    xs, ys = [s.encrypt() for _ in range(5)], [s.encrypt() for _ in range(5)]
    expected = [s.circuit(x, y)[0] for x, y in zip(xs, ys)]
    fan_out = StreamFanOut(3, "cuda")  # fewer streams than calls: they are reused in turn

    def summed(*cts):
        outs = fan_out.map(lambda x, y: s.circuit(x, y)[0], cts[:5], cts[5:])
        total = outs[0]
        for out in outs[1:]:
            total = s.evaluator.add(total, out)
        return (*outs, total)

    total = expected[0]
    for out in expected[1:]:
        total = s.evaluator.add(total, out)
    assert_same(summed(*xs, *ys), (*expected, total))
    graphed = GraphedFunction(summed, keep=s.evaluator.device_constants)
    for _ in range(2):  # captured, then replayed
        assert_same(graphed(*xs, *ys), (*expected, total))


def test_fan_out_off_cuda_runs_the_calls_in_order():
    calls = []
    assert StreamFanOut(2, "cpu").map(lambda a, b: calls.append(a) or a + b, [1, 2, 3], [10, 20, 30]) == [11, 22, 33]
    assert calls == [1, 2, 3]
    with pytest.raises(ValueError):
        StreamFanOut(2, "cpu").map(lambda a, b: a, [1, 2], [1])


def test_a_graphed_method_does_not_keep_its_owner_alive():
    """A trainer keeps GraphedFunctions of its own methods; were they strong references, the trainer and
    its graphs' device memory would wait for the cycle collector."""
    class Owner:
        def __init__(self):
            self.call = GraphedFunction(self.run)

        def run(self, *cts):
            return cts

    assert_freed_when_dropped(Owner)


@pytest.mark.gpu
def test_inputs_need_checked_residues(cuda_setup):
    s = cuda_setup
    a = s.encrypt()
    unchecked = a.replace(data=a.data.clone())  # new data: no mark of checked residues
    with pytest.raises(ParameterError, match="checked residues"):
        GraphedFunction(s.circuit)(unchecked, a)


def test_off_cuda_the_function_runs_itself_and_capture_is_refused():
    s = Setup("cpu")
    a, b = s.encrypt(), s.encrypt()
    graphed = GraphedFunction(s.circuit)
    assert_same(graphed(a, b), s.circuit(a, b))
    assert graphed.graphs == 0
    with pytest.raises(ParameterError, match="CUDA"):
        CapturedCircuit(s.circuit, (a, a))


def test_signatures_tell_levels_and_scales_apart():
    s = Setup("cpu")
    a = s.encrypt()
    assert signature(a) == signature(s.encrypt())  # the residues do not count
    assert signature(a) != signature(s.evaluator.drop_level(a, 2))
    assert signature(a) != signature(a.replace(scale=a.scale * (1 + 2 ** -52)))
