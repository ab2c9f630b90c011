"""All settings in one model: ``SPATE_*`` environment variables, a TOML file, CLI flags.

Precedence, highest first: explicit arguments (CLI flags), environment variables
(``SPATE_DATA_DIR``, ``SPATE_SPARK__MASTER``…), the TOML file, defaults. Secrets are
``SecretStr`` and never appear in ``repr`` or logs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)


class SparkSettings(BaseModel):
    """How replicas run Spark."""

    master: str = "local[*]"
    driver_memory: str = "2g"
    shuffle_partitions: int | None = Field(default=None, ge=1)


class Settings(BaseSettings):
    """spate's settings. Later layers add sections; every field has a safe default."""

    model_config = SettingsConfigDict(
        env_prefix="SPATE_", env_nested_delimiter="__", extra="forbid", toml_file=None
    )

    data_dir: Path = Path("spate-data")
    log_level: str = "INFO"
    metrics_port: int | None = Field(default=None, ge=1, le=65535)
    spark: SparkSettings = SparkSettings()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        toml = settings_cls.model_config.get("toml_file")
        if toml is not None:
            sources.append(TomlConfigSettingsSource(settings_cls))
        return tuple(sources)


def load_settings(toml_file: Path | None = None, **overrides: Any) -> Settings:
    """Settings from (in rising precedence) defaults, ``toml_file``, environment, ``overrides``."""
    if toml_file is None:
        return Settings(**overrides)

    class _FromFile(Settings):
        model_config = SettingsConfigDict(
            env_prefix="SPATE_", env_nested_delimiter="__", extra="forbid", toml_file=toml_file
        )

    loaded = _FromFile(**overrides)
    return Settings.model_validate(loaded.model_dump())
