"""The exact float64 plaintext twin of encrypted HELR training (Han et al., AAAI 2019).

Mini-batch Nesterov accelerated gradient on the log-likelihood with HELR's cubic sigmoid:

    z_i      = y_i * x_i                       (y in {-1, +1}, x with a leading 1 for the bias)
    g        = sum_{i in batch} p(z_i . v) z_i  (p = 0.5 - 0.0843 t + 0.0002 t^3 ~ sigma(-t))
    w_next   = v + (lr / batch_size) * g
    v_next   = (1 - gamma_t) * w_next + gamma_t * w
    gamma_t  = (1 - lambda_t) / lambda_{t+1},  lambda_{t+1} = (1 + sqrt(1 + 4 lambda_t^2)) / 2

starting from w = v = 0 and lambda_0 = 0.01. The step divides by the full batch size even for
a shorter last block (what a zero-padded encrypted block computes). Features are scaled to
[0, 1) (`x / levels`, i.e. 3-bit fixed point for the default features), which keeps
|z . v| within the cubic's interval [-16, 16]. Every iteration is recorded (w, v, gamma, losses,
test metrics) so an encrypted run can be checked against it step by step.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from ml.metrics import binary_report, logistic_loss
from ml.sigmoid import HELR_CUBIC, poly_eval

from .schedule import BlockOrder, MiniBatchSchedule


@dataclass(frozen=True)
class HelrConfig:
    """HELR training settings (the study's values by default)."""

    iterations: int = 30
    batch_size: int = 1024
    learning_rate: float = 1.0
    lambda0: float = 0.01
    seed: int = 0
    block_order: BlockOrder = "cycle"
    sigmoid: tuple[float, ...] = HELR_CUBIC


@dataclass(frozen=True)
class IterationRecord:
    """State after iteration `t` (0-based): w, v `[d]` float64 and the metrics of w."""

    t: int
    block: int
    gamma: float
    w: np.ndarray
    v: np.ndarray
    max_abs_input: float
    train_loss: float
    test_loss: float | None
    test_accuracy: float | None
    test_auroc: float | None


@dataclass(frozen=True)
class HelrResult:
    """Final weights (w[0] is the bias), the schedule used and one record per iteration."""

    w: np.ndarray
    v: np.ndarray
    schedule: MiniBatchSchedule
    records: list[IterationRecord] = field(default_factory=list)


def design_matrix(features: np.ndarray, levels: int, bias: bool = True) -> np.ndarray:
    """`[n, d]` features -> `[n, d + bias]` float64 scaled by 1/levels, with a leading 1s column."""
    x = np.asarray(features, dtype=np.float64) / levels
    if bias:
        x = np.hstack([np.ones((x.shape[0], 1)), x])
    return x


def nesterov_gammas(lambda0: float, iterations: int) -> np.ndarray:
    """gamma_t for t = 0 .. iterations-1 from the lambda recursion starting at lambda0."""
    gammas = np.empty(iterations)
    lam = lambda0
    for t in range(iterations):
        lam_next = (1.0 + np.sqrt(1.0 + 4.0 * lam * lam)) / 2.0
        gammas[t] = (1.0 - lam) / lam_next
        lam = lam_next
    return gammas


def signed_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """z_i = y_i x_i with 0/1 labels mapped to -1/+1."""
    return x * np.where(np.asarray(y) == 1, 1.0, -1.0)[:, None]


def nag_step(
    z_batch: np.ndarray, w: np.ndarray, v: np.ndarray, gamma: float, step: float,
    sigmoid: tuple[float, ...],
) -> tuple[np.ndarray, np.ndarray, float]:
    """One Nesterov step on one mini-batch; returns (w_next, v_next, max |z . v|)."""
    inner = z_batch @ v
    gradient = poly_eval(sigmoid, inner) @ z_batch
    w_next = v + step * gradient
    v_next = (1.0 - gamma) * w_next + gamma * w
    return w_next, v_next, float(np.abs(inner).max(initial=0.0))


def train_helr(
    x_train: np.ndarray, y_train: np.ndarray, config: HelrConfig = HelrConfig(),
    x_test: np.ndarray | None = None, y_test: np.ndarray | None = None,
    schedule: MiniBatchSchedule | None = None,
    progress: Iterable[int] | None = None,
) -> HelrResult:
    """Run the twin on a design matrix (see `design_matrix`) with 0/1 labels.

    `schedule` replays a saved schedule (it must match the data size and batch size);
    `progress` may wrap `range(iterations)` (e.g. with tqdm).
    """
    if schedule is None:
        schedule = MiniBatchSchedule.build(
            len(x_train), config.batch_size, config.iterations, config.seed, config.block_order
        )
    _check_schedule(schedule, len(x_train), config)
    z = signed_rows(x_train, y_train)
    gammas = nesterov_gammas(config.lambda0, config.iterations)
    step = config.learning_rate / config.batch_size
    w = np.zeros(x_train.shape[1])
    v = np.zeros_like(w)
    records = []
    for t in progress if progress is not None else range(config.iterations):
        w, v, max_abs = nag_step(z[schedule.rows_at(t)], w, v, gammas[t], step, config.sigmoid)
        records.append(_record(t, schedule, gammas[t], w, v, max_abs, x_train, y_train,
                               x_test, y_test))
    return HelrResult(w, v, schedule, records)


def _check_schedule(schedule: MiniBatchSchedule, n: int, config: HelrConfig) -> None:
    if len(schedule.permutation) != n or schedule.batch_size != config.batch_size:
        raise ValueError(
            f"schedule is for {len(schedule.permutation)} rows in batches of "
            f"{schedule.batch_size}, data has {n} rows and config batch {config.batch_size}"
        )
    if schedule.iterations < config.iterations:
        raise ValueError(f"schedule has {schedule.iterations} iterations < {config.iterations}")


def _record(
    t: int, schedule: MiniBatchSchedule, gamma: float, w: np.ndarray, v: np.ndarray,
    max_abs: float, x_train: np.ndarray, y_train: np.ndarray,
    x_test: np.ndarray | None, y_test: np.ndarray | None,
) -> IterationRecord:
    test_loss = test_accuracy = test_auroc = None
    if x_test is not None and y_test is not None:
        margins = x_test @ w
        report = binary_report(y_test, margins)
        test_loss, test_accuracy, test_auroc = (
            logistic_loss(y_test, margins), report.accuracy, report.auroc
        )
    return IterationRecord(
        t=t, block=int(schedule.block_order[t]), gamma=float(gamma), w=w.copy(), v=v.copy(),
        max_abs_input=max_abs, train_loss=logistic_loss(y_train, x_train @ w),
        test_loss=test_loss, test_accuracy=test_accuracy, test_auroc=test_auroc,
    )
