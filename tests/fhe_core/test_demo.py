"""The engine demo's check (the README's main job) passes, and would catch a wrong product."""
import pytest

from fhe_core import demo


def test_demo_product_check_passes_on_cpu(capsys):
    demo.check_product("cpu")
    assert "== Python big-integer product" in capsys.readouterr().out


def test_crt_centered_recovers_signed_integers():
    primes = (1152921504606584833, 1125899906826241)
    values = [-(2 ** 100) + 12345, 0, 2 ** 100 - 1, -1]
    columns = [[v % q for v in values] for q in primes]
    assert demo.crt_centered(columns, primes) == values


def test_schoolbook_wraps_negacyclically():
    # (1 + X^3) * X = X + X^4 = X - 1 mod X^4 + 1
    assert demo.schoolbook([1, 0, 0, 1], [0, 1, 0, 0]) == [-1, 1, 0, 0]


@pytest.mark.gpu
def test_demo_product_check_passes_on_cuda():
    demo.check_product("cuda")
