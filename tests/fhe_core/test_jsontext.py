"""fhe_core.jsontext.loads: json.loads with nesting bounded the same way on every Python."""
import json

import pytest

from fhe_core import jsontext
from fuzz_targets import fuzz_test

test_fuzz_jsontext_loads = fuzz_test("fhe_core.jsontext.loads")


def nested(depth: int, open_: str = "[", close: str = "]") -> str:
    return open_ * depth + close * depth


def test_documents_up_to_the_bound_read_as_json_loads_reads_them():
    for text in (nested(jsontext.MAX_DEPTH), '{"a": [1, {"b": [2.5, null]}], "c": "x"}', "7", '"s"', "[]"):
        assert jsontext.loads(text) == json.loads(text)


@pytest.mark.parametrize("text", [nested(jsontext.MAX_DEPTH + 1), nested(5_000), nested(100_000),
                                  '{"a":' * 70 + "1" + "}" * 70, '[{"k":' * 40 + "1" + "}]" * 40])
def test_deeper_documents_are_the_same_value_error_on_every_python(text):
    # Python 3.11 raises RecursionError ~1,000 levels down, 3.12 parses 100,000 levels: both refused here
    with pytest.raises(ValueError, match=f"nested deeper than {jsontext.MAX_DEPTH} levels"):
        jsontext.loads(text)


def test_the_bound_and_json_loads_arguments_pass_through():
    assert jsontext.loads(nested(3), max_depth=3) == [[[]]]
    with pytest.raises(ValueError, match="deeper than 2"):
        jsontext.loads(nested(3), max_depth=2)
    with pytest.raises(ValueError, match="NaN"):
        jsontext.loads("[NaN]", parse_constant=lambda name: (_ for _ in ()).throw(ValueError(name)))
    with pytest.raises(json.JSONDecodeError):
        jsontext.loads("[1,")
