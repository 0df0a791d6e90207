"""Shared pytest configuration: `gpu` tests are skipped where no CUDA device is present; the full
data copies in <repo root>/../shared/data (tests that need one are skipped when it is absent)."""
import os
from pathlib import Path

import pytest
import torch

# $FHE_SHARED_DATA overrides it (the GPU machine gets a copy inside the working tree)
SHARED_DATA = Path(os.environ.get("FHE_SHARED_DATA") or Path(__file__).resolve().parents[1].parent / "shared" / "data")


def _shared(name: str) -> Path:
    path = SHARED_DATA / name
    if not path.is_dir():
        pytest.skip(f"{path} not present (full data copies live in ../shared/data)")
    return path


@pytest.fixture(scope="session")
def mnist_dir() -> Path:
    return _shared("mnist")


@pytest.fixture(scope="session")
def srbct_dir() -> Path:
    return _shared("srbct_khan2001")


@pytest.fixture(scope="session")
def idash_dir() -> Path:
    return _shared("idash2020_sabanci_xgb")


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)
