"""Applications built on fhe_core and ml. Run them as modules from the repository root
(`python -m apps.logreg ...`) so that `apps/xgboost` never shadows the `xgboost` library.

`python -m apps {helr,srbct,idash,all}` runs the plaintext baselines and the plaintext twins
of both encrypted workloads and prints comparison tables (see `apps.cli`).

Layers: fhe_core -> data -> ml -> apps -> server. Inside apps: `apps.table` <- `apps.logreg`,
`apps.xgboost` (which do not import each other) <- `apps.cli`. The apps' client halves
(`apps.logreg.client`, `apps.xgboost.client`) are the only app code that holds a secret key."""
