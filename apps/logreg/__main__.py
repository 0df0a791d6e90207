"""`python -m apps.logreg train ...`: encrypted HELR training (see apps.logreg.cli)."""
from apps.logreg.cli import main

raise SystemExit(main())
