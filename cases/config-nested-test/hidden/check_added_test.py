"""Verifier of the add-a-test case: the new test must pass, and must catch the mutant.

1. run the agent's test file (and the public config tests) on the workspace as it is;
2. copy the workspace, replace fieldkit/config.py with the mutant (references resolved
   one level only), run the agent's test file again: it must FAIL there (exit 1).
"""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
WS = Path.cwd()
TEST = "tests/test_config_nested.py"
PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
# The workspace's tests must not depend on whatever pytest plugins the host has.
os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"


def main() -> int:
    if not (WS / TEST).is_file():
        print(f"verify: {TEST} does not exist", file=sys.stderr)
        subprocess.run([*PYTEST, "--junitxml=reports/junit.xml", "tests/test_config.py"], cwd=WS)
        return 1
    fixed = subprocess.run([*PYTEST, "--junitxml=reports/junit.xml", TEST, "tests/test_config.py"], cwd=WS)
    if fixed.returncode != 0:
        print("verify: the tests do not pass on the real code", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "ws"
        shutil.copytree(WS, copy, ignore=shutil.ignore_patterns("reports", "__pycache__", ".fieldkit-verify"))
        shutil.copyfile(HERE / "mutant_config.py", copy / "fieldkit" / "config.py")
        mutant = subprocess.run([*PYTEST, TEST], cwd=copy)
    if mutant.returncode != 1:
        print(f"verify: {TEST} does not catch the one-level mutant "
              f"(pytest exit {mutant.returncode}, expected 1: tests ran and failed)", file=sys.stderr)
        return 1
    print("verify: the new test passes on the code and kills the mutant")
    return 0


if __name__ == "__main__":
    sys.exit(main())
