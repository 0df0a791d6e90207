"""Applications built on fhe_core and ml. Run them as modules from the repository root
(`python -m apps.logreg ...`) so that `apps/xgboost` never shadows the `xgboost` library.

`python -m apps {helr,srbct,idash,all}` runs the plaintext baselines and the plaintext twins
of both encrypted workloads and prints comparison tables (see `apps.cli`)."""
