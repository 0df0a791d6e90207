"""Plots are written as PNG files without a display."""
import matplotlib
import numpy as np

from ml.plots import Curve, plot_curves


def test_writes_png(tmp_path):
    curve = Curve("run", np.linspace(0.5, 0.9, 10), np.linspace(0.7, 0.2, 10))
    path = plot_curves([curve], tmp_path / "sub" / "curves.png", "test", "loss", {"ref": 0.95})
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    assert matplotlib.get_backend().lower() == "agg"
