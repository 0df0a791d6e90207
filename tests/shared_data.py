"""Where the full data copies are: <repo root>/../shared/data, or $FHE_SHARED_DATA (the GPU
machine gets a copy inside the working tree). Every conftest that needs a copy asks here, so a
test never skips on one machine for a path another conftest would have found."""
import os
from pathlib import Path

import pytest

SHARED_DATA = Path(os.environ.get("FHE_SHARED_DATA") or Path(__file__).resolve().parents[1].parent / "shared" / "data")


def shared_path(name: str) -> Path:
    """shared/data/<name>; the calling test is skipped when that copy is absent."""
    path = SHARED_DATA / name
    if not path.is_dir():
        pytest.skip(f"{path} not present (full data copies live in ../shared/data, or set FHE_SHARED_DATA)")
    return path
