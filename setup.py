"""Build of the fhe_core._C extension.

The CPU kernels are always built. The CUDA kernels are built whenever nvcc is found (CUDA_HOME,
or nvcc on PATH), whether or not a GPU is present, so a GPU-less CI machine still compiles them;
FHE_CORE_CUDA=0 turns them off and FHE_CORE_CUDA=1 makes a missing nvcc an error. The CUDA
sources include no torch headers and the glue reaches the current stream through c10's
device-generic interface, so the extension links against the CUDA runtime only (not torch's
CUDA libraries) and builds with a CPU-only torch as well.
"""
import glob
import os
import shutil
import sys

from setuptools import setup
from torch.utils import cpp_extension
from torch.utils.cpp_extension import BuildExtension, CppExtension

CSRC = os.path.join("fhe_core", "csrc")


def find_cuda_home() -> str | None:
    """The CUDA toolkit: $CUDA_HOME / $CUDA_PATH, torch's own guess, or the toolkit of the nvcc on
    PATH. A CPU-only torch never guesses (its CUDA_HOME is None), hence the search here."""
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), cpp_extension.CUDA_HOME]
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))))
    candidates.append("/usr/local/cuda")
    for home in candidates:
        if home and os.path.exists(os.path.join(home, "bin", "nvcc")) and \
                os.path.exists(os.path.join(home, "include", "cuda_runtime.h")):
            return home
    return None


def build_cuda(cuda_home: str | None) -> bool:
    flag = os.environ.get("FHE_CORE_CUDA", "auto").strip().lower()
    if flag in ("0", "off", "no", "false"):
        return False
    if flag in ("1", "on", "yes", "true") and cuda_home is None:
        raise RuntimeError("FHE_CORE_CUDA=1 but no CUDA toolkit was found: set CUDA_HOME")
    return cuda_home is not None


def cuda_arch_flags() -> list[str]:
    # Hopper (sm_90) by default; FHE_CORE_CUDA_ARCHS="90;100" adds more. PTX of the newest arch
    # is embedded too so newer GPUs can JIT it.
    archs = [a.strip() for a in os.environ.get("FHE_CORE_CUDA_ARCHS", "90").split(";") if a.strip()]
    flags = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs]
    flags.append(f"-gencode=arch=compute_{archs[-1]},code=compute_{archs[-1]}")
    return flags


def extension():
    sources = sorted(glob.glob(os.path.join(CSRC, "ops", "*.cpp")) + glob.glob(os.path.join(CSRC, "cpu", "*.cpp")))
    # No -std flag: torch's builder adds the standard its own headers and libraries were built with
    # (C++17 for torch 2.11, C++20 for 2.13). Forcing another one makes the extension instantiate
    # its own copies of libstdc++ templates that clash with the loaded libstdc++.
    cxx = ["-O3"]
    # at::parallel_for (the CPU kernels' thread pool) is an inline template around
    # `#pragma omp parallel` in torch's headers: without -fopenmp it silently runs on one thread.
    # The extension then calls the libgomp.so.1 torch has already loaded, so torch.set_num_threads
    # governs it.
    omp = ["-fopenmp"] if sys.platform.startswith("linux") else []
    cxx += omp
    nvcc = ["-O3", "--expt-relaxed-constexpr", "-lineinfo", *cuda_arch_flags()]
    if os.environ.get("FHE_CORE_PTXAS_VERBOSE") == "1":  # registers, shared memory, spills per kernel
        nvcc.append("-Xptxas=-v")
    kwargs = {}
    cuda_home = find_cuda_home()
    if build_cuda(cuda_home):
        # torch's builder compiles .cu files with the nvcc of its module-level CUDA_HOME.
        cpp_extension.CUDA_HOME = cuda_home
        sources += sorted(glob.glob(os.path.join(CSRC, "cuda", "*.cu")))
        cxx.append("-DFHE_CORE_WITH_CUDA")
        kwargs = dict(
            include_dirs=[os.path.join(cuda_home, "include")],
            library_dirs=[os.path.join(cuda_home, "lib64")],
            libraries=["cudart"],
            # the runtime torch already loaded (same soname) when it has CUDA; the toolkit's otherwise
            extra_link_args=[f"-Wl,-rpath,{os.path.join(cuda_home, 'lib64')}"],
        )
    kwargs["extra_link_args"] = kwargs.get("extra_link_args", []) + omp
    return CppExtension(
        name="fhe_core._C",
        sources=sources,
        extra_compile_args={"cxx": cxx, "nvcc": nvcc},
        py_limited_api=False,
        **kwargs,
    )


setup(
    ext_modules=[extension()],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
)
