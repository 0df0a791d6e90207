"""`python -m apps.xgboost predict`: end to end on a tiny ring, with the confusion-matrix plot."""
import re

from apps.xgboost.__main__ import main

TINY = ["--preset", "BFVN11QP335L4D5T20Insecure", "--allow-insecure", "--no-progress", "--repeats", "1"]


def test_predict_idash(idash_dir, tmp_path, capsys):
    plot = tmp_path / "cm.png"
    assert main(["predict", "--workload", "idash", "--idash", str(idash_dir), "--samples", "12",
                 "--plot", str(plot)] + TINY) == 0
    out = capsys.readouterr().out
    assert re.search(r"scores equal the integer twin\s+yes", out)
    assert re.search(r"argmax equals the twin\s+12/12", out)
    assert plot.stat().st_size > 1000


def test_predict_needs_the_idash_directory(capsys):
    assert main(["predict", "--workload", "idash"] + TINY) == 2
    assert "--idash" in capsys.readouterr().err
