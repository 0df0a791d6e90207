#!/usr/bin/env bash
# Set everything up in a local virtual environment, build the fhe_core extension from source,
# then run one job:
#
#   bash scripts/quickstart.sh demo       # the main job: encrypted predictions and training over
#                                         # HTTP against plaintext baselines, with a report (CPU is enough)
#   bash scripts/quickstart.sh engine-demo  # the engine alone: an RNS product checked against Python integers
#   bash scripts/quickstart.sh test       # `ruff check .`, then the test suite without the `slow` tests (what CI runs)
#   bash scripts/quickstart.sh test-all   # every test, `slow` ones included
#   bash scripts/quickstart.sh bench      # the benchmark tables (CPU, and GPU where present)
#
# Environment knobs:
#   FHE_VENV=path          virtual environment to use or create (default .venv)
#   FHE_TORCH_SPEC=spec    pip requirement for torch when the environment has none
#                          (default torch==2.13.0)
#   FHE_CORE_CUDA=auto|0|1 build the CUDA kernels when nvcc is found (auto), never (0: a machine
#                          without a GPU), or always (1: a missing toolkit is an error; CI)
#
# The extension is built only when its inputs changed since the last successful build in this
# environment (scripts/extension_stamp.py).
#   MAX_JOBS=n             parallel compile jobs
set -euo pipefail
cd "$(dirname "$0")/.."

job="${1:-demo}"
shift || true
venv="${FHE_VENV:-.venv}"

if [ ! -x "$venv/bin/python" ]; then
    echo "==> creating virtual environment $venv"
    python3 -m venv "$venv" || {
        echo "error: 'python3 -m venv' failed. On Debian/Ubuntu install it with: apt-get install python3-venv" >&2
        exit 1
    }
fi
py="$venv/bin/python"

# The build (and the dependencies' install) runs only when the key of its inputs (sources,
# setup.py, pyproject.toml, torch, the CUDA choice: scripts/extension_stamp.py) differs from the
# one stored after the last successful build in this environment.
stamp="$venv/.fhe_core-build-key"
key=""
if [ -f "$stamp" ] && ls fhe_core/_C*.so >/dev/null 2>&1; then
    key="$("$py" scripts/extension_stamp.py 2>/dev/null || true)"  # no torch: build
fi
if [ -n "$key" ] && [ "$key" = "$(cat "$stamp")" ]; then
    echo "==> fhe_core is up to date (sources, torch and CUDA choice unchanged since its last build)"
else
    echo "==> installing build tools and torch"
    "$py" -m pip install -q --disable-pip-version-check --upgrade pip "setuptools>=77.0.3" wheel ninja
    if ! "$py" -c "import torch" 2>/dev/null; then
        "$py" -m pip install -q --disable-pip-version-check "${FHE_TORCH_SPEC:-torch==2.13.0}"
    fi

    echo "==> building fhe_core (CPU kernels; CUDA kernels too when nvcc is present, unless FHE_CORE_CUDA=0)"
    rm -f "$stamp"  # a failed build leaves no key behind
    "$py" -m pip install -q --disable-pip-version-check --no-build-isolation -e ".[test]"
    "$py" scripts/extension_stamp.py > "$stamp"
fi

# The SRBCT profiles come from the islp package's wheel on PyPI, read as a zip (the package itself
# pulls in a large stack, so it is not installed); --islp DIR|WHEEL overrides it.
islp_wheel() {
    local dir=".cache/data"
    if ! ls "$dir"/islp-*.whl >/dev/null 2>&1; then
        echo "==> fetching the SRBCT data (islp wheel, 16 MB) into $dir" >&2
        "$py" -m pip download -q --disable-pip-version-check --no-deps -d "$dir" "islp==0.6.0" >&2
    fi
    ls "$dir"/islp-*.whl | head -1
}

case "$job" in
    demo)
        case " $* " in
            *" --islp"*) exec "$py" -m demo "$@" ;;
            *)           exec "$py" -m demo --islp "$(islp_wheel)" "$@" ;;
        esac ;;
    engine-demo) exec "$py" -m fhe_core.demo "$@" ;;
    test)     # lint first (ruff, configured in pyproject.toml), then the tests; they include a bounded run
              # of every fuzz target (tests/fuzz_targets.py; the long run: scripts/fuzz.py, docs/fuzzing.md)
              "$py" -m ruff check .
              exec "$py" -m pytest -m "not slow" "$@" ;;
    test-all) exec "$py" -m pytest "$@" ;;
    bench)    exec "$py" scripts/bench.py "$@" ;;
    *) echo "usage: bash scripts/quickstart.sh [demo|engine-demo|test|test-all|bench] [args...]" >&2; exit 2 ;;
esac
