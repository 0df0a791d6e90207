"""The main job's code path on tiny insecure rings (what `python -m demo` does at 128 bits): a
real service in a child process, the real clients, and a report whose numbers are checked
against computations made here, in the clear."""
from __future__ import annotations

import json

import numpy as np
import pytest

from apps.logreg.config import HELRConfig
from apps.logreg.twin import train_helr
from apps.xgboost.encrypted import srbct_job
from demo.__main__ import main
from demo.training import load_helr_data

SAMPLES, ITERATIONS = 64, 3


@pytest.fixture(scope="module")
def report(srbct_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    assert main(["--insecure-tiny", "--samples", str(SAMPLES), "--iterations", str(ITERATIONS),
                 "--islp", str(srbct_dir), "--out", str(out), "--no-progress"]) == 0
    return out, json.loads((out / "report.json").read_text())


def test_report_files_are_written(report):
    out, numbers = report
    text = (out / "report.md").read_text()
    assert "Tiny insecure parameters" in text and "Encrypted training over HTTP" in text
    for png in ("confusion-srbct.png", "helr-per-iteration.png"):
        assert (out / png).stat().st_size > 1000 and f"]({png})" in text
    assert numbers["environment"]["secure"] is False
    assert numbers["environment"]["peak_server_bytes"] > 0 and numbers["environment"]["peak_client_bytes"] > 0


def test_predictions_equal_the_integer_twin_and_xgboost(report, srbct_dir):
    _, numbers = report
    (forest,) = numbers["forests"]
    job = srbct_job(srbct_dir, rounds=10, genes=150)  # the demo's tiny model, retrained here
    scores = np.asarray(forest["scores"])
    assert forest["exact"] and np.array_equal(scores, job.twin_scores)
    assert forest["predicted"] == scores.argmax(axis=1).tolist()
    assert forest["correct"] == int((scores.argmax(axis=1) == job.labels).sum())
    assert forest["same_as_library"] == int((scores.argmax(axis=1) == job.library_predicted).sum()) == 20


def test_training_follows_the_twin_at_every_iteration(report):
    _, numbers = report
    training = numbers["training"]
    data = load_helr_data(None, SAMPLES)
    config = HELRConfig.tiny(iterations=ITERATIONS)
    twin = train_helr(data.x, data.y, config.twin_config(), data.x_test, data.y_test,
                      schedule=config.schedule(len(data.x)))
    assert training["iterations"] == ITERATIONS and training["bootstraps"] == 1  # 9 -> 5 -> 1 -> bootstrap
    assert training["twin_accuracy"] == [r.test_accuracy for r in twin.records]
    # the data owner's decrypted w and v of every iteration against the twin computed here: the
    # tiny ring's CKKS error (scale 2^25 or so, one bootstrap) stays below 2^-10
    for name in ("w", "v"):
        decrypted = np.asarray(training[f"decrypted_{name}"])
        expected = np.stack([getattr(r, name) for r in twin.records])
        assert decrypted.shape == expected.shape
        assert np.abs(decrypted - expected).max() < 2.0**-10, name
    # decrypted w agrees with the twin to ~2^-20: no test prediction may flip
    assert training["accuracy"] == training["twin_accuracy"]
    assert training["final_accuracy"] == training["accuracy"][-1]
    assert abs(training["final_auroc"] - twin.records[-1].test_auroc) < 1e-9


def test_report_counts_the_bytes_on_the_wire(report):
    """Per job and step the client's HTTP bytes and seconds: a prediction sends exactly its batch
    and receives exactly its answers (seeded, packed, switched down: smaller than the batch), the
    server reports its own work; uploads send their blobs (plus a small manifest)."""
    out, numbers = report
    assert "## Bytes on the wire" in (out / "report.md").read_text()
    (forest,) = numbers["forests"]
    predict = forest["traffic"]["predict"]
    assert (predict["requests"], predict["sent"], predict["received"]) == (1, forest["bytes"]["request"],
                                                                          forest["bytes"]["response"])
    assert forest["bytes"]["response"] < forest["bytes"]["request"] / 10
    assert 0 < predict["server_seconds"] < predict["seconds"]
    keys = forest["traffic"]["register keys"]
    assert forest["bytes"]["keys"] <= keys["sent"] < forest["bytes"]["keys"] + (64 << 10)
    training = numbers["training"]
    for step, size in (("register keys", training["bytes"]["keys"]), ("upload dataset", training["bytes"]["dataset"])):
        assert size <= training["traffic"][step]["sent"] < size + (64 << 10)
    assert training["traffic"]["download model"]["received"] > 0 and training["server_seconds"] > 0


def test_bad_data_path_is_a_clear_error_and_no_report(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["--insecure-tiny", "--skip-predictions", "--mnist", str(tmp_path / "missing"),
                 "--out", str(out), "--no-progress"]) == 2
    assert "error:" in capsys.readouterr().err and not (out / "report.md").exists()


def test_cuda_without_a_gpu_is_refused_up_front(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(SystemExit, match="no usable CUDA device"):
        main(["--device", "cuda", "--out", str(tmp_path)])
