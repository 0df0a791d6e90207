"""ParamsLiteral.from_json and Params.from_literal read the literal a client sends the service:
bounded fuzzing of both, and the inputs from_json once answered with a raw ValueError or
RecursionError."""
import pytest

from fhe_core.errors import ParameterError
from fhe_core.params import ParamsLiteral, preset_literal
from fuzz_targets import fuzz_test

test_fuzz_params_literal_from_json = fuzz_test("fhe_core.params.ParamsLiteral.from_json")
test_fuzz_params_from_literal = fuzz_test("fhe_core.params.Params.from_literal")


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"log_n":' + "9" * 5000 + "}",
                                  '{"a":' * 3000 + "1" + "}" * 3000])
def test_hostile_json_is_a_parameter_error(text):
    with pytest.raises(ParameterError, match="not valid JSON"):
        ParamsLiteral.from_json(text)


def test_a_literal_round_trips():
    literal = preset_literal("N10QP241L3D4Insecure")
    assert ParamsLiteral.from_json(literal.to_json()) == literal
