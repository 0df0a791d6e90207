"""Command line of the client (``python -m server.client``). Each run makes its own secret key,
which never leaves the process: it uploads the matching evaluation keys, sends ciphertexts,
and decrypts what comes back.

    python -m server.client --url URL --token TOKEN models
    python -m server.client ... predict MODEL --x samples.npy [--out scores.npy]
    python -m server.client ... train --x x.npy --y y.npy [--config helr.json | --tiny --iterations 4]
                                      [--out w.npy]
    python -m server.client ... job JOB_ID | cancel JOB_ID

``--token`` defaults to ``$FHE_TOKEN``, ``--url`` to ``$FHE_URL`` or http://127.0.0.1:8000.
``samples.npy``: ``[n, features]`` float (NaN = missing); ``x.npy``: the HELR design matrix
(bias column first, entries in [-1, 1]); ``y.npy``: 0/1 labels.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from fhe_core.errors import FHEError
from server.client import ServiceClient


def _predict(api: ServiceClient, args: argparse.Namespace) -> None:
    from apps.xgboost.client import ForestClient
    from apps.xgboost.plan import PublicModel

    public = PublicModel.from_json(json.dumps(api.model(args.model)["public"]))
    client = ForestClient(public, device=args.device, allow_insecure=args.allow_insecure)
    keyset = api.register_keys(client.eval_keys(), client.params, public_key=client.public_key)
    x = np.load(args.x, allow_pickle=False)
    scores = api.predict_scores(args.model, keyset, client, x)
    classes = (scores[:, 0] > 0).astype(np.int64) if scores.shape[1] == 1 else scores.argmax(axis=1)
    if args.out:
        np.save(args.out, scores)
    print(json.dumps({"keyset": keyset, "samples": len(x), "classes": classes.tolist()}))


def _train(api: ServiceClient, args: argparse.Namespace) -> None:
    from apps.logreg.client import HELRClient
    from apps.logreg.config import HELRConfig

    if args.config:
        config = HELRConfig.from_json(Path(args.config).read_text())
    elif args.tiny:
        config = HELRConfig.tiny(iterations=args.iterations)
    else:
        config = HELRConfig.secure(iterations=args.iterations)
    x, y = np.load(args.x, allow_pickle=False), np.load(args.y, allow_pickle=False)
    client = HELRClient(config, device=args.device)
    with tempfile.TemporaryDirectory(prefix="fhe-keys-") as tmp:  # keys written and sent one file, never all in memory
        path = Path(tmp) / "eval-keys.fhe"
        client.write_eval_keys(path)
        keyset = api.register_keys(path, client.params)
    dataset = api.upload_dataset(client.encrypt_dataset(x, y), client.params)
    job = api.train(config, keyset, dataset)
    api.wait(job, timeout=args.timeout)
    weights = client.decrypt_weights(api.download_model(job, client.params))
    if args.out:
        np.save(args.out, weights)
    print(json.dumps({"job": job, "weights": weights.tolist()}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m server.client", description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("FHE_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--token", default=os.environ.get("FHE_TOKEN"))
    parser.add_argument("--device", default="cpu", help="where the client's keys and ciphertexts live")
    parser.add_argument("--allow-insecure", action="store_true", help="tiny test parameters")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("models", help="list the models and their parameters")
    predict = sub.add_parser("predict", help="encrypted prediction with a model")
    predict.add_argument("model")
    predict.add_argument("--x", required=True, type=Path)
    predict.add_argument("--out", type=Path)
    train = sub.add_parser("train", help="encrypted HELR training job; waits and decrypts the weights")
    train.add_argument("--x", required=True, type=Path)
    train.add_argument("--y", required=True, type=Path)
    train.add_argument("--config", type=Path, help="an HELRConfig JSON file")
    train.add_argument("--tiny", action="store_true", help="HELRConfig.tiny() (insecure, tests)")
    train.add_argument("--iterations", type=int, default=30)
    train.add_argument("--timeout", type=float, default=24 * 3600.0)
    train.add_argument("--out", type=Path)
    for name in ("job", "cancel"):
        sub.add_parser(name, help=f"{name} a training job").add_argument("job_id")
    args = parser.parse_args(argv)
    if not args.token:
        parser.error("give --token or set FHE_TOKEN")
    try:
        with ServiceClient(args.url, args.token, progress=not args.quiet) as api:
            if args.command == "models":
                print(json.dumps([{k: m[k] for k in ("name", "kind", "params_id")} for m in api.models()], indent=2))
            elif args.command == "predict":
                _predict(api, args)
            elif args.command == "train":
                _train(api, args)
            elif args.command == "job":
                print(json.dumps(api.job(args.job_id), indent=2))
            else:
                print(json.dumps(api.cancel(args.job_id), indent=2))
    except FHEError as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0
