"""HELRClient.write_eval_keys: the key file a service upload reads, written one key at a time."""
import secrets

from apps.logreg.client import HELRClient
from apps.logreg.config import HELRConfig
from fhe_core import rlwe, serialize


def test_key_file_holds_exactly_the_eval_keys(tmp_path, monkeypatch):
    client = HELRClient(HELRConfig.tiny(), seed=secrets.token_bytes(32))
    needed = client.galois_elements()
    assert len(needed) > 20
    # three of the elements are enough to compare the two paths (all of them take ~30 s here)
    monkeypatch.setattr(client, "galois_elements", lambda: needed[-3:])
    path = tmp_path / "keys.bin"
    size = client.write_eval_keys(path)
    blob = serialize.dumps(client.eval_keys(), packed=True)  # the file's residues at their primes' widths
    assert size == len(blob) and path.read_bytes() == blob
    loaded = serialize.load(path, client.params, expect=rlwe.EvalKeySet)
    assert loaded.has_relin and loaded.galois_elements == frozenset(needed[-3:])
