"""The readers of apps.logreg (checkpoints, encrypted datasets, the JSON config) under bounded
fuzzing (hypothesis; tests/fuzz_targets.py), and the inputs fuzzing found answered with an
untyped error."""
import struct

import pytest

from apps.logreg.config import HELRConfig, HELRConfigError
from apps.logreg.dataset import MAGIC, EncryptedDataset
from fhe_core.errors import SerializationError
from fuzz_targets import fuzz_test, world

test_fuzz_read_checkpoint = fuzz_test("apps.logreg.trainer.read_checkpoint")
test_fuzz_encrypted_dataset_from_bytes = fuzz_test("apps.logreg.dataset.EncryptedDataset.from_bytes")
test_fuzz_helr_config_from_json = fuzz_test("apps.logreg.config.HELRConfig.from_json")


def _dataset_with_header(text: str) -> bytes:
    return MAGIC + struct.pack("<I", len(text)) + text.encode()


@pytest.mark.parametrize("text", ['{"batch_size":1,"blocks":[1],"features":1,"samples":1e999}',
                                  '{"batch_size":1,"blocks":[1e999],"features":1,"samples":1}',
                                  "[" * 3000 + "]" * 3000])
def test_a_hostile_dataset_header_is_a_serialization_error(text):
    with pytest.raises(SerializationError, match="bad header"):
        EncryptedDataset.from_bytes(_dataset_with_header(text), world().params)


def test_a_deeply_nested_config_is_a_config_error():
    with pytest.raises(HELRConfigError, match="not JSON"):
        HELRConfig.from_json("[" * 5000 + "]" * 5000)
    assert HELRConfig.from_json(HELRConfig.tiny().to_json()) == HELRConfig.tiny()
