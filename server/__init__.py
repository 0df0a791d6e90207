"""FastAPI service and Python client: encrypted predictions and encrypted training jobs. The
server never receives, holds or accepts a secret key.

Layers: fhe_core -> data -> ml -> apps -> server (the server imports fhe_core and the apps' server
halves; only ``demo`` sits above it). No server module but ``client.py`` and its CLI
``client_cli.py`` names the secret-key API (tests/test_layers.py checks the imports and names).

Layout::

    app.py        create_app(settings), build_service(role): routers, error handlers, the gate, lifespan
    gate.py       RequestGate: token checked, body counted against its route's limit, before any handler
    settings.py   pydantic-settings Settings (FHE_SERVER_*): data dir, store URL, workers, node, limits
    errors.py     ServiceError hierarchy (an FHEError); every non-2xx answer as {"error", "detail"}
    deps.py       typed dependencies: ServiceDep, TenantDep (the gate's tenant), AdminDep
    routers/      keysets, datasets, models, predictions, jobs, health (one per resource)
    service.py    Service: database, blobs, uploads, key-set cache, Params cache, workers
    db.py         the store on SQLAlchemy Core: SQLite (embedded) or PostgreSQL (several hosts), one write lock
    blobs.py      content-addressed files (sha256), streamed receipt with hash and limits
    uploads.py    resumable uploads in parts (key sets and datasets), verification on completion
    keycache.py   LRU of loaded key sets (and evaluators) with load-once semantics
    models.py     model registry and predictions;  apps.py  adapters to the apps' server halves
    workers.py    WorkerPool: one process per device (spawn), prediction dispatch with key affinity
    worker.py     a worker's job loop: claims with leases and fencing, checkpoints, resume, cancel
    tenants.py    tokens (OS CSPRNG, stored as SHA-256, optional expiry) and tenants
    client.py     ServiceClient (httpx): register_keys, predict, upload_dataset, train, wait, ...
    client_cli.py python -m server.client;  __main__.py  python -m server (serve, tokens, models)
    embedded.py   background_server(settings): uvicorn in a thread (examples, notebooks, tests)

Data directory: ``server.sqlite3`` (metadata, without a PostgreSQL store), ``blobs/ab/<sha256>``
(verified key sets, datasets, models, results), ``parts/<upload>/<n>`` (verified parts of
unfinished uploads), ``tmp/`` (unverified temporary files; ``tmp/<node>/`` per host when shared),
``jobs/<job>/checkpoint.bin`` (the running job's last checkpoint), ``server.lock`` (held by the
one server process that serves the directory; ``server-<node>.lock`` per host when shared).

Durability: every state change is a committed transaction; every file is written to a
temporary name, fsynced and renamed; a checkpoint is on disk before the job row counts its
iteration. After a kill -9 the next start resumes a running job from its checkpoint; an
unfinished upload keeps its verified parts and resumes (only ``tmp/`` is cleared, and only by
the serving process: administration commands clear nothing).

Scaling out (docs/scaling.md has the commands and the numbers):

- **Processes.** The server process answers HTTP and touches no device; it checks requests
  (parameters, key sets and models verified on the CPU), writes rows and files, and hands the
  device work to workers. :class:`server.workers.WorkerPool` starts one worker process per
  device (``spawn``, never ``fork``: CUDA), ``--workers N`` on the CPU; each builds its own
  Service on its device with its own key-set and evaluator caches and database connection.
  ``inline_worker`` (embedded servers, most tests) keeps the one worker in the server process.
- **Jobs are pulled.** Each worker's job loop claims from the jobs table (PostgreSQL: ``SELECT
  ... FOR UPDATE SKIP LOCKED``; SQLite: the conditional UPDATE under its one write lock) and holds
  the job by a lease it renews; a job whose worker or host dies is resumed from its checkpoint by
  the next claimer once the lease runs out (at once by the same node and slot after a restart),
  and every write of a holder is fenced on (worker, attempt). A job that keeps killing its
  workers fails after ``MAX_ATTEMPTS`` with that reason. See :mod:`server.worker`.
- **Predictions are pushed.** The request's body is written as it arrives into a file in
  ``/dev/shm``; the chosen worker (the one holding the tenant's key set, unless it is
  ``AFFINITY_SLACK`` requests busier than the least-loaded) parses the batch from a read-only map
  of it and writes the answer beside it: no extra copy of the batch over an in-process
  prediction, one write and one read of the (smaller) answer. See :mod:`server.workers`.
- **Hosts.** With ``database_url`` (PostgreSQL) several hosts, each with its own ``node`` name,
  serve one data directory on shared storage (blobs, parts, checkpoints): any host takes any
  request, any worker any job. Write transactions take one advisory lock, the PostgreSQL twin of
  SQLite's single writer, so every check-then-write of the uploads and jobs keeps its meaning.
- **Several workers for one job** (data-parallel HELR on torch.distributed): the hook is
  :meth:`WorkerPool.peers`; the claiming worker would be rank 0 and start the others as ranks of
  one process group on its host. Not built: each job runs on one worker today.
"""
