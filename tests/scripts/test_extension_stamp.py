"""scripts/extension_stamp.py: the quick start's build key changes with every input of the build."""
import importlib.util
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _stamp(root: Path):
    spec = importlib.util.spec_from_file_location("extension_stamp", REPO / "scripts" / "extension_stamp.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.ROOT = root
    return module


def test_build_key_follows_sources_torch_and_cuda_choice(tmp_path, monkeypatch):
    for name in ("setup.py", "pyproject.toml"):
        shutil.copy(REPO / name, tmp_path / name)
    kernel = tmp_path / "fhe_core" / "csrc" / "cuda" / "kernel.cu"
    kernel.parent.mkdir(parents=True)
    kernel.write_text("__global__ void k() {}\n")
    stamp = _stamp(tmp_path)
    monkeypatch.delenv("FHE_CORE_CUDA", raising=False)
    key = stamp.build_key()
    assert stamp.build_key() == key  # nothing changed: no rebuild

    kernel.write_text("__global__ void k() { }\n")
    changed = stamp.build_key()
    assert changed != key
    monkeypatch.setattr(stamp.importlib.metadata, "version", lambda name: "9.9.9")
    other_torch = stamp.build_key()
    assert other_torch != changed
    monkeypatch.setenv("FHE_CORE_CUDA", "0")
    assert stamp.build_key() != other_torch
    (tmp_path / "setup.py").write_text("# edited\n")
    assert len({key, changed, other_torch, stamp.build_key()}) == 4
