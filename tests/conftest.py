"""Shared pytest configuration: `gpu` tests are skipped where no CUDA device is present; the full
data copies in <repo root>/../shared/data (tests that need one are skipped when it is absent)."""
from pathlib import Path

import pytest
import torch

from shared_data import shared_path


@pytest.fixture(scope="session")
def mnist_dir() -> Path:
    return shared_path("mnist")


@pytest.fixture(scope="session")
def srbct_dir() -> Path:
    return shared_path("srbct_khan2001")


@pytest.fixture(scope="session")
def idash_dir() -> Path:
    return shared_path("idash2020_sabanci_xgb")


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)
