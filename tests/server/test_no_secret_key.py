"""The server side never makes, loads or holds a secret key: no server module but the client's
imports a client half or names a secret-key API (checked on the source, so a new code path
cannot slip one in unnoticed)."""
from __future__ import annotations

import ast
from pathlib import Path

SERVER = Path(__file__).resolve().parents[2] / "server"
CLIENT_SIDE = {"client.py", "client_cli.py"}
FORBIDDEN_MODULES = ("apps.logreg.client", "apps.xgboost.client")
FORBIDDEN_NAMES = {"SecretKey", "gen_secret_key", "Decryptor", "decrypt", "decrypt_scores", "decrypt_weights"}


def server_modules() -> list[Path]:
    return sorted(p for p in SERVER.rglob("*.py") if p.name not in CLIENT_SIDE)


def test_server_modules_touch_no_secret_key():
    offences = []
    for path in server_modules():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(FORBIDDEN_MODULES):
                offences.append(f"{path.name}:{node.lineno} imports {node.module}")
            elif isinstance(node, ast.Import):
                offences += [f"{path.name}:{node.lineno} imports {a.name}" for a in node.names
                             if a.name.startswith(FORBIDDEN_MODULES)]
            elif isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
                offences.append(f"{path.name}:{node.lineno} names {node.id}")
            elif isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_NAMES:
                offences.append(f"{path.name}:{node.lineno} uses .{node.attr}")
            elif isinstance(node, ast.alias) and node.name in FORBIDDEN_NAMES:
                offences.append(f"{path.name}:{node.lineno} imports {node.name}")
    assert server_modules() and not offences, offences
