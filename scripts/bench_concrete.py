"""Concrete ML's XGBClassifier on SRBCT: the peer of the model-private encoding, on the same split.

Concrete ML (Zama) compiles a quantized tree ensemble into a TFHE circuit; the client sees only
the output, as in our private mode. It is not a dependency of this project (it pins its own torch
and numpy): install it in a separate environment and run this script there, from the repository
root, so that it reads SRBCT through the project's own loader (numpy only):

    python3.11 -m venv ~/venv-concrete && ~/venv-concrete/bin/pip install concrete-ml
    ~/venv-concrete/bin/python scripts/bench_concrete.py --json docs/results/concrete-ml-cpu.jsonl

The model: XGBoost with our SRBCT hyper-parameters (50 rounds, depth 2, learning rate 0.3, seed 0;
``ml.baselines.XGBoostParams``). ``n_bits`` (Concrete ML's quantization of inputs and leaves) is
the smallest of ``--n-bits`` whose simulated accuracy on the 20 test profiles reaches
``--target-correct`` (our private mode's: 18/20, like XGBoost on the raw profiles); then the
circuit is compiled on the training profiles, the keys made, and ``--samples`` test profiles run
encrypted (``fhe="execute"``) one at a time: the median seconds per profile is the comparison.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
from importlib import metadata
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from data.genomics import load_khan  # noqa: E402

SHARED = Path(os.environ.get("FHE_SHARED_DATA", Path(__file__).resolve().parents[1].parent / "shared" / "data"))
ROUNDS, DEPTH, LEARNING_RATE, SEED = 50, 2, 0.3, 0  # ml.baselines.XGBoostParams' defaults, as srbct_job uses them


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--islp", type=Path, default=SHARED / "srbct_khan2001")
    parser.add_argument("--n-bits", type=int, nargs="+", default=[2, 3, 4, 5, 6])
    parser.add_argument("--target-correct", type=int, default=18, help="test profiles right (of 20)")
    parser.add_argument("--samples", type=int, default=20, help="test profiles run encrypted")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path, help="append one JSON line")
    args = parser.parse_args(argv)

    from concrete.ml.sklearn import XGBClassifier

    data = load_khan(args.islp)
    chosen, simulated = None, {}
    for n_bits in sorted(args.n_bits):
        model = XGBClassifier(n_bits=n_bits, n_estimators=ROUNDS, max_depth=DEPTH, learning_rate=LEARNING_RATE,
                              random_state=SEED, n_jobs=args.threads, tree_method="hist")
        model.fit(data.x_train, data.y_train)
        clear = int((model.predict(data.x_test) == data.y_test).sum())
        start = time.perf_counter()
        model.compile(data.x_train)
        compile_s = time.perf_counter() - start
        correct = int((model.predict(data.x_test, fhe="simulate") == data.y_test).sum())
        simulated[n_bits] = correct
        print(f"n_bits {n_bits}: {correct}/20 simulated, {clear}/20 quantized in the clear, compile {compile_s:.1f} s",
              flush=True)
        if correct >= args.target_correct:
            chosen = n_bits
            break
    if chosen is None:
        print(f"no n_bits of {args.n_bits} reaches {args.target_correct}/20", file=sys.stderr)
        return 1

    start = time.perf_counter()
    model.fhe_circuit.keygen(force=True)
    keygen_s = time.perf_counter() - start
    x, y = data.x_test[:args.samples], data.y_test[:args.samples]
    seconds, predicted = [], []
    for row in x:
        start = time.perf_counter()
        predicted.append(int(model.predict(row[None, :], fhe="execute")[0]))
        seconds.append(time.perf_counter() - start)
        print(f"  profile {len(seconds)}: {seconds[-1]:.2f} s", flush=True)
    predicted = np.asarray(predicted)
    record = {
        "workload": "srbct", "library": "concrete-ml", "version": metadata.version("concrete-ml"),
        "model": {"n_estimators": ROUNDS, "max_depth": DEPTH, "learning_rate": LEARNING_RATE, "n_bits": chosen},
        "simulated_correct_by_n_bits": simulated, "samples": len(x),
        "correct_encrypted": int((predicted == y).sum()),
        "same_as_simulated": int((predicted == model.predict(x, fhe="simulate")).sum()),
        "seconds_per_sample_median": float(np.median(seconds)), "seconds_per_sample": seconds,
        "compile_seconds": compile_s, "keygen_seconds": keygen_s,
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} logical CPUs",
        "python": platform.python_version(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    print(json.dumps({k: v for k, v in record.items() if k != "seconds_per_sample"}, indent=1))
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps(record) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
