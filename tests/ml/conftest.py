"""Fixtures for tests/ml: SRBCT from the full data copies (tests/shared_data.py says where)."""
import pytest

from shared_data import shared_path


@pytest.fixture(scope="session")
def srbct():
    from data.genomics import load_khan

    return load_khan(shared_path("srbct_khan2001"))
