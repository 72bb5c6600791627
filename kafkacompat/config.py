"""One typed configuration for the broker: defaults < file < environment < flags.

The file is TOML with the same keys as the dataclass fields; the
environment uses KAFKACOMPAT_<FIELD> (e.g. KAFKACOMPAT_PORT=9093,
KAFKACOMPAT_VOLUMES=/mnt/a,/mnt/b).
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from typing import Any


@dataclasses.dataclass(slots=True)
class BrokerConfig:
    data_dir: str = "./data"  # "memory://" keeps everything in memory
    volumes: list[str] = dataclasses.field(default_factory=list)  # extra data dirs
    host: str = "0.0.0.0"
    port: int = 9092
    advertised_host: str | None = None  # defaults to host, or localhost for 0.0.0.0
    advertised_port: int | None = None
    node_id: int = 1
    cluster_id: str = "kafkacompat-cluster"
    default_stream: str = "/default"
    max_frame_bytes: int = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes
    max_connections: int = 10_000
    producer_id_expiration_ms: int = 24 * 3600 * 1000  # Kafka's producer.id.expiration.ms
    auto_create_topics: bool = True  # Kafka's auto.create.topics.enable; streams can refuse too
    retention_check_ms: int = 60_000  # how often expired partitionlets are deleted (log.retention.check.interval.ms)
    # log compaction, named after Kafka's log.cleaner.* broker settings
    log_cleaner_enable: bool = True
    log_cleaner_dedupe_buffer_size: int = 128 * 1024 * 1024  # bytes of key -> offset map per cleaning
    log_cleaner_backoff_ms: int = 15_000  # pause between cleaner passes
    # consumer groups, named after Kafka's group.* and offsets.* broker settings
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_max_size: int = 2**31 - 1
    offset_metadata_max_bytes: int = 4096
    offsets_retention_minutes: int = 7 * 24 * 60
    offsets_retention_check_interval_ms: int = 600_000
    log_level: str = "INFO"

    @property
    def store_url(self) -> str:
        return self.data_dir

    def advertised(self) -> tuple[str, int]:
        host = self.advertised_host or (
            "localhost" if self.host in ("0.0.0.0", "::", "") else self.host
        )
        return host, self.advertised_port or self.port


class ConfigError(ValueError):
    pass


def _coerce(field: dataclasses.Field[Any], raw: Any) -> Any:
    kind = field.type
    if isinstance(raw, str):
        if kind == "int" or kind == "int | None":
            try:
                return int(raw)
            except ValueError:
                raise ConfigError(f"{field.name} must be an integer, got {raw!r}") from None
        if kind == "bool":
            if raw.lower() in ("1", "true", "yes", "on"):
                return True
            if raw.lower() in ("0", "false", "no", "off"):
                return False
            raise ConfigError(f"{field.name} must be true or false, got {raw!r}")
        if kind == "list[str]":
            return [part for part in raw.split(",") if part]
    return raw


def load_config(
    path: str | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> BrokerConfig:
    """Merge defaults, a TOML file, KAFKACOMPAT_* variables and explicit overrides."""
    fields = {f.name: f for f in dataclasses.fields(BrokerConfig)}
    values: dict[str, Any] = {}
    if path:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
        for key, value in data.items():
            name = key.replace("-", "_")
            if name not in fields:
                raise ConfigError(f"unknown setting {key!r} in {path}")
            values[name] = _coerce(fields[name], value)
    env = os.environ if environ is None else environ
    for name, field in fields.items():
        raw = env.get(f"KAFKACOMPAT_{name.upper()}")
        if raw is not None:
            values[name] = _coerce(field, raw)
    for name, value in (overrides or {}).items():
        if value is not None:
            values[name] = value
    config = BrokerConfig(**values)
    if config.retention_check_ms < 1:
        raise ConfigError(f"retention_check_ms must be at least 1, got {config.retention_check_ms}")
    if config.log_cleaner_backoff_ms < 1:
        raise ConfigError(f"log_cleaner_backoff_ms must be at least 1, got {config.log_cleaner_backoff_ms}")
    if config.log_cleaner_dedupe_buffer_size < 1024:
        raise ConfigError("log_cleaner_dedupe_buffer_size must be at least 1024 bytes, "
                          f"got {config.log_cleaner_dedupe_buffer_size}")
    return config
