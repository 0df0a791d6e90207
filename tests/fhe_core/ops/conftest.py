"""The CPU kernels' paths (cpu/path.h) as a fixture: kernel tests against a reference run on each path this CPU
can run (ops.set_cpu_path between kernel calls) and skip the others with the reason."""
import pytest

from fhe_core import ops

CPU_PATHS = ("ifma", "avx2", "scalar")  # best first: a CPU runs its best path and every one after it


def cpu_path_runnable(path: str) -> bool:
    return CPU_PATHS.index(path) >= CPU_PATHS.index(ops.cpu_path_supported())


@pytest.fixture(params=CPU_PATHS)
def cpu_path(request):
    """Runs the test with the CPU kernels on one path, then restores the process's own. A test's CUDA variant
    (a "device" parameter other than cpu) runs once, on the process's path."""
    device = getattr(getattr(request.node, "callspec", None), "params", {}).get("device", "cpu")
    if device != "cpu" and request.param != ops.cpu_path():
        pytest.skip("the CPU path does not change a CUDA test")
    if not cpu_path_runnable(request.param):
        pytest.skip(f"this CPU cannot run the {request.param} path (its best is {ops.cpu_path_supported()})")
    before = ops.cpu_path()
    ops.set_cpu_path(request.param)
    yield request.param
    ops.set_cpu_path(before)


@pytest.fixture(params=CPU_PATHS[:2])
def vector_path(request):
    """A vector path this CPU can run, by name (tests compare it with the scalar path)."""
    if not cpu_path_runnable(request.param):
        pytest.skip(f"this CPU cannot run the {request.param} path (its best is {ops.cpu_path_supported()})")
    return request.param
