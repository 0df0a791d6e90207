"""Fixtures for tests/data: the full data copies in <repo root>/../shared/data."""
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_dir():
    """Return a function name -> path of shared/data/name, skipping when it is absent."""

    def locate(name: str) -> Path:
        path = SHARED_DATA / name
        if not path.is_dir():
            pytest.skip(f"{path} not present (full data copies live in ../shared/data)")
        return path

    return locate


@pytest.fixture(scope="session")
def full_mnist(shared_dir):
    from data.mnist import load_mnist

    return load_mnist(shared_dir("mnist"))
