"""SRBCT (Khan 2001) in the model-private encoding: the 20 test profiles' decrypted scores equal the
integer twin's exactly, their argmax equals XGBoost's on the grid-quantized features, and the
request stays within the issue's bound at the real shape.

CI runs a 150-gene model on a tiny insecure ring; the full 2,308-gene model at 128 bits is `slow`
on the CPU and `gpu` on a device (``scripts/device.sh`` runs the latter).
"""
import numpy as np
import pytest

pytest.importorskip("xgboost", reason="xgboost not installed (the iDASH tests do not need it)")

from apps.xgboost.encrypted import run_job, srbct_job  # noqa: E402
from fhe_core.bfv import FLOOD_NOISE_BITS  # noqa: E402

MiB = 2**20


def check(run):
    job = run.job
    np.testing.assert_array_equal(run.scores, job.twin_scores)
    np.testing.assert_array_equal(run.predicted, job.library_predicted)  # XGBoost on the quantized features
    assert run.plan.answer_budget <= run.budget_left < FLOOD_NOISE_BITS + 1.5  # the flooding level
    assert run.correct >= 17


def test_srbct_150_genes(srbct_dir):
    run = run_job(srbct_job(srbct_dir, rounds=10, genes=150), "BFVN12QP660L7D3T20Insecure", allow_insecure=True)
    check(run)
    assert run.plan.layout.width == 32 and run.plan.layout.inputs_per_digit == 2  # 150 genes, 128 lanes


@pytest.mark.slow
def test_srbct_full_128_bit(srbct_dir):
    run = run_job(srbct_job(srbct_dir), "BFVN14QP438L7D8T20")
    check(run)
    layout = run.plan.layout
    assert (layout.digits, layout.inputs_per_digit, layout.outputs, layout.level) == ((3, 3), 5, 1, 7)
    assert run.bytes["upload"] <= 16 * MiB and run.bytes["download"] <= MiB / 4


@pytest.mark.gpu
def test_srbct_full_gpu(srbct_dir):
    run = run_job(srbct_job(srbct_dir), "BFVN14QP438L7D8T20", device="cuda", repeats=3)
    check(run)
    assert run.bytes["upload"] <= 16 * MiB
