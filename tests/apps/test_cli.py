"""`python -m apps`: subcommands print the comparison tables; missing data gives exit code 2."""
import subprocess
import sys
from pathlib import Path

from apps.cli import main

REPO = Path(__file__).resolve().parents[2]


def test_idash(idash_dir, capsys):
    assert main(["--no-progress", "idash", "--idash", str(idash_dir)]) == 0
    out = capsys.readouterr().out
    assert "81/99" in out and "85498" in out and "99/99" in out


def test_srbct_with_plot(srbct_dir, tmp_path, capsys):
    plot = tmp_path / "srbct.png"
    argv = ["--no-progress", "srbct", "--islp", str(srbct_dir), "--rounds", "10",
            "--srbct-plot", str(plot)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.count("20/20") == 2 and "max_depth=2" in out and "default depth" in out
    assert plot.read_bytes()[:4] == b"\x89PNG"


def test_helr_outputs(mnist_dir, tmp_path, capsys):
    argv = ["--no-progress", "helr", "--mnist", str(mnist_dir), "--iterations", "4",
            "--per-iteration", "--save-schedule", str(tmp_path / "s.npz"),
            "--save-records", str(tmp_path / "r.npz"), "--helr-plot", str(tmp_path / "h.png")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "11982 train / 1984 test" in out and "sklearn LogisticRegression" in out
    import numpy as np

    records = np.load(tmp_path / "r.npz")
    assert records["w"].shape == (4, 197) and records["test_accuracy"].shape == (4,)
    assert "HELR twin, 4 it." in out and f"{records['test_accuracy'][-1]:.4f}" in out


def test_missing_data_exit_code(tmp_path, capsys):
    assert main(["idash", "--idash", str(tmp_path / "none")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["idash"]) == 2


def test_module_entry_point(idash_dir):
    """Run as a module from the repository root, as the README says."""
    done = subprocess.run([sys.executable, "-m", "apps", "idash", "--idash", str(idash_dir)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "81/99" in done.stdout
