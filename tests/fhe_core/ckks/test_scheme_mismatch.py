"""Each scheme refuses the other's parameters with SchemeMismatchError naming the object (CKKS
objects built on BFV parameters used to encode, encrypt and evaluate garbage)."""
import pytest

from fhe_core import bfv, ckks, rlwe
from fhe_core.errors import ParameterError, SchemeMismatchError
from fhe_core.params import preset


@pytest.fixture(scope="module")
def bfv_params():
    return preset("BFVN10QP205L2D3T17Insecure", allow_insecure=True)


@pytest.fixture(scope="module")
def ckks_params():
    return preset("N10QP241L3D4Insecure", allow_insecure=True)


def test_ckks_refuses_bfv_parameters(bfv_params):
    sk = rlwe.gen_secret_key(rlwe.RLWEContext.from_params(bfv_params))
    for op, make in {"Encoder": lambda: ckks.Encoder(bfv_params),
                     "Encryptor": lambda: ckks.Encryptor(bfv_params, sk),
                     "Decryptor": lambda: ckks.Decryptor(bfv_params, sk),
                     "Evaluator": lambda: ckks.Evaluator(bfv_params)}.items():
        with pytest.raises(SchemeMismatchError, match=f"^{op}: these are BFV parameters"):
            make()


def test_bfv_refuses_ckks_parameters(ckks_params):
    sk = rlwe.gen_secret_key(rlwe.RLWEContext.from_params(ckks_params))
    with pytest.raises(SchemeMismatchError, match="^BFVContext: these are CKKS parameters"):
        bfv.BFVContext(ckks_params)
    for op, make in {"BatchEncoder": lambda: bfv.BatchEncoder(ckks_params),
                     "Encryptor": lambda: bfv.Encryptor(ckks_params, sk),
                     "Decryptor": lambda: bfv.Decryptor(ckks_params, sk),
                     "Evaluator": lambda: bfv.Evaluator(ckks_params)}.items():
        with pytest.raises(SchemeMismatchError, match=f"^{op}: got CKKS parameters"):
            make()


def test_bfv_objects_want_a_context_not_params(bfv_params):
    with pytest.raises(ParameterError, match=r"^BatchEncoder: expected a BFVContext, got Params \(build one"):
        bfv.BatchEncoder(bfv_params)
    assert issubclass(SchemeMismatchError, ParameterError)  # old callers catching ParameterError still do
