"""Fixtures for tests/apps (the data directories come from tests/conftest.py)."""
import pytest


@pytest.fixture(scope="session")
def helr_full(mnist_dir):
    from data.helr import helr_dataset
    from data.mnist import load_mnist

    return helr_dataset(load_mnist(mnist_dir))
