"""Workers: one process per device, each owning its device, running training jobs and predictions.

The server process answers HTTP and touches no device: it checks requests, stores uploads and
rows, and hands work to workers. A worker process (started with ``spawn``: CUDA must never be
forked) builds its own :class:`server.service.Service` on its device (its own key-set and
evaluator caches, its own database connection) and runs two things:

- the job loop (:class:`server.worker.JobWorker`, a thread): it *pulls* jobs from the shared
  jobs table, so a job submitted to any host runs on whichever worker claims it first;
- predictions the server *pushes* to it, one at a time, in its main thread.

Prediction dispatch (:meth:`WorkerPool.predict`): a tenant's key set stays on the worker that
last served it (its keys and evaluator are cached there); it moves to the least-loaded worker
only when its own has ``AFFINITY_SLACK`` more requests waiting, after which both hold it.

The batch crosses the process boundary as a file in shared memory (``/dev/shm``), not through a
pipe: the request body's chunks are written into it as they arrive (where an in-process
prediction appends them to a buffer: the same one copy), and the worker parses the batch
straight from a read-only map of that file (no copy). The answer, far smaller (the scores),
comes back the same way: written once by the worker, read once here. Only the names of the two
files and the timings go through the pipe.

If a worker process dies, the requests it held fail with 503, it is started again in its slot
(same worker id: it resumes its own job at once), and a job it ran resumes from its checkpoint.
A worker also dies with the server process (``PR_SET_PDEATHSIG``, and the pipe's end-of-file),
so a kill -9 of the server leaves no worker running behind it.

``inline_worker`` (notebooks, most tests) keeps everything in the server process instead: the
job loop as a thread, predictions in the request threadpool, as a single-device server does.
"""
from __future__ import annotations

import contextlib
import ctypes
import hashlib
import itertools
import logging
import multiprocessing
import os
import pickle
import shutil
import signal
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator
from concurrent.futures import Future
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import anyio

from fhe_core.errors import FHEError

from server.errors import ServiceError, ServiceUnavailableError, status_of
from server.mapping import mapped
from server.models import Prediction
from server.settings import Settings
from server.uploads import Upload
from server.worker import JobWorker

log = logging.getLogger("server.workers")
AFFINITY_SLACK = 2  # requests a tenant's worker may have waiting beyond the least-loaded one's before it moves
AFFINITY_ENTRIES = 4096  # key sets remembered (far more than the workers' caches hold)
_PR_SET_PDEATHSIG = 1


class InlineWorker:
    """The one worker inside the server process (``inline_worker``)."""

    def __init__(self, service: Any):
        self.service = service
        self.devices = [service.settings.device]
        self.jobs = JobWorker(service, {"helr": service.training}, f"{service.settings.node}/0", housekeeping=True)
        self.jobs.start()

    async def predict(self, model: str, upload: Upload, body: AsyncIterator[bytes]) -> Prediction:
        buffer = bytearray()
        async for chunk in body:
            buffer += chunk
        return await anyio.to_thread.run_sync(self.service.models.predict, model, upload, buffer,
                                              abandon_on_cancel=True)

    def wake(self) -> None:
        self.jobs.wake()

    def stop(self) -> None:
        self.jobs.stop()


class WorkerPool:
    """The worker processes of this host, one per entry of ``settings.worker_devices()``."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.devices = settings.worker_devices()
        self.handoff = _handoff_dir(settings)
        self.workers = [WorkerProcess(settings, index, device, self.handoff)
                        for index, device in enumerate(self.devices)]
        self._affinity: OrderedDict[str, WorkerProcess] = OrderedDict()  # key set sha256 -> who served it last
        self._lock = threading.Lock()

    def _choose(self, keyset_sha256: str) -> WorkerProcess:
        with self._lock:
            if not self.workers:
                raise ServiceUnavailableError(f"host {self.settings.node} runs no worker (workers=0): "
                                              "send predictions to a host that does")
            least = min(self.workers, key=lambda w: w.load)
            chosen = self._affinity.get(keyset_sha256)
            if chosen is None or chosen.load > least.load + AFFINITY_SLACK:
                chosen = least
            self._affinity[keyset_sha256] = chosen
            self._affinity.move_to_end(keyset_sha256)
            if len(self._affinity) > AFFINITY_ENTRIES:  # the least recently used key set is long evicted anyway
                self._affinity.popitem(last=False)
            chosen.load += 1  # counted from the choice, so concurrent choices see it
            return chosen

    async def predict(self, model: str, upload: Upload, body: AsyncIterator[bytes]) -> Prediction:
        worker = self._choose(upload.sha256)
        try:
            batch = self.handoff / f"{uuid.uuid4().hex}.in"
            try:
                with open(batch, "wb") as f:  # tmpfs: each write is one memcpy into the page cache
                    async for chunk in body:
                        f.write(chunk)
            except BaseException:
                batch.unlink(missing_ok=True)
                raise
            future = worker.submit(model, upload, batch)
            return await anyio.to_thread.run_sync(future.result, abandon_on_cancel=True)
        finally:
            with self._lock:
                worker.load -= 1

    def wake(self) -> None:
        for worker in self.workers:
            worker.send(("wake",))

    def peers(self, count: int) -> list[WorkerProcess]:
        """The hook for a job that takes several workers (see :mod:`server.worker`): up to
        ``count`` workers of this host, least loaded first."""
        with self._lock:
            return sorted(self.workers, key=lambda w: w.load)[:count]

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()
        shutil.rmtree(self.handoff, ignore_errors=True)


class WorkerProcess:
    """One worker process and the thread that reads its answers (and starts it again if it dies)."""

    def __init__(self, settings: Settings, index: int, device: str, handoff: Path):
        self.settings, self.index, self.device, self.handoff = settings, index, device, handoff
        self.worker_id = f"{settings.node}/{index}"
        self.load = 0  # requests chosen for it and not yet answered (the pool's lock guards it)
        self._ids = itertools.count()
        self._pending: dict[int, tuple[Future, Path, Path]] = {}
        self._send_lock = threading.Lock()
        self._stopping = threading.Event()
        self._started = threading.Event()
        self.process: multiprocessing.process.BaseProcess | None = None
        self._conn: Connection | None = None
        self.restarts = -1
        # the thread that starts the process is its parent thread for PR_SET_PDEATHSIG: it lives
        # as long as the pool does
        self._thread = threading.Thread(target=self._supervise, name=f"fhe-worker-{index}", daemon=True)
        self._thread.start()
        self._started.wait()

    def _supervise(self) -> None:
        context = multiprocessing.get_context("spawn")
        while not self._stopping.is_set():
            parent, child = context.Pipe()
            with self._send_lock:
                self.process = context.Process(target=worker_main, name=f"fhe-worker-{self.index}", daemon=True,
                                               args=(self.settings, self.index, self.device, child, os.getpid()))
                self.process.start()
                child.close()
                self._conn = parent
                self.restarts += 1
            self._started.set()
            self._read_answers(parent)
            self.process.join(5)
            self._fail_pending(f"worker {self.worker_id} ({self.device}) exited with {self.process.exitcode}")
            if not self._stopping.is_set():
                log.warning("worker %s exited with %s; starting it again", self.worker_id, self.process.exitcode)
                time.sleep(1.0)  # a worker that dies at start must not spin

    def _read_answers(self, conn: Connection) -> None:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                return
            kind, request_id, payload = message
            with self._send_lock:
                future, batch, answer = self._pending.pop(request_id)
            batch.unlink(missing_ok=True)
            try:
                if kind == "done":
                    future.set_result(Prediction(answer.read_bytes(), payload))
                else:
                    future.set_exception(_unpickle_error(payload))
            finally:
                answer.unlink(missing_ok=True)

    def _fail_pending(self, why: str) -> None:
        with self._send_lock:
            pending, self._pending = self._pending, {}
        for future, batch, answer in pending.values():
            batch.unlink(missing_ok=True)
            answer.unlink(missing_ok=True)
            future.set_exception(ServiceUnavailableError(f"{why}; send the request again"))

    def submit(self, model: str, upload: Upload, batch: Path) -> Future:
        future: Future = Future()
        request_id = next(self._ids)
        answer = batch.with_suffix(".out")
        with self._send_lock:
            try:
                self._conn.send(("predict", request_id, model, upload, str(batch), str(answer)))
            except OSError:  # it died and is being started again
                batch.unlink(missing_ok=True)
                future.set_exception(ServiceUnavailableError(f"worker {self.worker_id} is restarting; "
                                                             "send the request again"))
                return future
            self._pending[request_id] = (future, batch, answer)  # under the lock the reader takes too
        return future

    def send(self, message: tuple) -> None:
        with self._send_lock, contextlib.suppress(OSError):
            self._conn.send(message)

    def stop(self, timeout: float = 30.0) -> None:
        """Ask the process to stop after its current iteration; kill it after ``timeout``."""
        self._stopping.set()
        self.send(("stop",))
        self.process.join(timeout)
        if self.process.is_alive():
            self.process.kill()
        self._thread.join(10)


# ---- the worker process -----------------------------------------------------------------------

def worker_main(settings: Settings, index: int, device: str, conn: Connection, server_pid: int) -> None:
    """The body of a worker process: its service on ``device``, the job loop, and predictions
    read from ``conn`` until the server says stop or goes away."""
    _die_with_parent(server_pid)
    from server.app import build_service

    if device.startswith("cuda"):
        import torch

        torch.cuda.set_device(device)  # kernels launch on the current device's stream: this one's
    settings = settings.model_copy(update={"device": device, "inline_worker": False})
    service = build_service(settings, role="worker")
    jobs = JobWorker(service, {"helr": service.training}, f"{settings.node}/{index}", housekeeping=index == 0)
    jobs.start()
    try:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):  # the server is gone
                break
            if message[0] == "stop":
                break
            if message[0] == "wake":
                jobs.wake()
                continue
            _, request_id, model, upload, batch, answer = message
            conn.send(_predict(service, model, upload, Path(batch), Path(answer), request_id))
    finally:
        jobs.stop()
        service.close()


def _predict(service: Any, model: str, upload: Upload, batch: Path, answer: Path, request_id: int) -> tuple:
    try:
        with mapped(batch) as view:
            prediction = service.models.predict(model, upload, view)
        start = time.perf_counter()
        with open(answer, "wb") as f:
            f.write(prediction.body)
        return "done", request_id, {**prediction.seconds, "handoff": time.perf_counter() - start}
    except Exception as exc:  # the request's error, answered as the server would answer it
        return "error", request_id, _pickle_error(exc)


def _pickle_error(exc: Exception) -> bytes:
    try:
        payload = pickle.dumps(exc)
        pickle.loads(payload)  # some exception types do not rebuild from their args
        return payload
    except Exception:
        status = status_of(exc) if isinstance(exc, FHEError) else 500
        return pickle.dumps((type(exc).__name__, str(exc), status))


def _unpickle_error(payload: bytes) -> BaseException:
    error = pickle.loads(payload)
    if isinstance(error, BaseException):
        return error
    name, message, status = error
    return RuntimeError(f"{name}: {message}") if status == 500 else WorkerError(f"{name}: {message}", status)


class WorkerError(ServiceError):
    """An error a worker raised whose type does not cross a process boundary, with its status."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status

    def __reduce__(self):
        return WorkerError, (str(self), self.status)


def _die_with_parent(server_pid: int) -> None:
    """SIGKILL this process when the thread that started it (the pool's supervisor) ends: a
    killed server leaves no worker holding its device and its job."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != server_pid:  # it died before the prctl took effect
        os._exit(1)


def handoff_path(settings: Settings) -> Path:
    """Where prediction batches cross to workers: tmpfs when there is one (``/dev/shm``). One
    folder per server, named after its lock file (which only it holds)."""
    shm = Path("/dev/shm")
    root = shm if shm.is_dir() and os.access(shm, os.W_OK) else settings.tmp_dir
    return root / f"fhe-handoff-{hashlib.sha256(str(settings.lock_path).encode()).hexdigest()[:16]}"


def _handoff_dir(settings: Settings) -> Path:
    """:func:`handoff_path`, emptied: what a killed predecessor left in memory goes."""
    folder = handoff_path(settings)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(mode=0o700)
    return folder
