#!/usr/bin/env bash
# Install the Debian packages the local sandbox and the tests need (idempotent; run as root).
#   bubblewrap  read-only root, network and pid namespaces for the local sandbox
#   git         materialises git-pinned cases; the simulated agent applies patches with it
#   chromium    headless browser that opens the HTML report in the report tests
#   python3-pytest  the system interpreter's pytest: the sealed sandbox shows only /usr, so
#               verifiers run /usr/bin/python3 (never the harness's own interpreter)
#   python3-venv    a virtual environment of the system interpreter: CI runs the docker
#               end-to-end from /usr/bin/python3 too (Debian 12's 3.11.2)
#   curl        the CI templates' comment step, run by tests/e2e/test_ci_templates.py (so
#               their package step has nothing left to install on this host)
set -euo pipefail
need=()
command -v bwrap >/dev/null || need+=(bubblewrap)
command -v git >/dev/null || need+=(git)
/usr/bin/python3 -c 'import pytest' 2>/dev/null || need+=(python3-pytest)
/usr/bin/python3 -c 'import ensurepip' 2>/dev/null || need+=(python3-venv)
command -v curl >/dev/null || need+=(curl)
if [ "${HARNESS_WITH_BROWSER:-0}" = 1 ]; then
  command -v chromium >/dev/null || need+=(chromium)
fi
if [ ${#need[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
