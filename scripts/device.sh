#!/usr/bin/env bash
# One call on the lent GPU machine (see README, "GPU"): build the extension from this tree with its
# CUDA kernels, run every `gpu` test (all live under tests/fhe_core; the app tests need packages the
# GPU image lacks), then the benchmarks. Results land in $OUT (the device tool's
# output folder) or ./bench-out.
#
#   bash scripts/device.sh            # build + gpu tests + benchmarks (engine, CKKS, BFV, then bootstrapping)
#   bash scripts/device.sh --no-bench # build + gpu tests
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-bench-out}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1 MAX_JOBS="${MAX_JOBS:-16}" FHE_CORE_CUDA=1 FHE_CORE_PTXAS_VERBOSE=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" | tee -a "$out/gpu.txt"

echo "==> build"
rm -rf build fhe_core/_C*.so
if ! python3 setup.py build_ext --inplace > "$out/build.log" 2>&1; then
    tail -40 "$out/build.log"; exit 1
fi
grep -E "Compiling entry|registers|spill" "$out/build.log" | sed 's/ptxas info *://' | head -60 || true

echo "==> gpu tests"
python3 -m pytest -m gpu -q -p no:cacheprovider tests/fhe_core 2>&1 | tee "$out/gpu-tests.log"
tests_rc=${PIPESTATUS[0]}

if [ "${1:-}" != "--no-bench" ]; then
    echo "==> benchmarks"
    python3 scripts/bench.py --device cuda --json "$out/bench.jsonl" --markdown "$out/bench-gpu.md"
    python3 scripts/bench.py --device cuda --only boot --json "$out/bench.jsonl" --markdown "$out/bench-boot.md"
fi
exit "$tests_rc"
