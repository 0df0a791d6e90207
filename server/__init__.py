"""FastAPI service and Python client: encrypted predictions and encrypted training jobs. The
server never receives, holds or accepts a secret key.

Layers: fhe_core -> data -> ml -> apps -> server (the server imports fhe_core and the apps' server
halves; only ``demo`` sits above it). No server module but ``client.py`` and its CLI
``client_cli.py`` names the secret-key API (tests/test_layers.py checks the imports and names).

Layout::

    app.py        create_app(settings): routers, error handlers, the gate, lifespan (service + worker)
    gate.py       RequestGate: token checked, body counted against its route's limit, before any handler
    settings.py   pydantic-settings Settings (FHE_SERVER_*): data dir, device, limits, insecure flag
    errors.py     ServiceError hierarchy (an FHEError); every non-2xx answer as {"error", "detail"}
    deps.py       typed dependencies: ServiceDep, TenantDep (the gate's tenant), AdminDep, read_body
    routers/      keysets, datasets, models, predictions, jobs, health (one per resource)
    service.py    Service: database, blobs, uploads, key-set cache, Params cache, worker
    db.py         SQLite (WAL, synchronous=FULL): tenants, tokens, uploads, models, jobs
    blobs.py      content-addressed files (sha256), streamed receipt with hash and limits
    uploads.py    resumable uploads in parts (key sets and datasets), verification on completion
    keycache.py   LRU of loaded key sets (and evaluators) with load-once semantics
    models.py     model registry and predictions;  apps.py  adapters to the apps' server halves
    worker.py     the job worker thread (owns the device), checkpoints, resume, cancel
    tenants.py    tokens (OS CSPRNG, stored as SHA-256, optional expiry) and tenants
    client.py     ServiceClient (httpx): register_keys, predict, upload_dataset, train, wait, ...
    client_cli.py python -m server.client;  __main__.py  python -m server (serve, tokens, models)
    embedded.py   background_server(settings): uvicorn in a thread (examples, notebooks, tests)

Data directory: ``server.sqlite3`` (metadata), ``blobs/ab/<sha256>`` (verified key sets,
datasets, models, results), ``parts/<upload>/<n>`` (verified parts of unfinished uploads),
``tmp/`` (unverified temporary files), ``jobs/<job>/checkpoint.bin`` (the running job's last
checkpoint), ``server.lock`` (held by the one server process that serves the directory).

Durability: every state change is a committed SQLite transaction; every file is written to a
temporary name, fsynced and renamed; a checkpoint is on disk before the job row counts its
iteration. After a kill -9 the next start resumes a running job from its checkpoint; an
unfinished upload keeps its verified parts and resumes (only ``tmp/`` is cleared, and only by
the serving process: administration commands clear nothing).

Scaling out (not built here; see :mod:`server.worker`): the jobs table is the queue, so several
worker processes (one per GPU) can claim jobs with a conditional UPDATE; beyond one host the
job records map onto an existing engine (Celery/RQ on Redis, or one Kubernetes Job per run)
with the data directory on shared storage, and prediction replicas behind a load balancer
share the blob store (each keeps its own key-set cache).
"""
