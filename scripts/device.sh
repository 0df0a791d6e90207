#!/usr/bin/env bash
# One call on the lent GPU machine (see README, "GPU"): build the extension from this tree with its
# CUDA kernels, run every `gpu` test, the benchmarks, and the main job on the GPU. Results land in
# ./bench-out, or, under the device tool, packed as $OUT/results.tgz (it returns only a few files).
#
#   bash scripts/device.sh                       # every stage
#   bash scripts/device.sh --no-bench            # build + gpu tests
#   bash scripts/device.sh --only "build apps"   # chosen stages, in this order:
#       build   the extension (CUDA kernels for sm_90)
#       tests   every `gpu` test (engine, schemes, bootstrapping, the applications at 128 bits;
#               FHE_GPU_TESTS="tests/apps" narrows it)
#       bench   engine, CKKS, BFV and bootstrapping benchmarks (scripts/bench.py)
#       apps    HELR (30 iterations, full MNIST) and the trees stage's benchmarks
#       keyswitch  linear against hybrid key switching (scripts/bench.py --only keyswitch-linear: relinearize
#               and rotate at log N 14-16, l 8-32, key bytes; not in the default stages) -> keyswitch.jsonl
#       trees   XGBoost alone (iDASH 99 and 258, SRBCT model-private and thermometer: exact or it
#               fails, server ms, request/answer MiB), bytes on the wire by format, one HTTP
#               stream's MB/s; not in the default stages (apps includes it)
#       bfvhost the BFV host overhead (issue 29 item 4; not in the default stages): bench.py's BFV suite
#               (eager and graphed calls against their device time), ops and eager wall time per call
#               (scripts/count_ops.py), the forests eager and with graphed batches (bench_xgboost.py
#               --graphed) -> bfv-host.jsonl, bfv-host-ops.jsonl
#       demo    the main job (python -m demo) on the GPU, full MNIST, iDASH included, SRBCT in both
#               encodings (model-private and thermometer) for the report's per-encoding rows
#       keys    the HELR keys phase (scripts/bench_keys.py --device cuda --first-load: keys made on the GPU,
#               registered with a real server over loopback, the worker's first load) -> keys.jsonl;
#               not in the default stages (the demo stage's report has the phase too)
#       dist    two GPUs or more (device kind nvidia-h200-x2; not in the default stages): the NCCL tests
#               (collectives on ciphertexts, data-parallel HELR against one GPU bit for bit) and
#               scripts/bench_helr_dist.py (full MNIST, 30 iterations on 1 and 2 GPUs, with and
#               without bootstrapping; the ciphertext all-reduce by method) -> dist.jsonl;
#               FHE_DIST_ARGS="--iterations 6 --samples 4096" overrides its settings
#       serve   prediction throughput of the service with 1 and 2 GPU workers (scripts/loadtest.py
#               --workers 1, then 2: 128-bit BFV, 32 clients, 120 s each; FHE_LOAD_SAMPLES per request,
#               default 256) and their ratio (device kind nvidia-h200-x2; not in the default stages)
#       py312   the default test suite (`-m "not slow"`: CPU tests and every `gpu` test) under the
#               device's Python 3.12 with the newest wheels of every dependency, carried as .whl/
#               from `bash scripts/device_wheels.sh` (not in the default stages; after `build`)
#
# The GPU image lacks some packages and the data: carry them in (both are git-ignored here):
#   .whl/   wheels of xgboost-cpu, mlxtend, fastapi, pydantic, uvicorn, ... (README "GPU" lists them;
#           scripts/device_wheels.sh fetches the newest of all)
#   .data/  copies of ../shared/data/{mnist,srbct_khan2001,idash2020_sabanci_xgb}
set -uo pipefail
cd "$(dirname "$0")/.."
if [ -n "${OUT:-}" ]; then
    out="$(mktemp -d)"
    trap 'tar -czf "$OUT/results.tgz" -C "$out" .' EXIT
else
    out="bench-out"
fi
mkdir -p "$out"
export PYTHONUNBUFFERED=1 MAX_JOBS="${MAX_JOBS:-16}" FHE_CORE_CUDA=1 FHE_CORE_PTXAS_VERBOSE=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

stages="build tests bench apps demo"
case "${1:-}" in
    --no-bench) stages="build tests" ;;
    --only) stages="${2:?--only needs a list of stages}" ;;
    "") ;;
    *) echo "usage: bash scripts/device.sh [--no-bench | --only 'build tests bench keyswitch keys apps trees bfvhost demo dist serve py312']" >&2; exit 2 ;;
esac
has() { case " $stages " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && export PYTHONPATH="/tmp/site:$PYTHONPATH"
fi
data="$PWD/.data"
[ -d "$data" ] && export FHE_SHARED_DATA="$data"

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" | tee -a "$out/gpu.txt"
rc=0

if has build; then
    echo "==> build"
    rm -rf build fhe_core/_C*.so
    if ! python3 setup.py build_ext --inplace > "$out/build.log" 2>&1; then
        tail -40 "$out/build.log"; exit 1
    fi
    grep -E "Compiling entry|registers|spill" "$out/build.log" | sed 's/ptxas info *://' | head -60 || true
fi

if has tests; then
    echo "==> gpu tests"
    python3 -m pytest -m gpu -q -p no:cacheprovider ${FHE_GPU_TESTS:-tests} 2>&1 | tee "$out/gpu-tests.log"
    rc=${PIPESTATUS[0]}
fi

if has py312; then
    echo "==> the default test suite with the carried wheels"
    python3 -c "import sys; print('python', sys.version.split()[0])" | tee "$out/py312-tests.log"
    # importlib.metadata reports the first copy on sys.path: the carried one where there is one
    python3 - <<'PY' | tee -a "$out/py312-tests.log"
import importlib.metadata as m
names = ("numpy scikit-learn xgboost-cpu matplotlib mlxtend tqdm fastapi uvicorn pydantic pydantic-settings "
         "httpx psutil pytest hypothesis torch").split()
print(", ".join(f"{name} {m.version(name)}" for name in names))
PY
    python3 -m pytest -m "not slow" -q -p no:cacheprovider ${FHE_PY312_TESTS:-tests} 2>&1 | tee -a "$out/py312-tests.log"
    [ "${PIPESTATUS[0]}" = 0 ] || rc=1
fi

if has bench; then
    echo "==> benchmarks"
    python3 scripts/bench.py --device cuda --json "$out/bench.jsonl" --markdown "$out/bench-gpu.md"
    python3 scripts/bench.py --device cuda --only boot --json "$out/bench.jsonl" --markdown "$out/bench-boot.md"
    python3 scripts/bench.py --device cuda --only boot-dense --json "$out/bench.jsonl" \
        --markdown "$out/bench-boot-dense.md"
fi

if has keyswitch; then
    echo "==> linear against hybrid key switching"
    python3 scripts/bench.py --device cuda --only keyswitch-linear --json "$out/keyswitch.jsonl" \
        --markdown "$out/bench-keyswitch.md" || rc=1
fi

if has keys; then
    echo "==> HELR keys phase: keygen, registration, first load"
    python3 scripts/bench_keys.py --device cuda --first-load --json "$out/keys.jsonl" | tee "$out/bench-keys.txt"
    [ "${PIPESTATUS[0]}" = 0 ] || rc=1
fi

if has apps || has trees; then
    echo "==> tree-ensemble benchmarks"
    python3 scripts/bench_xgboost.py --device cuda ${data:+--idash "$data/idash2020_sabanci_xgb" --islp "$data/srbct_khan2001"} \
        --json "$out/apps.jsonl" --markdown "$out/bench-apps.md" || rc=1
    python3 scripts/bench_wire.py --device cuda ${data:+--idash "$data/idash2020_sabanci_xgb" --islp "$data/srbct_khan2001"} \
        --json "$out/wire.jsonl" | tee "$out/bench-wire.txt"
    python3 scripts/bench_http.py --mib 256 --json "$out/http.jsonl" | tee "$out/bench-http.txt"
fi

if has bfvhost; then
    echo "==> BFV host overhead: eager and graphed calls, ops per call, the forests eager and graphed"
    python3 scripts/bench.py --device cuda --only bfv --json "$out/bfv-host.jsonl" --markdown "$out/bench-bfv-host.md" \
        || rc=1
    python3 scripts/count_ops.py --device cuda --forest ${data:+--data "$data"} --json "$out/bfv-host-ops.jsonl" \
        | tee "$out/bfv-host-ops.txt" || rc=1
    for graphed in "" --graphed; do
        python3 scripts/bench_xgboost.py --device cuda $graphed \
            ${data:+--idash "$data/idash2020_sabanci_xgb" --islp "$data/srbct_khan2001"} \
            --json "$out/bfv-host.jsonl" --markdown "$out/bench-bfv-host.md" || rc=1
    done
fi

if has dist; then
    echo "==> data-parallel on $(nvidia-smi -L | wc -l) GPUs"
    python3 -m pytest -m gpu -q -p no:cacheprovider tests/fhe_core/test_distributed.py \
        tests/apps/logreg/test_parallel_helr.py 2>&1 | tee "$out/dist-tests.log"
    [ "${PIPESTATUS[0]}" = 0 ] || rc=1
    python3 scripts/bench_helr_dist.py --device cuda --gpus 2 --iterations 30 ${data:+--mnist "$data/mnist"} \
        --json "$out/dist.jsonl" ${FHE_DIST_ARGS:-} 2>&1 | tee "$out/bench-dist.txt"
    [ "${PIPESTATUS[0]}" = 0 ] || rc=1
fi

if has apps; then
    echo "==> HELR benchmark"
    python3 scripts/bench_helr.py --device cuda --iterations 30 ${data:+--mnist "$data/mnist"} \
        --json "$out/apps.jsonl" --markdown "$out/bench-helr.md"
fi

if has serve; then
    echo "==> prediction throughput with 1 and 2 GPU workers"
    for workers in 1 2; do
        python3 scripts/loadtest.py --device cuda --workers "$workers" --clients 32 --duration 120 \
            --samples "${FHE_LOAD_SAMPLES:-256}" --json "$out/loadtest-workers$workers.json" \
            2>&1 | tee "$out/loadtest-workers$workers.md"
        [ "${PIPESTATUS[0]}" = 0 ] || rc=1
    done
    python3 - "$out" <<'PY' | tee "$out/loadtest-scaling.txt"
import json, sys
one, two = (json.load(open(f"{sys.argv[1]}/loadtest-workers{n}.json"))["load"] for n in (1, 2))
print(f"2 workers / 1 worker: {two['throughput_rps'] / one['throughput_rps']:.2f}x "
      f"({one['throughput_rps']:.2f} -> {two['throughput_rps']:.2f} req/s), errors {one['errors']} + {two['errors']}")
PY
fi

if has demo; then
    echo "==> the main job on the GPU"
    start=$(date +%s)
    python3 -m demo --device cuda --no-progress --out "$out/demo" --srbct-encodings private thermometer \
        ${data:+--mnist "$data/mnist" --islp "$data/srbct_khan2001" --idash "$data/idash2020_sabanci_xgb"} \
        2>&1 | tee "$out/demo.log"
    echo "main job wall time: $(( $(date +%s) - start )) s" | tee -a "$out/demo.log"
    rm -rf "$out/demo/server-data"
fi
exit "$rc"
