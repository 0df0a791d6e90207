#!/usr/bin/env bash
# Download into .whl/ the newest Python 3.12 manylinux x86-64 wheels of every runtime and test
# dependency (pyproject.toml: the dependencies and the `test` and `server` extras) and of what they
# need, for `bash scripts/device.sh --only "py312"` on the GPU machine: its python3 is 3.12 and
# resolves nothing itself. torch is left out: the device's own CUDA build is used (never carry it).
#
#   bash scripts/device_wheels.sh     # then carry .whl (git-ignored; the device tool takes 64 MiB)
set -euo pipefail
cd "$(dirname "$0")/.."
py="${PYTHON:-python3}"

# the requirement strings, without torch, ruff and the project's own extra (`fhe-ml[server]`)
mapfile -t requirements < <("$py" - <<'PY'
import re
try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
extras = project["optional-dependencies"]
for spec in project["dependencies"] + extras["test"] + extras["server"]:
    name = re.match(r"[A-Za-z0-9_.-]+", spec).group(0).lower()
    if name not in ("torch", "fhe-ml", "ruff"):  # ruff: the linter, no test imports it
        print(spec)
PY
)

rm -rf .whl && mkdir -p .whl
platforms=()
for tag in manylinux_2_28 manylinux_2_27 manylinux_2_24 manylinux_2_17 manylinux2014 manylinux1; do
    platforms+=(--platform "${tag}_x86_64")
done
# pip's resolver picks the newest release of each that fits the ranges, and whatever they need;
# PIP_CONSTRAINT= lifts a local pin file, which must not hold a package back
PIP_CONSTRAINT= "$py" -m pip download -q --disable-pip-version-check --only-binary=:all: --python-version 3.12 \
    --implementation cp "${platforms[@]}" -d .whl "${requirements[@]}"
if ls .whl | grep -qiE '^(torch|nvidia_|triton)-'; then
    echo "error: a dependency pulled torch or its CUDA libraries into .whl" >&2; exit 1
fi
# The device tool carries at most 64 MiB: the large packages that only a dependency needs and the
# device's image already holds (scipy, pandas, pillow, matplotlib's font and layout helpers,
# pygments) stay behind; every direct dependency travels in its newest release.
for name in scipy pandas pillow fonttools kiwisolver contourpy pygments; do
    rm -f .whl/"$name"-*.whl
done
ls .whl | sed 's/-py3.*\|-cp3.*//' | tr '\n' ' '; echo
du -sh .whl
