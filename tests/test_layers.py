"""The one-way layer order, read from the import statements of every module (ast, nothing imported).

Inside fhe_core: errors <- ops <- ring <- params <- rlwe <- ckks, bfv <- serialize, distributed (<- the
engine demo); then data <- ml <- apps (the shared table helper, then logreg and xgboost, then the apps
CLI) <- server <- demo. A module may import its own unit and any unit of a lower layer; a unit of
its own layer (ckks and bfv, logreg and xgboost) or of a higher one is a violation, whether the
import is at the top of the file, inside a function or under TYPE_CHECKING. Only fhe_core.ops
loads the compiled extension fhe_core._C; no package imports scripts/ or tests/.

Private names: no module imports another module's ``_name`` or reads ``module._name`` through an imported
module (the unchecked steps and engine internals that other modules call have public names, documented as taking
inputs already checked: fhe_core.rlwe.switching, Evaluator.linear_combination, ...); a private module (``_C``,
``_extension``, ``_uploads``) is imported only inside its own package. The same holds for scripts/.

Secret keys: no server module but the Python client (server/client.py and its CLI) names the
secret-key API (SecretKey, gen_secret_key, Decryptor, decrypt*, the apps' client halves).
docs/ARCHITECTURE.md and the package docstrings state the same order.
"""
from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("fhe_core", "data", "ml", "apps", "server", "demo")

# unit (a module prefix) -> layer; a module belongs to the longest unit that prefixes its name
LAYERS = {
    "fhe_core.errors": 0,
    "fhe_core": 1,              # the package itself (its __init__ re-exports the errors)
    "fhe_core.ops": 2,
    "fhe_core._C": 2,           # the compiled extension
    "fhe_core.ring": 3,
    "fhe_core.params": 4,
    "fhe_core.rlwe": 5,
    "fhe_core.ckks": 6,
    "fhe_core.bfv": 6,
    "fhe_core.serialize": 7,
    "fhe_core.distributed": 7,  # collectives on ciphertexts (beside serialize: neither imports the other)
    "fhe_core.demo": 8,         # the engine demo (python -m fhe_core.demo)
    "data": 10,
    "ml": 11,
    "apps.table": 12,           # the table formatter both apps print with
    "apps.logreg": 13,
    "apps.xgboost": 13,
    "apps": 14,                 # the apps package and its CLI (python -m apps)
    "server": 15,
    "demo": 16,
}
EXTENSION, EXTENSION_CALLER = "fhe_core._C", "fhe_core.ops"
NEVER_IMPORTED = ("scripts", "tests", "fuzz_targets", "fhe_reference", "conftest")

SECRET_KEY_API = re.compile(r"^(SecretKey|SecretKeyBootstrapper|gen_secret_key|check_secret_key|secret_over_q|"
                            r"encode_secret_key|decode_secret_key|Decryptor|decrypt\w*|HELRClient|ForestClient)$")
CLIENT_HALVES = ("apps.logreg.client", "apps.xgboost.client")
SECRET_KEY_HOLDERS = ("server.client", "server.client_cli")


# ---- reading the tree --------------------------------------------------------------------------------

def modules(root: Path) -> dict[str, Path]:
    """Dotted name -> file of every module of the packages under ``root``."""
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(name: str, path: Path, known: set[str]) -> Iterator[tuple[str, int]]:
    """(imported module, line) for every import in the file, anywhere in it. ``from X import Y``
    counts as importing X.Y when that is a module, else X; relative imports are resolved."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")[:len(name.split(".")) - node.level + is_package]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                child = f"{module}.{alias.name}"
                yield (child if child in known or child == EXTENSION else module), node.lineno


def unit_of(module: str) -> str | None:
    """The longest unit that prefixes ``module`` (None: outside the layered packages)."""
    matches = [u for u in LAYERS if module == u or module.startswith(u + ".")]
    return max(matches, key=len) if matches else None


# ---- the checks --------------------------------------------------------------------------------------

def layer_violations(root: Path) -> list[str]:
    """Every import that goes up (or sideways between two units of one layer), loads the
    extension outside fhe_core.ops, or reaches scripts/tests; as "file:line: message"."""
    found = modules(root)
    known = set(found)
    out = []
    for name, path in found.items():
        here = unit_of(name)
        for target, line in imports(name, path, known):
            where = f"{path.relative_to(root)}:{line}: {name} imports {target}"
            if target.split(".")[0] in NEVER_IMPORTED:
                out.append(f"{where} (scripts and tests are never imported by the packages)")
                continue
            there = unit_of(target)
            if there is None or there == here:
                continue
            if there == EXTENSION:
                if here != EXTENSION_CALLER:
                    out.append(f"{where} (only {EXTENSION_CALLER} loads the extension)")
            elif LAYERS[there] > LAYERS[here]:
                out.append(f"{where} (layer {there} is above {here})")
            elif LAYERS[there] == LAYERS[here]:
                out.append(f"{where} ({there} and {here} are siblings in one layer)")
    return sorted(out)


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _scripts(root: Path) -> dict[str, Path]:
    return {f"scripts.{path.stem}": path for path in sorted((root / "scripts").glob("*.py"))}


def private_name_violations(root: Path) -> list[str]:
    """Every ``from M import _x`` of another module M of the packages (or of scripts/), every ``m._x`` read through
    a name bound to such a module, and every private module imported from outside its package; as
    "file:line: message". Modules outside the packages (numpy, torch) are not judged."""
    found = modules(root)
    known = set(found) | {EXTENSION}
    out = []
    for name, path in {**found, **_scripts(root)}.items():
        is_package = path.name == "__init__.py"
        bound = {}  # local name -> the project module it is bound to
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in known:
                        bound[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else \
                            alias.name.split(".")[0]
                continue
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = name.split(".")[:len(name.split(".")) - node.level + is_package]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module not in known:
                continue
            for alias in node.names:
                child = f"{module}.{alias.name}"
                if child in known:
                    bound[alias.asname or alias.name] = child
                    if _private(alias.name) and name != module and not name.startswith(module + "."):
                        out.append(f"{path.relative_to(root)}:{node.lineno}: {name} imports the private module "
                                   f"{child} from outside its package")
                elif _private(alias.name):
                    out.append(f"{path.relative_to(root)}:{node.lineno}: {name} imports {alias.name} from {module}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _private(node.attr):
                target = _dotted(node.value, bound)
                if target in known and f"{target}.{node.attr}" not in known:
                    out.append(f"{path.relative_to(root)}:{node.lineno}: {name} reads {target}.{node.attr}")
    return sorted(out)


def _dotted(node: ast.expr, bound: dict[str, str]) -> str | None:
    """The module a name or attribute chain names through the module's import bindings (None: not a module)."""
    if isinstance(node, ast.Name):
        return bound.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value, bound)
        return None if base is None else f"{base}.{node.attr}"
    return None


def secret_key_violations(root: Path) -> list[str]:
    """Every server module (but the client's) that names the secret-key API: an identifier, an
    attribute, an imported name or a definition. Strings and comments do not count."""
    found = modules(root)
    out = []
    for name, path in found.items():
        if unit_of(name) != "server" or name in SECRET_KEY_HOLDERS:
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Name):
                names = [node.id]
            elif isinstance(node, ast.Attribute):
                names = [node.attr]
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names = [node.name]
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
            for n in names:
                if SECRET_KEY_API.match(n) or any(n == c or n.startswith(c + ".") for c in CLIENT_HALVES):
                    out.append(f"{path.relative_to(root)}:{node.lineno}: {name} names {n}")
    return sorted(set(out))


# ---- the tree as it is ---------------------------------------------------------------------------------

def test_every_import_keeps_the_layer_order():
    violations = layer_violations(ROOT)
    assert not violations, "imports against the layer order:\n" + "\n".join(violations)


def test_no_module_reaches_another_modules_private_names():
    violations = private_name_violations(ROOT)
    assert not violations, "private names used across modules:\n" + "\n".join(violations)


def test_only_the_client_names_the_secret_key_api_in_server():
    violations = secret_key_violations(ROOT)
    assert not violations, "server modules that touch secret keys:\n" + "\n".join(violations)


def test_the_checker_sees_the_real_imports():
    """The tree is read: fhe_core.serialize imports rlwe and ckks, the server imports the apps."""
    found = modules(ROOT)
    edges = {(unit_of(n), unit_of(t)) for n, p in found.items() for t, _ in imports(n, p, set(found))}
    assert {("fhe_core.serialize", "fhe_core.rlwe"), ("fhe_core.serialize", "fhe_core.ckks"),
            ("server", "apps.logreg"), ("fhe_core.ops", "fhe_core._C"), ("apps.logreg", "apps.table")} <= edges
    assert all(unit_of(name) is not None for name in found)


@pytest.mark.parametrize("package", ["fhe_core", "ml", "apps", "server"])
def test_package_docstrings_state_the_order(package):
    doc = ast.get_docstring(ast.parse((ROOT / package / "__init__.py").read_text())) or ""
    assert "fhe_core -> data -> ml -> apps -> server" in " ".join(doc.split()), package
    if package == "fhe_core":
        assert "errors -> ops -> ring -> params -> rlwe -> ckks, bfv -> serialize" in " ".join(doc.split())


@pytest.mark.parametrize("subpackage", ["ops", "ring", "params", "rlwe", "ckks", "bfv", "serialize"])
def test_fhe_core_subpackage_docstrings_state_their_layer(subpackage):
    doc = ast.get_docstring(ast.parse((ROOT / "fhe_core" / subpackage / "__init__.py").read_text())) or ""
    assert "\nLayer: " in doc, subpackage


# ---- the checker on planted violations --------------------------------------------------------------------

def _plant(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for package in PACKAGES:                       # every folder a package
        for folder in [root / package, *(p for p in (root / package).rglob("*") if p.is_dir())]:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "__init__.py").touch()


CLEAN = {
    "fhe_core/ops/__init__.py": "from fhe_core import _C\nfrom fhe_core.errors import FHEError\n",
    "fhe_core/ring/basis.py": "from fhe_core import ops\n",
    "fhe_core/rlwe/keys.py": "from ..params import presets\nfrom . import sampling\n",
    "fhe_core/rlwe/sampling.py": "",
    "fhe_core/params/presets.py": "import fhe_core.ring.basis\n",
    "fhe_core/serialize/api.py": "from fhe_core.ckks import encoder\nfrom fhe_core.bfv import context\n",
    "fhe_core/ckks/encoder.py": "", "fhe_core/bfv/context.py": "",
    "ml/packing.py": "from fhe_core.errors import FHEError\nimport numpy\n",
    "apps/table.py": "", "apps/logreg/cli.py": "from ..table import format_table\nfrom data import mnist\n",
    "data/mnist.py": "",
    "server/apps.py": "from apps.logreg import cli\nfrom fhe_core.serialize import Kind\nx = Kind.SECRET_KEY\n",
    "server/client.py": "from fhe_core.rlwe import SecretKey, gen_secret_key\n"
                        "from apps.logreg.client import HELRClient\n",
    "demo/__main__.py": "import server.client\n",
}


def test_a_clean_tree_passes(tmp_path):
    _plant(tmp_path, CLEAN)
    assert layer_violations(tmp_path) == []
    assert secret_key_violations(tmp_path) == []
    assert private_name_violations(tmp_path) == []


def test_planted_layer_violations_are_found(tmp_path):
    _plant(tmp_path, {**CLEAN,
                      "fhe_core/ring/primes.py": "from fhe_core.rlwe import keys\n",             # upward
                      "fhe_core/ckks/evaluator.py": "from fhe_core.bfv import context\n",       # sideways
                      "fhe_core/params/security.py": "def f():\n    from ml import packing\n",  # lazy, upward
                      "fhe_core/rlwe/galois.py": "from fhe_core import _C\n",                   # the extension
                      "fhe_core/rlwe/keyswitch.py": "from ..serialize import api\n",            # relative
                      "data/idx.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import ml.packing\n",
                      "apps/xgboost/plan.py": "from ..logreg import cli\n",                     # sibling app
                      "ml/plots.py": "import scripts.bench\n"})
    found = layer_violations(tmp_path)
    assert [line.split(":")[0] for line in found] == sorted([
        "apps/xgboost/plan.py", "data/idx.py", "fhe_core/ckks/evaluator.py", "fhe_core/params/security.py",
        "fhe_core/ring/primes.py", "fhe_core/rlwe/galois.py", "fhe_core/rlwe/keyswitch.py", "ml/plots.py"])
    assert any("siblings" in line and "fhe_core.bfv" in line for line in found)
    assert any("only fhe_core.ops loads the extension" in line for line in found)
    assert any("imports fhe_core.serialize.api" in line for line in found)


def test_planted_secret_key_use_in_the_server_is_found(tmp_path):
    _plant(tmp_path, {**CLEAN,
                      "server/routers/keys.py": "from fhe_core.rlwe import gen_secret_key\n",
                      "server/worker.py": "def run(dec):\n    return dec.decrypt_scores(1)\n",
                      "server/service.py": "import apps.xgboost.client\n",
                      "server/jobs.py": "from fhe_core import ckks\nd = ckks.Decryptor\n"})
    found = secret_key_violations(tmp_path)
    assert sorted({line.split(":")[0] for line in found}) == [
        "server/jobs.py", "server/routers/keys.py", "server/service.py", "server/worker.py"]


def test_planted_private_name_uses_are_found(tmp_path):
    _plant(tmp_path, {**CLEAN,
                      "fhe_core/ops/_extension.py": "from fhe_core import _C\n",          # its own package: fine
                      "fhe_core/ops/__init__.py": "from fhe_core.ops import _extension\n",
                      "fhe_core/rlwe/keyswitch.py": "def _step():\n    pass\n_x = 1\n",
                      "fhe_core/rlwe/switching.py": "from ._helpers import y\nfrom .keyswitch import __doc__\n",
                      "fhe_core/rlwe/_helpers.py": "y = 1\n",
                      "fhe_core/ckks/lintrans.py": "from fhe_core.rlwe.keyswitch import _step\n",  # a private name
                      "fhe_core/ckks/evaluator.py": "from fhe_core.rlwe import keyswitch\nkeyswitch._x\n",
                      "fhe_core/bfv/evaluator.py": "import fhe_core.rlwe.keyswitch\nfhe_core.rlwe.keyswitch._step()\n",
                      "fhe_core/ckks/polynomial.py": "import fhe_core.rlwe.keyswitch as ks\nks._x\n",
                      "ml/packing.py": "from fhe_core.rlwe import _helpers\nimport numpy\nnumpy._x\n",
                      "server/jobs.py": "from fhe_core.ops import _extension\n",
                      "scripts/bench.py": "from fhe_core.rlwe import keyswitch\nkeyswitch._step = None\n"})
    found = private_name_violations(tmp_path)
    assert [line.split(":")[0] for line in found] == sorted([
        "fhe_core/bfv/evaluator.py", "fhe_core/ckks/evaluator.py", "fhe_core/ckks/lintrans.py",
        "fhe_core/ckks/polynomial.py", "ml/packing.py", "scripts/bench.py", "server/jobs.py"])
    assert any("imports _step from fhe_core.rlwe.keyswitch" in line for line in found)
    assert any("private module fhe_core.ops._extension from outside its package" in line for line in found)
