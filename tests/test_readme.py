"""The README's Python examples run as written (CPU) and their claims hold."""
import re
from pathlib import Path

import numpy as np
import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


@pytest.mark.parametrize("index", range(len(_python_blocks())))
def test_readme_example_runs(index, capsys):
    namespace: dict = {}
    exec(compile(_python_blocks()[index], f"README.md python block {index}", "exec"), namespace)
    if "expected" in namespace and "result" in namespace:  # the CKKS example states its precision
        assert np.max(np.abs(namespace["result"] - namespace["expected"])) < 1e-5
    # a block that prints an `error` and says "about 2^-b" claims b bits: hold it to b - 2
    stated = re.search(r"about 2\^(-\d+)", _python_blocks()[index])
    if stated and "error" in namespace:
        assert np.log2(namespace["error"]) <= int(stated.group(1)) + 2, capsys.readouterr().out
