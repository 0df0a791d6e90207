"""PNG plots of accuracy and loss against iterations (matplotlib, Agg backend: no display)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
import numpy as np  # noqa: E402


@dataclass(frozen=True)
class Curve:
    """One run's accuracy and loss per iteration (1-based x axis)."""

    label: str
    accuracy: np.ndarray
    loss: np.ndarray


def plot_curves(
    curves: list[Curve], path: str | Path, title: str, loss_label: str = "loss",
    references: dict[str, float] | None = None,
) -> Path:
    """Two panels (accuracy, loss) with one line per curve; `references` adds horizontal
    accuracy lines (e.g. a library baseline). Returns the PNG path."""
    fig, (ax_acc, ax_loss) = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
    for curve in curves:
        steps = np.arange(1, len(curve.accuracy) + 1)
        ax_acc.plot(steps, curve.accuracy, marker=".", label=curve.label)
        ax_loss.plot(steps, curve.loss, marker=".", label=curve.label)
    for name, value in (references or {}).items():
        ax_acc.axhline(value, linestyle="--", color="grey", label=f"{name} ({value:.4f})")
    ax_acc.set(xlabel="iteration", ylabel="test accuracy", title=f"{title}: accuracy")
    ax_loss.set(xlabel="iteration", ylabel=loss_label, title=f"{title}: loss")
    for ax in (ax_acc, ax_loss):
        ax.grid(alpha=0.3)
        ax.legend()
    return save_figure(fig, path)


def save_figure(fig, path: str | Path, dpi: int = 100) -> Path:
    """Write ``fig`` as a PNG (creating its folder) and free it; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path
