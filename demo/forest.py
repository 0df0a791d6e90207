"""Encrypted tree-ensemble inference through the service: a lab registers the model, a clinic
encrypts its samples, the server scores them, the clinic decrypts and checks."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from apps.xgboost.client import ForestClient
from apps.xgboost.encrypted import Job, Run, plot_confusion
from apps.xgboost.plan import IdashModel, PublicModel, named_params
from fhe_core import serialize
from server.client import ServiceClient, Traffic


@dataclass
class ForestOutcome:
    """One workload scored through the service, beside its plaintext references."""

    name: str
    model: str
    preset: str
    n_samples: int
    class_names: tuple[str, ...]
    labels: np.ndarray
    scores: np.ndarray                 # decrypted class scores [n, C] (fixed-point integers)
    twin_scores: np.ndarray            # the integer twin's, [n, C]
    predicted: np.ndarray
    library_predicted: np.ndarray | None
    budget_left: float
    seconds: dict[str, float] = field(default_factory=dict)
    bytes: dict[str, int] = field(default_factory=dict)
    traffic: dict[str, Traffic] = field(default_factory=dict)  # per step: bytes and seconds on the wire
    confusion_png: Path | None = None

    @property
    def exact(self) -> bool:
        return bool(np.array_equal(self.scores, self.twin_scores))

    @property
    def correct(self) -> int:
        return int((self.predicted == self.labels).sum())

    @property
    def library_correct(self) -> int | None:
        lib = self.library_predicted
        return None if lib is None else int((lib == self.labels).sum())

    @property
    def same_as_library(self) -> int | None:
        lib = self.library_predicted
        return None if lib is None else int((self.predicted == lib).sum())


def register_model(lab: ServiceClient, name: str, job: Job, preset: str, allow_insecure: bool) -> None:
    """The model owner's side: the exported forest goes to the server once (admin call), laid out
    for batches of the workload's size (fewer ciphertexts than the default width's)."""
    params = named_params(preset, allow_insecure=allow_insecure)
    kind = "idash" if isinstance(job.model, IdashModel) else "xgboost"
    lab.add_model(name, job.model.to_bytes(), params, kind=kind, width=job.n_samples, replace=True)


def score_through_service(user: ServiceClient, name: str, job: Job, preset: str, *, device: str,
                          allow_insecure: bool, out_dir: Path) -> ForestOutcome:
    """The clinic's side: keys, encryption, prediction requests, decryption, checks. The batch is
    sent twice: the first request also loads the key set and prepares the model on the server,
    the second is what every later batch costs."""
    seconds, sizes, traffic = {}, {}, {}
    public = PublicModel.from_json(json.dumps(user.model(name)["public"]))
    start = time.perf_counter()
    client = ForestClient(public, device=device, allow_insecure=allow_insecure)
    keys = client.eval_keys()
    seconds["keygen"] = time.perf_counter() - start
    sizes["keys"] = len(serialize.dumps(keys, packed=True))  # as register_keys sends them
    start, before = time.perf_counter(), user.traffic.snapshot()
    keyset = user.register_keys(keys, client.params)
    seconds["register keys"] = time.perf_counter() - start
    traffic["register keys"] = user.traffic.since(before)
    start = time.perf_counter()
    cts = client.encrypt(job.samples)
    seconds["encrypt"] = time.perf_counter() - start
    # the batch's ciphertexts share one shape and level (the plan's input level): one record's
    # size times their count, rather than serializing the whole batch an extra time
    sizes["request"] = len(cts) * len(serialize.dumps(cts[0], packed=True))
    start, before = time.perf_counter(), user.traffic.snapshot()
    results = user.predict(name, keyset, cts, client.params)
    seconds["first predict (loads keys and model)"] = time.perf_counter() - start
    traffic["first predict"] = user.traffic.since(before)
    start, before = time.perf_counter(), user.traffic.snapshot()
    results = user.predict(name, keyset, cts, client.params)
    seconds["predict (HTTP round trip)"] = time.perf_counter() - start
    traffic["predict"] = user.traffic.since(before)
    sizes["response"] = len(serialize.dumps_many(results, packed=True))
    start = time.perf_counter()
    scores = client.decrypt_scores(results, job.n_samples)
    seconds["decrypt"] = time.perf_counter() - start
    predicted = scores.argmax(axis=1) if scores.shape[1] > 1 else (scores[:, 0] > 0).astype(np.int64)
    outcome = ForestOutcome(job.name, name, preset, job.n_samples, job.class_names, job.labels, scores,
                            job.twin_scores, predicted, job.library_predicted,
                            min(client.noise_budget(ct) for ct in results), seconds, sizes, traffic)
    run = Run(job, None, scores, predicted, seconds, sizes, outcome.budget_left)
    outcome.confusion_png = plot_confusion(run, out_dir / f"confusion-{name}.png")
    return outcome
