"""Fixtures for tests/data: the full data copies (tests/shared_data.py says where) and a
stand-in for an installed data package."""
import importlib
import sys

import pytest

from shared_data import shared_path


@pytest.fixture(scope="session")
def shared_dir():
    """Return a function name -> path of shared/data/name, skipping when it is absent."""
    return shared_path


@pytest.fixture(scope="session")
def full_mnist(shared_dir):
    from data.mnist import load_mnist

    return load_mnist(shared_dir("mnist"))


@pytest.fixture
def installed_package(tmp_path, monkeypatch):
    """Return a function (distribution, {relative path: bytes}) that lays out a site directory
    holding that distribution's metadata and files and puts it first on sys.path, so that
    importlib.metadata finds it as an installed package (as pip would leave it)."""

    def install(distribution: str, files: dict[str, bytes]) -> None:
        site = tmp_path / "site"
        info = site / f"{distribution.replace('-', '_')}-0.0.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0.0.0\n")
        for relative, body in files.items():
            (site / relative).parent.mkdir(parents=True, exist_ok=True)
            (site / relative).write_bytes(body)
        monkeypatch.syspath_prepend(str(site))
        importlib.invalidate_caches()

    yield install
    importlib.invalidate_caches()
    sys.path_importer_cache.clear()
