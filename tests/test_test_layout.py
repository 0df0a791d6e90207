"""Test modules need unique file names: pytest imports them by basename (rootdir mode), so two
`test_cli.py` in different folders break collection of the whole suite, yet pass when each
folder runs alone (which is how such a clash slips in)."""
from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_every_test_module_has_a_unique_basename():
    names = Counter(path.name for path in TESTS.rglob("test_*.py"))
    clashes = sorted(name for name, count in names.items() if count > 1)
    assert not clashes, f"test modules sharing a file name: {clashes}"
