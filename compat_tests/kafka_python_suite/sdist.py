"""The test tree of kafka-python's PyPI source distribution, for the installed version.

The wheel has no tests; the sdist ships test/ (with test/integration). It
is downloaded once with pip into a cache directory and extracted afresh
into a temporary directory for each run, never into the repository.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import tarfile
from importlib import metadata

DISTRIBUTION = "kafka-python"
DOWNLOAD_TIMEOUT = 300  # seconds; pip retries on its own within this


def cache_dir() -> pathlib.Path:
    """Where downloaded sdists are kept: $KAFKACOMPAT_CACHE_DIR, else $XDG_CACHE_HOME or ~/.cache, /kafkacompat."""
    explicit = os.environ.get("KAFKACOMPAT_CACHE_DIR")
    if explicit:
        return pathlib.Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache"
    return pathlib.Path(base) / "kafkacompat"


def installed_version() -> str:
    return metadata.version(DISTRIBUTION)


def sdist_archive(version: str) -> pathlib.Path:
    """The sdist of kafka-python `version`, downloaded from PyPI on first use."""
    folder = cache_dir() / "sdists"
    archive = folder / f"kafka_python-{version}.tar.gz"
    if archive.is_file():
        return archive
    folder.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
               "--no-deps", "--no-binary", ":all:", "--dest", str(folder),
               f"{DISTRIBUTION}=={version}"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT, check=False)
    if done.returncode != 0 or not archive.is_file():
        raise RuntimeError(f"pip could not download the {DISTRIBUTION} {version} sdist: "
                           f"{(done.stderr or done.stdout).strip()[-2000:]}")
    return archive


def extract_tests(archive: pathlib.Path, dest: pathlib.Path) -> pathlib.Path:
    """Extract the archive's test/ tree into `dest`; returns `dest`, the directory that holds test/.

    The sdist leaves out test/__init__.py (its MANIFEST.in does not list it),
    without which `import test.testutil` finds Python's own `test` package; an
    empty one restores the package the suite's imports name.
    """
    with tarfile.open(archive) as tar:
        members = []
        for member in tar.getmembers():
            _, _, inner = member.name.partition("/")
            if (inner == "test" or inner.startswith("test/")) and (member.isfile() or member.isdir()):
                member.name = inner
                members.append(member)
        if not any(m.name.startswith("test/integration/") for m in members):
            raise RuntimeError(f"{archive.name} has no test/integration directory")
        tar.extractall(dest, members=members, filter="data")
    (dest / "test" / "__init__.py").touch()
    return dest
