#!/usr/bin/env bash
# The one command that runs every test on a fresh machine: it installs what
# the tests need (Debian, PyPI and npm packages), then runs pytest over
# tests/ and compat_tests/. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

apt_packages=()
command -v kcat >/dev/null || apt_packages+=(kcat)
if [ ${#apt_packages[@]} -gt 0 ]; then
    echo "== installing Debian packages: ${apt_packages[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${apt_packages[@]}" >/dev/null
fi

echo "== installing kafkacompat with its test dependencies"
python3 -m pip install --quiet --disable-pip-version-check -e ".[test]"

echo "== running tests"
set +e
python3 -m pytest -q -p no:cacheprovider "$@"  # paths: testpaths in pyproject.toml
status=$?
set -e
if [ "$status" -eq 5 ]; then
    echo "pytest collected no tests: failing, a test run must test something" >&2
    exit 1
fi
exit "$status"
