#!/usr/bin/env bash
# The one command that runs every test on a fresh machine: it installs what
# the tests need (Debian, PyPI and npm packages), then runs pytest over
# tests/ and compat_tests/. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

apt_packages=()
command -v kcat >/dev/null || apt_packages+=(kcat)
command -v javac >/dev/null || apt_packages+=(openjdk-17-jdk-headless)  # compat_tests/java
command -v npm >/dev/null || apt_packages+=(nodejs npm)                  # kafkajs
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || apt_packages+=(postgresql)  # Debezium CDC test, the cloud engine's tests
command -v chromium >/dev/null || apt_packages+=(chromium)  # the web console tests (Playwright drives Debian's)
# a C compiler and Python's headers build the record walk (protocol/_record_scan.c) and the header walk
# (storage/_frame_walk.c)
command -v gcc >/dev/null || apt_packages+=(gcc)
command -v curl >/dev/null || apt_packages+=(curl)                    # tests/http/test_rest_bad_input.py
python3 -c 'import sysconfig, os, sys; sys.exit(not os.path.exists(sysconfig.get_paths()["include"] + "/Python.h"))' \
    || apt_packages+=(python3-dev)
if [ ${#apt_packages[@]} -gt 0 ]; then
    echo "== installing Debian packages: ${apt_packages[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${apt_packages[@]}" >/dev/null
fi

# A virtual environment of its own (a stock Debian/Ubuntu Python refuses
# `pip install` outside one): .venv, or KAFKACOMPAT_VENV to share one.
venv="${KAFKACOMPAT_VENV:-.venv}"
if [ ! -x "$venv/bin/python" ]; then
    echo "== creating the virtual environment $venv"
    python3 -m venv "$venv" 2>/dev/null || {
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
        python3 -m venv "$venv"
    }
fi
python="$venv/bin/python"

echo "== installing kafkacompat with its test dependencies into $venv"
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1  # Playwright drives the system's chromium, never a downloaded one
"$python" -m pip install --quiet --disable-pip-version-check -e ".[test]"

# Java kafka-clients 3.9.1 (and its codecs) for compat_tests: the jars ship in
# this wheel's pyflink/lib; compat_tests/drivers/java.py finds them there.
"$python" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('pyflink') is None)" 2>/dev/null \
    || "$python" -m pip install --quiet --disable-pip-version-check "shigawire-apache-flink-libraries==2.0.0.post1"

# kafkajs and its snappy/lz4 codecs, pinned by compat_tests/node/package-lock.json
if [ ! -f compat_tests/node/node_modules/kafkajs/package.json ]; then
    echo "== installing kafkajs (npm) into compat_tests/node"
    npm ci --prefix compat_tests/node --no-audit --no-fund --loglevel=error
fi

# uPlot, the web console's chart library (served from where npm puts it, pinned by its package-lock.json),
# and axe-core, which the console tests inject into each page to check its accessibility
for folder in kafkacompat/http/console/charts tests/http/a11y; do
    if [ ! -d "$folder/node_modules" ]; then
        echo "== installing $folder's npm packages"
        npm ci --prefix "$folder" --no-audit --no-fund --loglevel=error
    fi
done

# Jars in no registry reachable here, used where present (../shared/jars, see
# its README; a user's clone has none and those tests skip saying why):
# Apache Kafka 4.1.0 for compat_tests/test_differential.py, Spark's Kafka
# connector for compat_tests/test_pyspark.py.
jars="${KAFKACOMPAT_JARS_DIR:-../shared/jars}"
if [ -d "$jars" ]; then
    export KAFKACOMPAT_JARS_DIR="$(cd "$jars" && pwd)"
    if [ -z "${KAFKACOMPAT_SPARK_JARS:-}" ] && [ -d "$KAFKACOMPAT_JARS_DIR/spark-4.0" ]; then
        export KAFKACOMPAT_SPARK_JARS="$KAFKACOMPAT_JARS_DIR/spark-4.0"
    fi
fi

# PySpark itself comes with the test extra; its Kafka connector only from the jars
if [ -n "${KAFKACOMPAT_SPARK_JARS:-}" ]; then
    echo "== Spark's Kafka connector tests use the jars in $KAFKACOMPAT_SPARK_JARS"
fi

echo "== running tests"
set +e
# --durations: the slowest tests close the output, where CI's excerpt of it shows them (CI time: docs/development.md).
# Two pytest-xdist workers by default, so CI's two cores both work (each worker starts brokers, PostgreSQL and JVMs
# of its own; a test file stays on one worker, so its module fixtures start once). KAFKACOMPAT_TEST_WORKERS=N for
# N workers, 0 for one process.
workers="${KAFKACOMPAT_TEST_WORKERS:-2}"
spread=()
if [ "$workers" != 0 ]; then spread=(-n "$workers" --dist loadfile); fi
"$python" -m pytest -q -p no:cacheprovider --durations=30 "${spread[@]}" "$@"  # paths: testpaths in pyproject.toml
status=$?
set -e
if [ "$status" -eq 5 ]; then
    echo "pytest collected no tests: failing, a test run must test something" >&2
    exit 1
fi
exit "$status"
