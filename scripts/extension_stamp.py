"""Print a key of everything the fhe_core extension's build depends on, for scripts/quickstart.sh:
the bytes of fhe_core/csrc/**, setup.py and pyproject.toml (its dependencies are installed by the
same `pip install -e`), the interpreter, the torch version, the checkout's path (an editable
install points there) and the CUDA choice (FHE_CORE_CUDA*, the toolkit setup.py would find).

The quick start skips the build when the key equals the one it stored after the last successful
build in this environment; any change here rebuilds.
"""
import hashlib
import importlib.metadata
import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build_key() -> str:
    digest = hashlib.sha256()
    sources = sorted(p for p in (ROOT / "fhe_core" / "csrc").rglob("*") if p.is_file())
    for path in sources + [ROOT / "setup.py", ROOT / "pyproject.toml"]:
        digest.update(f"{path.relative_to(ROOT)}\0{path.stat().st_size}\0".encode())
        digest.update(path.read_bytes())
    context = [str(ROOT), sys.version, importlib.metadata.version("torch"), shutil.which("nvcc") or ""]
    context += [os.environ.get(name, "") for name in ("FHE_CORE_CUDA", "FHE_CORE_CUDA_ARCHS", "CUDA_HOME", "CUDA_PATH")]
    digest.update("\0".join(context).encode())
    return digest.hexdigest()


if __name__ == "__main__":
    print(build_key())
