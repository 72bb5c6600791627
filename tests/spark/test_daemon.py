"""kafkacompat.spark.daemon: Spark's own archives keep their zip directory when import caches are invalidated."""

from __future__ import annotations

import importlib
import pathlib
import zipfile
import zipimport

from kafkacompat.spark.daemon import keep_archive_directories


def archive(path: pathlib.Path, *modules: str) -> zipimport.zipimporter:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "a") as zf:
        for name in modules:
            zf.writestr(f"{name}.py", f"NAME = {name!r}\n")
    return zipimport.zipimporter(str(path))


def test_archives_under_spark_home_are_not_reread_and_others_are(tmp_path, monkeypatch):
    monkeypatch.setattr(zipimport.zipimporter, "invalidate_caches", zipimport.zipimporter.invalidate_caches)
    spark_home = tmp_path / "spark"
    spark_zip = archive(spark_home / "python" / "lib" / "pyspark.zip", "spark_one")
    user_zip = archive(tmp_path / "user" / "deps.zip", "user_one")
    keep_archive_directories(str(spark_home))

    archive(spark_home / "python" / "lib" / "pyspark.zip", "spark_two")
    archive(tmp_path / "user" / "deps.zip", "user_two")
    importlib.invalidate_caches()  # what Spark 4.0's worker does before every task
    spark_zip.invalidate_caches()
    user_zip.invalidate_caches()

    assert spark_zip.find_spec("spark_one") is not None
    assert spark_zip.find_spec("spark_two") is None  # the directory read when it was opened is kept
    assert user_zip.find_spec("user_two") is not None  # anyone else's archive is re-read, as Python does

