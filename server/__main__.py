"""Command line of the service (administration happens here, on the server's own machine)::

    python -m server [serve] [--host 127.0.0.1 --port 8000 --data-dir DIR --device cuda]
    python -m server create-token TENANT [--admin] [--ttl SECONDS]   prints a new bearer token once
    python -m server revoke-tokens TENANT
    python -m server add-model NAME --model forest.bin --params params.json|--preset NAME [--replace]

Settings not given as flags come from the environment (``FHE_SERVER_DATA_DIR``,
``FHE_SERVER_DEVICE``, ``FHE_SERVER_ALLOW_INSECURE``, ...; see :class:`server.settings.Settings`).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from fhe_core.errors import FHEError


def _settings(args: argparse.Namespace):
    from server.settings import Settings

    overrides = {k: v for k, v in {"data_dir": args.data_dir, "device": args.device}.items() if v is not None}
    if args.allow_insecure:
        overrides["allow_insecure"] = True
    return Settings(**overrides)


def _serve(args: argparse.Namespace) -> None:
    import uvicorn

    from server.app import create_app

    app = create_app(_settings(args))
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level,
                timeout_keep_alive=30, limit_concurrency=args.limit_concurrency)


def _create_token(args: argparse.Namespace) -> None:
    from server.db import Database
    from server.tenants import create_token

    settings = _settings(args)
    print(create_token(Database(settings.db_path), args.tenant, admin=args.admin, ttl_s=args.ttl))


def _revoke(args: argparse.Namespace) -> None:
    from server.db import Database
    from server.tenants import revoke_tokens

    settings = _settings(args)
    print(f"revoked {revoke_tokens(Database(settings.db_path), args.tenant)} token(s)")


def _add_model(args: argparse.Namespace) -> None:
    from fhe_core.params import preset_literal

    from server.app import build_service

    if (args.params is None) == (args.preset is None):
        raise SystemExit("add-model: give exactly one of --params FILE and --preset NAME")
    literal = json.loads(Path(args.params).read_text()) if args.params else preset_literal(args.preset).to_dict()
    service = build_service(_settings(args), start_worker=False)
    try:
        row = service.models.add(args.name, args.kind, literal, Path(args.model).read_bytes(), width=args.width,
                                 replace=args.replace)
    finally:
        service.close()
    print(f"model {row['name']!r} ({row['kind']}) for params_id {row['params_id']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m server", description=__doc__.splitlines()[0])
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--data-dir", type=Path, default=None,
                        help="default: $FHE_SERVER_DATA_DIR or ./fhe-server-data")
    common.add_argument("--device", default=None, help="torch device (default: $FHE_SERVER_DEVICE or cpu)")
    common.add_argument("--allow-insecure", action="store_true", help="accept tiny insecure parameters (tests)")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", parents=[common], help="run the HTTP service (uvicorn)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--log-level", default="info")
    serve.add_argument("--limit-concurrency", type=int, default=None, help="uvicorn: answer 503 above this many")
    serve.set_defaults(run=_serve)

    token = sub.add_parser("create-token", parents=[common], help="print a new bearer token for a tenant")
    token.add_argument("tenant")
    token.add_argument("--admin", action="store_true", help="the tenant may add and remove models")
    token.add_argument("--ttl", type=float, default=None, metavar="SECONDS",
                       help="the token expires this many seconds from now (default: never)")
    token.set_defaults(run=_create_token)

    revoke = sub.add_parser("revoke-tokens", parents=[common], help="delete every token of a tenant")
    revoke.add_argument("tenant")
    revoke.set_defaults(run=_revoke)

    model = sub.add_parser("add-model", parents=[common], help="register a model file (HEForest.to_bytes())")
    model.add_argument("name")
    model.add_argument("--model", required=True, help="the model file")
    model.add_argument("--kind", default="xgboost", choices=("xgboost", "idash"))
    model.add_argument("--width", type=int, help="most samples per prediction batch (default: the plan's)")
    model.add_argument("--params", help="a ParamsLiteral JSON file")
    model.add_argument("--preset", help="a preset name (fhe_core.params.presets)")
    model.add_argument("--replace", action="store_true")
    model.set_defaults(run=_add_model)

    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
        argv.insert(0, "serve")  # `python -m server [options]` serves
    args = parser.parse_args(argv)
    try:
        args.run(args)
    except FHEError as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
