"""Applications built on fhe_core and ml. Run them as modules from the repository root
(`python -m apps.logreg ...`) so that `apps/xgboost` never shadows the `xgboost` library."""
