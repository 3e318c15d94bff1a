#!/usr/bin/env bash
# The test command: install what the tests need (system packages, a Docker engine with a
# locally built base image, the Python package) and run the whole suite. Run as root.
set -euo pipefail
cd "$(dirname "$0")/.."
export HARNESS_REQUIRE_DOCKER="${HARNESS_REQUIRE_DOCKER:-1}"
export HARNESS_REQUIRE_BROWSER="${HARNESS_REQUIRE_BROWSER:-1}"
HARNESS_WITH_BROWSER=1 bash ci/system-deps.sh
bash ci/docker-up.sh
python3 -m pip install -q -e '.[test]'
python3 -m pytest "$@"
