"""The administration command line: tokens are printed once and stored hashed; revoked tokens
stop working; an unknown tenant name format is refused."""
from __future__ import annotations

import pytest

from server.__main__ import main
from server.db import Database
from server.errors import AuthenticationError
from server.tenants import hash_token, tenant_for_token


def test_create_and_revoke_tokens(tmp_path, capsys):
    data = ["--data-dir", str(tmp_path)]
    assert main(["create-token", "carol", *data]) == 0
    token = capsys.readouterr().out.strip()
    assert main(["create-token", "root", "--admin", *data]) == 0
    admin_token = capsys.readouterr().out.strip()
    db = Database(tmp_path / "server.sqlite3")
    try:
        carol = tenant_for_token(db, token)
        assert (carol.name, carol.is_admin) == ("carol", False)
        assert tenant_for_token(db, admin_token).is_admin
        stored = [r["token_hash"] for r in db.query("SELECT token_hash FROM tokens")]
        assert hash_token(token) in stored and token not in stored  # only the hash is kept
        assert main(["revoke-tokens", "carol", *data]) == 0
        with pytest.raises(AuthenticationError):
            tenant_for_token(db, token)
        assert tenant_for_token(db, admin_token).name == "root"
    finally:
        db.close()
    assert main(["create-token", "no spaces allowed", *data]) == 1
    assert "tenant name" in capsys.readouterr().err
