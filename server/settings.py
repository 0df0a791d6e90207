"""Service settings, read from the environment (prefix ``FHE_SERVER_``) or given explicitly.

No import-time instance: :func:`server.app.create_app` takes a :class:`Settings`, and the
command line builds one from the environment, so tests can make as many as they like.
"""
from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

MiB = 1 << 20
GiB = 1 << 30


class Settings(BaseSettings):
    """Everything the service can be told. Sizes are bytes, durations seconds."""

    model_config = SettingsConfigDict(env_prefix="FHE_SERVER_", extra="ignore")

    data_dir: Path = Field(Path("fhe-server-data"), description="SQLite database and blobs live here")
    device: str = Field("cpu", description="torch device of the worker and the key-set cache (cpu, cuda, cuda:1)")
    allow_insecure: bool = Field(False, description="accept parameter sets below 128-bit security (tests only)")

    max_part_bytes: int = Field(256 * MiB, gt=0, description="largest part of a key-set or dataset upload")
    max_upload_bytes: int = Field(16 * GiB, gt=0, description="largest whole key set or dataset")
    max_parts: int = Field(4096, gt=0, description="most parts one upload may declare")
    max_body_bytes: int = Field(512 * MiB, gt=0, description="largest request body outside part uploads")
    max_batch: int = Field(1024, gt=0, description="most ciphertexts in one prediction request")
    max_queued_jobs: int = Field(16, gt=0, description="jobs waiting (queued) across all tenants")
    max_jobs_per_tenant: int = Field(4, gt=0, description="queued or running jobs of one tenant")
    max_iterations: int = Field(10_000, gt=0, description="most iterations one training job may ask for")
    keyset_cache_size: int = Field(4, gt=0, description="key sets kept loaded on the device (LRU)")
    request_timeout_s: float = Field(600.0, gt=0, description="a prediction that takes longer is refused")
    upload_idle_timeout_s: float = Field(60.0, gt=0, description="a part whose body stalls this long is dropped")
    upload_ttl_s: float = Field(7 * 24 * 3600.0, gt=0,
                                description="an unfinished upload untouched this long is removed")
    keep_checkpoints: bool = Field(True, description="keep every iteration's encrypted state of a training job "
                                                     "(its owner may download and decrypt each)")

    @field_validator("data_dir")
    @classmethod
    def _absolute(cls, value: Path) -> Path:
        return value.expanduser().resolve()

    @property
    def db_path(self) -> Path:
        return self.data_dir / "server.sqlite3"

    @property
    def blob_dir(self) -> Path:
        return self.data_dir / "blobs"

    @property
    def parts_dir(self) -> Path:
        """Verified parts of unfinished uploads (kept across restarts)."""
        return self.data_dir / "parts"

    @property
    def tmp_dir(self) -> Path:
        """Unverified temporary files only (cleared when the server starts)."""
        return self.data_dir / "tmp"

    @property
    def jobs_dir(self) -> Path:
        return self.data_dir / "jobs"
