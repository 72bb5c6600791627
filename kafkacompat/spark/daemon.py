"""Spark's Python daemon for sessions that read with `format("kafkacompat")`.

    SparkSession.builder.config("spark.python.daemon.module", "kafkacompat.spark.daemon")

Spark forks every Python worker (tasks, and the planning workers of Python
data sources) from a daemon process; this one is pyspark.daemon with two
changes, both about time a task spends before it reads a byte:

- It imports what a kafkacompat task needs (pyarrow, the record decoder,
  the store reader) before it forks, so a new worker starts with them
  loaded rather than importing them in its first task.
- Before Python 3.12, `importlib.invalidate_caches()` makes zipimport
  re-read the whole directory of every zip archive on sys.path (CPython
  gh-103200), and Spark 4.0's worker calls it at the start of every task
  (SPARK-54744 drops the call in later Spark). Spark puts its own
  pyspark.zip and its spark-core jar (thousands of entries) there: 0.2 to
  1 s of each task on a busy 2-core machine, most of a 256 MiB task's
  Python time. Spark's archives under SPARK_HOME do not change while it
  runs, so their directories are kept; any other archive (a user's
  --py-files) is re-read as before.
"""

from __future__ import annotations

import os
import runpy
import sys
import zipimport


def keep_archive_directories(root: str) -> None:
    """Importers of zip archives under `root` keep their directory when import caches are invalidated."""
    reread = zipimport.zipimporter.invalidate_caches
    prefix = os.path.join(os.path.abspath(root), "")

    def invalidate_caches(self: zipimport.zipimporter) -> None:
        if not os.path.abspath(self.archive).startswith(prefix):
            reread(self)

    zipimport.zipimporter.invalidate_caches = invalidate_caches  # type: ignore[method-assign]


def main() -> None:
    from . import scan  # noqa: F401  (pyarrow, record decoding, the store reader: loaded once, before forking)

    spark_home = os.environ.get("SPARK_HOME")
    if spark_home and sys.version_info < (3, 12):
        keep_archive_directories(spark_home)
    runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
