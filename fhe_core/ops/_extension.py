"""Loads the compiled extension fhe_core._C, whose import registers torch.ops.fhe_core.*."""
from fhe_core.errors import ExtensionNotBuiltError

_BUILD_HINT = (
    "build it from the repository root with `bash scripts/quickstart.sh test` (or "
    "`pip install --no-build-isolation -e .` in an environment that has torch)"
)

try:
    from fhe_core import _C  # noqa: F401  (imported for its operator registrations)
except ImportError as exc:  # pragma: no cover - exercised only on a broken install
    raise ExtensionNotBuiltError(f"fhe_core's C++ extension could not be loaded ({exc}); {_BUILD_HINT}") from exc
