"""`python -m apps.logreg train --tiny`: the in-process demo (client + server halves) on 96 MNIST
rows, two iterations (bootstrapping is covered by test_encrypted_helr): the table, the twin
agreement it reports, encrypted scoring, and the plot."""
import re

import numpy as np

from apps.logreg.cli import main, run_encrypted_helr
from apps.logreg.config import HELRConfig


def test_train_command_prints_the_comparison_and_writes_the_plot(mnist_dir, tmp_path, capsys):
    plot = tmp_path / "helr.png"
    assert main(["train", "--tiny", "--mnist", str(mnist_dir), "--samples", "96", "--iterations", "2",
                 "--plot", str(plot), "--no-progress", "--score-encrypted",
                 "--test-samples", "120"]) == 0
    out = capsys.readouterr().out
    assert "96 training rows, 2 iterations, batch 16 (4 ciphertexts of 4 rows x 256); TINY_N11_HELR" in out
    for row in ("encrypted HELR (TINY_N11_HELR, 2 it., 0 bootstraps)", "plaintext twin", "sklearn",
                "the same model scoring the encrypted test set"):
        assert row in out
    exponent = float(re.search(r"over the iterations: \S+ \(2\^(-?[\d.]+)\)", out).group(1))
    assert exponent < -10
    assert plot.stat().st_size > 10_000 and plot.read_bytes()[:4] == b"\x89PNG"


def test_run_records_each_iteration_against_the_twin(mnist_dir):
    run = run_encrypted_helr(HELRConfig.tiny(iterations=2), mnist_dir, samples=48, progress=False)
    assert len(run.errors) == len(run.accuracy) == len(run.auroc) == 2 and run.bootstraps == 0
    assert max(run.errors) < 2.0 ** -10
    twin = run.twin.records
    # at most one of the 1,984 test rows apart
    np.testing.assert_allclose(run.accuracy, [r.test_accuracy for r in twin], atol=1.5 / 1984)
    assert abs(run.encrypted.auroc - twin[-1].test_auroc) < 1e-3
