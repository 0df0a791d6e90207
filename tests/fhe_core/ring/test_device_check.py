"""One device check (ring.resolve_device) behind every entry that takes a device: a malformed
name, a device type fhe_core does not run on, CUDA where there is none, or a GPU index past the
last one is a DeviceError naming the operation, never a raw torch error or a silent acceptance."""
import pytest
import torch

from fhe_core import rlwe, serialize
from fhe_core.errors import DeviceError, FHEError
from fhe_core.params import Params, preset, preset_literal
from fhe_core.ring import resolve_device

TINY = "N10QP241L3D4Insecure"
PAST_LAST_GPU = f"cuda:{torch.cuda.device_count()}"  # one index past the last GPU (cuda:0 without any)
BAD_DEVICES = ["tpu", "gpu0", "cuda:x", "meta", PAST_LAST_GPU, 3.5]


@pytest.fixture(scope="module")
def params():
    return preset(TINY, allow_insecure=True)


@pytest.mark.parametrize("device", BAD_DEVICES)
def test_every_entry_refuses_a_bad_device_with_one_error(params, device):
    entries = {
        "preset": lambda: preset(TINY, allow_insecure=True, device=device),
        "Params.from_literal": lambda: Params.from_literal(preset_literal(TINY), allow_insecure=True, device=device),
        "Params.with_device": lambda: params.with_device(device),
        "RLWEContext": lambda: rlwe.RLWEContext.from_params(params, device=device),
        "loads": lambda: serialize.loads(serialize.dumps(params), device=device, allow_insecure=True),
        "loads_many": lambda: serialize.loads_many(b"", params, device=device),
    }
    for op, call in entries.items():
        with pytest.raises(DeviceError, match=f"^{op}: ") as info:
            call()
        assert isinstance(info.value, FHEError) and not isinstance(info.value, AssertionError)


def test_a_gpu_index_past_the_last_names_the_gpus_there_are():
    device = "cuda:7" if torch.cuda.device_count() < 8 else "cuda:99"  # past the last on any machine
    with pytest.raises(DeviceError, match=f"preset: device '{device}'") as info:
        preset(TINY, allow_insecure=True, device=device)
    message = str(info.value)
    if torch.cuda.is_available():
        assert f"this machine has {torch.cuda.device_count()} GPU(s)" in message
    else:
        assert "CUDA is not available here" in message and "use 'cpu'" in message


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_cuda_without_cuda_says_so():
    with pytest.raises(DeviceError, match="preset: device 'cuda' asked for, but CUDA is not available"):
        preset(TINY, allow_insecure=True, device="cuda")


def test_good_devices_resolve_to_one_name(params):
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(torch.device("cpu"), "op") == torch.device("cpu")
    if torch.cuda.is_available():
        assert resolve_device("cuda") == torch.device("cuda", torch.cuda.current_device())
    assert params.with_device("cpu").device == torch.device("cpu")
