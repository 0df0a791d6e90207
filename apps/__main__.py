"""`python -m apps <subcommand>`: plaintext baselines and twins (see apps.cli)."""
from apps.cli import main

raise SystemExit(main())
