"""Fixtures for tests/apps: full data copies in <repo root>/../shared/data (skipped if absent)."""
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


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


@pytest.fixture(scope="session")
def helr_full(mnist_dir):
    from data.helr import helr_dataset
    from data.mnist import load_mnist

    return helr_dataset(load_mnist(mnist_dir))
