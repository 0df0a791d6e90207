"""Fixtures for tests/ml: SRBCT from <repo root>/../shared/data (skipped when absent)."""
from pathlib import Path

import pytest

SRBCT = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "srbct_khan2001"


@pytest.fixture(scope="session")
def srbct():
    if not SRBCT.is_dir():
        pytest.skip(f"{SRBCT} not present (full data copies live in ../shared/data)")
    from data.genomics import load_khan

    return load_khan(SRBCT)
