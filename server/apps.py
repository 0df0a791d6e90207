"""Adapters from the service to the applications' server halves.

- :class:`ForestKind`: encrypted tree-ensemble inference on BFV (apps.xgboost): models are
  ``HEForest.to_bytes()`` (kind 'xgboost') or ``IdashModel.to_bytes()`` (kind 'idash'); the plan
  checks that the parameters evaluate the model exactly.
- :class:`HELRTraining`: encrypted logistic-regression training on CKKS with bootstrapping
  (apps.logreg): datasets are ``EncryptedDataset.to_bytes()``; a job is an
  ``EncryptedHELRTrainer`` advanced one iteration at a time, checkpointed after each.

Only server halves are imported here: no client half, so no code path that makes or reads a
secret key.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fhe_core.errors import FHEError
from fhe_core.params import Params
from fhe_core.rlwe import EvalKeySet

from fhe_core.serialize import dumps

from server.mapping import mapped
from server.errors import UnprocessableError
from server.uploads import Upload


class ForestKind:
    """A tree-ensemble model kind (see :class:`server.models.ModelKind`) over apps.xgboost's
    server half. ``model_class``: the class whose ``from_bytes`` reads the model files of this
    kind (HEForest for any exported XGBoost model, IdashModel for the iDASH 2020 encoding)."""

    def __init__(self, model_class: str):
        self.model_class = model_class

    def _load(self, model: bytes) -> Any:
        from apps.xgboost import export, plan

        cls = {"HEForest": export.HEForest, "IdashModel": plan.IdashModel}[self.model_class]
        return cls.from_bytes(model)

    def check(self, model: bytes, params: Params, width: int | None) -> dict[str, Any]:
        """The model loads and its plan fits ``params`` and batches of ``width`` samples
        (PlanError otherwise); returns the public model (parameters, level, layout, binning,
        Galois elements; no tree structure)."""
        from apps.xgboost.plan import ForestPlan

        plan = ForestPlan.build(self._load(model), params, width=width)
        return json.loads(plan.public_model().to_json())

    def required_keys(self, public: dict[str, Any], params: Params) -> tuple[bool, set[int]]:
        from apps.xgboost.plan import PublicModel

        return True, set(PublicModel.from_json(json.dumps(public)).galois_elements(params.n))

    def evaluator(self, model: bytes, params: Params, keys: EvalKeySet, public: dict[str, Any]) -> Any:
        from apps.xgboost.server import ForestEvaluator

        return ForestEvaluator(params, keys, self._load(model), width=public["width"])


class HELRTraining:
    """Job kind 'helr' (see :class:`server.worker.JobRunner`) and the dataset verifier."""

    def __init__(self, service: Any):
        self.service = service

    def parse_config(self, config: dict[str, Any]) -> Any:
        """An HELRConfig from its JSON object (HELRConfigError, a ParameterError, is a 422)."""
        from apps.logreg.config import HELRConfig

        try:
            return HELRConfig.from_json(json.dumps(config))
        except FHEError:
            raise
        except (TypeError, ValueError, ArithmeticError) as exc:  # a field of the wrong type slipped past
            raise UnprocessableError(f"config: {type(exc).__name__}: {exc}") from None

    def params(self, config: Any) -> Params:
        """The CKKS parameters of the config's bootstrapping preset (refused below 128 bits
        unless the service allows insecure sets)."""
        return self.service.params(config.bootstrapping_parameters.literal.to_dict())

    def iterations(self, config: Any) -> int:
        return int(config.iterations)

    def missing_keys(self, config: Any, keyset_info: dict[str, Any]) -> dict[str, Any]:
        """The keys training with ``config`` needs that the key set lacks (empty: none)."""
        from apps.logreg.trainer import required_galois_elements

        needed = required_galois_elements(config, self.params(config))
        lacking = sorted(set(needed) - set(keyset_info.get("galois_elements", [])))
        missing: dict[str, Any] = {}
        if not keyset_info.get("relin"):
            missing["relin"] = True
        if lacking:
            missing["galois_elements"] = lacking
        return missing

    def check_dataset(self, config: Any, dataset_info: dict[str, Any]) -> None:
        """The dataset must be packed for this config: its batch size, block count and width."""
        expected_blocks = config.n_blocks(dataset_info["samples"])
        problems = []
        if dataset_info["batch_size"] != config.batch_size:
            problems.append(f"batch size {dataset_info['batch_size']} (config: {config.batch_size})")
        if dataset_info["blocks"] != expected_blocks:
            problems.append(f"{dataset_info['blocks']} blocks (config's schedule: {expected_blocks})")
        if dataset_info["features"] > config.columns:
            problems.append(f"{dataset_info['features']} features (config: {config.columns} columns)")
        top = config.bootstrapping_parameters.output_level
        if min(dataset_info["levels"]) < top:
            problems.append(f"ciphertexts at level {min(dataset_info['levels'])} (training needs >= {top})")
        if dataset_info["slots"] != [config.layout.slots]:
            problems.append(f"ciphertexts of {dataset_info['slots']} slots (config: {config.layout.slots})")
        scale = float(2.0 ** config.bootstrapping_parameters.literal.log_default_scale)
        if dataset_info["scales"] != [scale]:
            problems.append(f"ciphertexts at scales {dataset_info['scales']} (training needs the default {scale})")
        if dataset_info["degrees"] != [1]:
            problems.append(f"ciphertexts of degree {dataset_info['degrees']} (training needs degree 1)")
        if problems:
            raise UnprocessableError("dataset does not match the config: " + "; ".join(problems))

    def verify_dataset(self, path: Path, params: Params) -> dict[str, Any]:
        """Every ciphertext of the dataset loads for ``params``; returns its shape facts."""
        from apps.logreg.dataset import EncryptedDataset

        with mapped(path) as view:
            dataset = EncryptedDataset.from_bytes(view, params, device="cpu",
                                                  max_bytes=self.service.settings.max_upload_bytes)
        cts = dataset.ciphertexts
        return {"samples": dataset.samples, "features": dataset.features, "batch_size": dataset.batch_size,
                "blocks": dataset.n_blocks, "ciphertexts": len(cts), "levels": sorted({ct.level for ct in cts}),
                "slots": sorted({ct.slots for ct in cts}), "scales": sorted({float(ct.scale) for ct in cts}),
                "degrees": sorted({ct.degree for ct in cts})}

    def open(self, job: dict[str, Any], checkpoint: bytes | None) -> HELRSession:
        """The job's trainer on the service's device: fresh, or resumed bit for bit from the
        last checkpoint."""
        from apps.logreg.dataset import EncryptedDataset
        from apps.logreg.trainer import EncryptedHELRTrainer

        service = self.service
        config = self.parse_config(json.loads(job["config_json"]))
        keyset = Upload.from_row(service.db.one("SELECT * FROM uploads WHERE id = ?", (job["keyset_id"],)))
        dataset_row = Upload.from_row(service.db.one("SELECT * FROM uploads WHERE id = ?", (job["dataset_id"],)))
        params, keys = service.keyset(keyset)
        with mapped(service.uploads.blob_path(dataset_row)) as view:
            dataset = EncryptedDataset.from_bytes(view, params, device=service.settings.device,
                                                  max_bytes=service.settings.max_upload_bytes)
        schedule = config.schedule(dataset.samples)
        if checkpoint is None:
            trainer = EncryptedHELRTrainer(config, keys, dataset, schedule, params=params)
        else:
            trainer = EncryptedHELRTrainer.resume(config, keys, dataset, schedule, checkpoint, params=params)
        return HELRSession(trainer)


class HELRSession:
    """A running HELR job (:class:`server.worker.TrainingSession`); the result is the encrypted
    weights w as one serialized CKKS ciphertext, at level 0 (what the client needs, see
    ``EncryptedHELRTrainer.for_client``), as are the checkpoints its owner downloads."""

    def __init__(self, trainer: Any):
        self.trainer = trainer

    @property
    def iteration(self) -> int:
        return self.trainer.iteration

    def step(self) -> None:
        self.trainer.step()

    def checkpoint(self) -> bytes:
        return self.trainer.checkpoint()

    def client_checkpoint(self) -> bytes:
        return self.trainer.client_checkpoint()

    def result(self) -> bytes:
        return dumps(self.trainer.for_client(self.trainer.weights), packed=True)
