"""The cloud engine's SQL lives in numbered files that a wheel must carry: without them no store opens.

schema.py loads storage/cloud/sql/NNN_*.sql as schema version NNN and
sql/functions.sql after any migration; these checks need no database.
"""

import fnmatch
import tomllib
from pathlib import Path

from kafkacompat.storage.cloud import schema

REPO = Path(__file__).resolve().parents[2]
SQL_DIR = REPO / "storage" / "cloud" / "sql"


def test_every_sql_file_is_package_data_of_the_wheel():
    with open(REPO / "pyproject.toml", "rb") as f:
        globs = tomllib.load(f)["tool"]["setuptools"]["package-data"]["kafkacompat.storage.cloud"]
    files = sorted(p.name for p in SQL_DIR.iterdir())
    assert "functions.sql" in files
    assert [f for f in files if not any(fnmatch.fnmatch(f"sql/{f}", g) for g in globs)] == []


def test_the_numbered_files_are_the_schema_versions_in_order():
    numbered = sorted(p.name for p in SQL_DIR.glob("[0-9][0-9][0-9]_*.sql"))
    assert [int(name[:3]) for name in numbered] == list(range(1, len(numbered) + 1))
    assert len(schema.MIGRATIONS) == len(numbered)
    assert "CREATE TABLE IF NOT EXISTS kc_meta" in schema.MIGRATIONS[0]
    assert "CREATE OR REPLACE FUNCTION kc_commit(" in schema.FUNCTIONS
