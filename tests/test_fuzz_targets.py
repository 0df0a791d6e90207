"""The fuzz harness itself (tests/fuzz_targets.py): every deserializer has a target, the contract
check fails on each kind of breach (untyped error, hang, forged-size allocation, wrong round
trip), and the structure-aware mutators reach past the first checks."""
from __future__ import annotations

import ast
import random
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import fuzz_targets
from fhe_core import rlwe, serialize
from fhe_core.errors import ChecksumError, MetadataError, SerializationError
from fuzz_targets import FuzzFailure, Target, check

ROOT = Path(__file__).resolve().parents[1]

# every public reader of untrusted bytes or text, by where it is defined -> its target
DESERIALIZERS = {
    "fhe_core/serialize/api.py:loads": "fhe_core.serialize.loads",
    "fhe_core/serialize/api.py:loads_many": "fhe_core.serialize.loads_many",
    "fhe_core/serialize/api.py:load": "fhe_core.serialize.load",
    "fhe_core/serialize/api.py:peek": "fhe_core.serialize.peek",
    "fhe_core/serialize/record.py:read_header": "fhe_core.serialize.read_header",
    "fhe_core/params/literal.py:ParamsLiteral.from_json": "fhe_core.params.ParamsLiteral.from_json",
    "fhe_core/params/params.py:Params.from_literal": "fhe_core.params.Params.from_literal",
    "apps/xgboost/archive.py:read_archive": "apps.xgboost.archive.read_archive",
    "apps/xgboost/plan.py:IdashModel.from_bytes": "apps.xgboost.plan.IdashModel.from_bytes",
    "apps/xgboost/export.py:HEForest.from_bytes": "apps.xgboost.export.HEForest.from_bytes",
    "apps/xgboost/private_forest.py:PrivateForest.from_bytes": "apps.xgboost.private_forest.PrivateForest.from_bytes",
    "apps/xgboost/plan.py:PublicModel.from_json": "apps.xgboost.plan.PublicModel.from_json",
    "apps/logreg/config.py:HELRConfig.from_json": "apps.logreg.config.HELRConfig.from_json",
    "apps/logreg/trainer.py:read_checkpoint": "apps.logreg.trainer.read_checkpoint",
    "apps/logreg/dataset.py:EncryptedDataset.from_bytes": "apps.logreg.dataset.EncryptedDataset.from_bytes",
    "server/uploads.py:check_record_start": "server.uploads.check_record_start",
}
READER_NAMES = {"loads", "loads_many", "load", "peek", "read_header", "from_bytes", "from_json", "from_literal",
                "read_archive", "read_checkpoint", "check_record_start"}


def _readers() -> set[str]:
    """Module-level functions and methods with a reader's name in fhe_core, apps and server."""
    found = set()
    for package in ("fhe_core", "apps", "server"):
        for path in (ROOT / package).rglob("*.py"):
            where = path.relative_to(ROOT).as_posix()
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, ast.FunctionDef) and node.name in READER_NAMES:
                    found.add(f"{where}:{node.name}")
                elif isinstance(node, ast.ClassDef):
                    found |= {f"{where}:{node.name}.{f.name}" for f in node.body
                              if isinstance(f, ast.FunctionDef) and f.name in READER_NAMES}
    return found


def test_every_deserializer_has_a_fuzz_target():
    assert _readers() == set(DESERIALIZERS), "a reader without a fuzz target (add it to tests/fuzz_targets.py)"
    assert set(DESERIALIZERS.values()) == set(fuzz_targets.targets())


def _target(read, roundtrip=lambda data, result: None, errors=(SerializationError,)) -> Target:
    return Target("planted", lambda: [b"x"], read, errors, roundtrip)


def test_a_typed_error_and_an_accepted_input_pass():
    assert check(_target(lambda data: data), b"abc") == "ok"
    assert check(_target(lambda data: (_ for _ in ()).throw(ChecksumError("bad"))), b"abc") == "ChecksumError"


def test_an_untyped_exception_fails():
    with pytest.raises(FuzzFailure, match="untyped KeyError"):
        check(_target(lambda data: {}["missing"]), b"abc")


def test_a_hang_fails(monkeypatch):
    monkeypatch.setattr(fuzz_targets, "TIME_LIMIT_S", 0.2)
    start = time.monotonic()
    with pytest.raises(FuzzFailure, match="no answer within"):
        check(_target(lambda data: time.sleep(30)), b"abc")
    assert time.monotonic() - start < 5


def test_an_allocation_sized_by_a_forged_length_fails():
    def read(data: bytes):
        return np.ones(int.from_bytes(data, "little"), dtype=np.uint8)   # 256 MiB from 4 bytes
    with pytest.raises(FuzzFailure, match="peak allocation"):
        check(_target(read), (256 << 20).to_bytes(4, "little"))
    assert check(_target(read), (1 << 20).to_bytes(4, "little")) == "ok"


def test_a_silent_numpy_overflow_fails():
    with pytest.raises(FuzzFailure, match="untyped RuntimeWarning"):
        check(_target(lambda data: np.asarray([1e300]).astype(np.float32)), b"abc")


def test_a_wrong_round_trip_fails():
    def roundtrip(data, result):
        assert result == data[::-1], "differs"
    with pytest.raises(FuzzFailure, match="round trip differs"):
        check(_target(lambda data: data, roundtrip), b"abc")


def test_resealed_mutations_pass_the_checksum_and_reach_the_metadata_checks():
    w = fuzz_targets.world()
    blob = serialize.dumps(w.ct)
    rng = random.Random(5)
    outcomes = set()
    for _ in range(40):
        mutated = fuzz_targets.mutate_record_metadata(rng, blob)
        try:
            serialize.loads(mutated, w.params)
            outcomes.add("ok")
        except SerializationError as exc:
            outcomes.add(type(exc))
    assert ChecksumError not in outcomes and MetadataError in outcomes


def test_the_seeded_mutator_reaches_the_expansion_and_the_seed_checks():
    """Whole and seeded ciphertext records moved between their forms and reseeded: some load (c_1
    the expansion of a random seed, written back seeded), some are refused by the shape and
    metadata checks."""
    w = fuzz_targets.world()
    loads = fuzz_targets.targets()["fhe_core.serialize.loads"]
    rng = random.Random(11)
    outcomes = set()
    whole = serialize.dumps(w.ckks_ct, compress=False)
    for blob in (serialize.dumps(w.ckks_ct), whole, serialize.dumps(w.ct, compress=False, packed=True)):
        for _ in range(12):
            mutated = fuzz_targets.mutate_seeded_ciphertext(rng, blob)
            outcome = check(loads, mutated)
            outcomes.add(outcome)
            ct = serialize.loads(mutated, w.params) if outcome == "ok" else None
            if ct is not None and ct.uniform_seed is not None:
                outcomes.add("seeded")
                assert torch.equal(ct.data[1], rlwe.sk_encryption_uniform(w.ctx, ct.uniform_seed, ct.level))
                assert torch.equal(ct.data[0], w.ckks_ct.data[0])
    assert {"seeded", "ShapeError", "MetadataError"} <= outcomes


def test_fuzz_inputs_are_reproducible_from_their_seed():
    target = fuzz_targets.targets()["fhe_core.serialize.loads"]
    first = [fuzz_targets.fuzz_input(random.Random(9), target) for _ in range(3)]
    assert first == [fuzz_targets.fuzz_input(random.Random(9), target) for _ in range(3)]
