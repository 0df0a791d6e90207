"""Adapters from the service to the applications' server halves.

- :class:`XGBoostKind`: encrypted tree-ensemble inference on BFV (apps.xgboost): models are
  ``HEForest.to_bytes()``; the plan checks that the parameters evaluate the model exactly.
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

from fhe_core.params import Params
from fhe_core.rlwe import EvalKeySet

from server.blobs import mapped
from server.errors import UnprocessableError


class XGBoostKind:
    """Model kind 'xgboost' (see :class:`server.models.ModelKind`)."""

    def check(self, model: bytes, params: Params) -> dict[str, Any]:
        from apps.xgboost.export import HEForest
        from apps.xgboost.plan import ForestPlan, public_model

        forest = HEForest.from_bytes(model)
        ForestPlan(forest, params)  # raises PlanError when the parameters cannot evaluate it exactly
        return json.loads(public_model(forest, params).to_json())

    def required_keys(self, public: dict[str, Any], params: Params) -> tuple[bool, set[int]]:
        from apps.xgboost.plan import PublicModel

        model = PublicModel.from_json(json.dumps(public))
        return True, set(model.galois_elements)

    def evaluator(self, model: bytes, params: Params, keys: EvalKeySet) -> Any:
        from apps.xgboost.export import HEForest
        from apps.xgboost.server import ForestEvaluator

        return ForestEvaluator(params, keys, HEForest.from_bytes(model))


class HELRTraining:
    """Job kind 'helr' (see :class:`server.worker.JobRunner`) and the dataset verifier."""

    def __init__(self, service: Any):
        self.service = service

    def parse_config(self, config: dict[str, Any]) -> Any:
        from apps.logreg.config import HELRConfig

        try:
            return HELRConfig.from_json(json.dumps(config))
        except (ValueError, TypeError, KeyError) as exc:
            raise UnprocessableError(f"config: {exc}") from exc

    def params(self, config: Any) -> Params:
        return self.service.params(config.params_literal().to_dict())

    def iterations(self, config: Any) -> int:
        return int(config.iterations)

    def missing_keys(self, config: Any, keyset_info: dict[str, Any]) -> dict[str, Any]:
        needed = set(config.galois_elements())
        lacking = sorted(needed - set(keyset_info.get("galois_elements", [])))
        missing: dict[str, Any] = {}
        if not keyset_info.get("relin"):
            missing["relin"] = True
        if lacking:
            missing["galois_elements"] = lacking
        return missing

    def verify_dataset(self, path: Path, params: Params) -> dict[str, Any]:
        from apps.logreg.client import EncryptedDataset

        with mapped(path) as view:
            dataset = EncryptedDataset.from_bytes(bytes(view), params)
        return {"samples": int(dataset.n_samples)}

    def open(self, job: dict[str, Any], checkpoint: bytes | None) -> Any:
        raise NotImplementedError
