import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_generated_booleans_are_in_sync():
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_booleans.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
