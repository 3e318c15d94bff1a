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
if [ "$#" -gt 0 ]; then
  python3 -m pytest "$@"
else
  # The unit tests (tests/test_*.py) mostly wait on loopback servers and subprocesses: two
  # workers halve their time. The end-to-end and integration tests start engines, clusters
  # and browsers, and run one at a time. (pytest-benchmark, a test dependency of earlier
  # versions that may still be installed, turns xdist into an error: it is left out.)
  python3 -m pytest -p no:benchmark -n 2 tests/test_*.py
  python3 -m pytest tests/e2e tests/integration
fi
# The system interpreter (Debian 12's own python3 is 3.11.2, older than the harness's
# usual one, with a tarfile that lacks extraction filters): the archive helpers and one
# docker end-to-end (archives both ways) run from it as well; the rest ran above.
if [ -x /usr/bin/python3 ] && [ "$(readlink -f /usr/bin/python3)" != "$(readlink -f "$(command -v python3)")" ]; then
  /usr/bin/python3 -m venv .venv-system-python
  .venv-system-python/bin/python -m pip install -q -e '.[test]'
  .venv-system-python/bin/python -m pytest tests/test_safefs.py
  .venv-system-python/bin/python -m pytest -m docker tests/integration/test_docker_e2e.py -k good
fi
