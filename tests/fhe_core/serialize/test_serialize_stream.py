"""Key sets written one key at a time (dump_eval_keys) and files read through a memory map (load)."""
import pytest

from fhe_core import rlwe, serialize
from fhe_core.errors import ChecksumError, SerializationError, SerializedParamsMismatchError, TruncatedError
from fhe_core.params import preset


@pytest.fixture(scope="module")
def session():
    params = preset("N10QP241L3D4Insecure", allow_insecure=True)
    ctx = rlwe.RLWEContext.from_params(params)
    sk = rlwe.gen_secret_key(ctx)
    elements = sorted(rlwe.galois_element_for_rotation(r, params.n) for r in (1, 2, -1))
    return params, ctx, sk, elements


def _keys(ctx, sk, elements):
    """The canonical order: relin first, then Galois keys by element, each made only when asked for."""
    yield rlwe.gen_relin_key(ctx, sk)
    for k in elements:
        yield rlwe.gen_galois_key(ctx, sk, k)


@pytest.mark.parametrize("packed", [False, True])
def test_streamed_key_set_is_byte_identical_to_dump_of_the_set(session, tmp_path, packed):
    params, ctx, sk, elements = session
    keys = list(_keys(ctx, sk, elements))
    streamed = tmp_path / "streamed.keys"
    size = serialize.dump_eval_keys(iter(keys), streamed, params, packed=packed)
    whole = serialize.dumps(rlwe.EvalKeySet(params.params_id, relin=keys[0], galois=keys[1:]), packed=packed)
    assert size == len(whole) and streamed.read_bytes() == whole
    loaded = serialize.load(streamed, params, expect=rlwe.EvalKeySet)
    assert loaded.has_relin and loaded.galois_elements == frozenset(elements)
    for k, key in zip(elements, keys[1:]):
        assert bool((loaded.galois_key(k, "test").data == key.data).all())


def test_streamed_writer_refuses_repeats_foreign_keys_and_non_keys_and_leaves_no_file(session, tmp_path):
    params, ctx, sk, elements = session
    galois = rlwe.gen_galois_key(ctx, sk, elements[0])
    other = preset("N11QP342L4D3Insecure", allow_insecure=True)
    other_context = rlwe.RLWEContext.from_params(other)
    foreign = rlwe.gen_relin_key(other_context, rlwe.gen_secret_key(other_context))
    path = tmp_path / "k"
    with pytest.raises(SerializationError, match="twice"):
        serialize.dump_eval_keys([galois, galois], path, params)
    with pytest.raises(SerializedParamsMismatchError):
        serialize.dump_eval_keys([foreign], path, params)
    with pytest.raises(SerializationError, match="RelinKey, GaloisKey or EncapsulationKey"):
        serialize.dump_eval_keys([sk], path, params)
    assert list(tmp_path.iterdir()) == []   # no partial file, no temporary left behind


def test_memory_mapped_load_checks_as_loads_does(session, tmp_path):
    params, ctx, sk, elements = session
    path = tmp_path / "keys"
    serialize.dump_eval_keys(_keys(ctx, sk, elements[:1]), path, params)
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x10
    path.write_bytes(bytes(data))
    with pytest.raises(ChecksumError):
        serialize.load(path, params)
    path.write_bytes(b"")
    with pytest.raises(TruncatedError):
        serialize.load(path, params)
