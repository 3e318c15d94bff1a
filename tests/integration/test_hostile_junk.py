"""Junk the agent writes must never become exit 5 or ``infra_error``, through the public CLI.

Each agent fixes ``add`` honestly and then leaves something odd behind: a result file or an
evidence-stream record holding a lone surrogate (valid JSON, no storable text), a workspace
dated in the year 14645, an 8 KB extended attribute a tmpfs takes and the host's disk does
not. The run must judge the trial (pass, or fail for forged evidence), store it, and a
second identical command must resume it: never exit 4 (blocked) or 5 (internal error).
The case, the agent scripts and the run helper are the hostile-verifier module's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import harness
from test_hostile_verifier import FIX, _append, _project, _run

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# A result file with a lone surrogate spelt as a JSON escape (the claim) and as UTF-8 bytes
# (a usage name); the script then exits before its usual result is written.
RESULT_SURROGATE = (
    FIX + "open(os.environ['HARNESS_RESULT'], 'wb').write(b'{\"status\": \"submitted\", "
    '"claim": "fixed \\\\ud800", "usage": {"\\xed\\xa0\\x80": 1}}\')\n'
    "os._exit(0)\n"
)

# Code under the verifier writes one guard record whose test id holds a lone surrogate.
STREAM_SURROGATE = _append(
    "import os as _o, sys as _s\n"
    "_g = _s.modules.get('harness_' + 'canary')\n"
    "if _g is not None and not getattr(_s, '_j', 0):\n"
    "    _s._j = 1\n"
    '    _o.write(_g._FD, _g._PREFIX + (\'{"k": "t", "id": "tests.test_hidden_add::'
    '\\\\ud800", "when": "call", "o": "failed", "run": "%s"}\' % _g._RUN)'
    ".encode() + b'\\n')\n"
)

# The workspace folder and a file dated in the year 14645, another before year 0.
FUTURE_TIMES = (
    FIX + "os.utime('tests/test_mul.py', (-70_000_000_000, -70_000_000_000))\n"
    "os.utime('calc.py', (400_000_000_000, 400_000_000_000))\n"
    "os.utime('.', (400_000_000_000, 400_000_000_000))\n"
)

# An 8 KB user xattr on a file and on a folder: a tmpfs workspace takes it, ext4 does not.
BIG_XATTR = (
    FIX + "for p in ('calc.py', 'tests'):\n"
    "    try:\n        os.setxattr(p, 'user.big', b'A' * 8000)\n"
    "    except OSError:\n        pass\n"
)

JUNK = {
    "result_surrogate": RESULT_SURROGATE,
    "stream_surrogate": STREAM_SURROGATE,
    "future_times": FUTURE_TIMES,
    "big_xattr": BIG_XATTR,
}


@pytest.fixture(scope="module", params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def backend(request) -> str:
    if request.param == "docker":
        from harness.sandbox.docker import DEFAULT_IMAGE, connect, find_image

        client = connect(timeout=30)
        found = find_image(client, DEFAULT_IMAGE) is not None
        client.close()
        assert found, f"{DEFAULT_IMAGE} missing"
    return request.param


@pytest.fixture(scope="module")
def project(tmp_path_factory, backend) -> Path:
    root = _project(tmp_path_factory.mktemp(f"junk-{backend}"), JUNK)
    if backend == "docker":
        built = harness(root, "images", "build")
        assert built.returncode == 0, built.stdout + built.stderr
    return root


def _judged_and_resumed(root: Path, release: str, backend: str) -> dict:
    trial = _run(root, release, backend)  # exit 0, 1 or 3: judged, never 4 or 5
    again = harness(
        root, "run", "--release", release, "--k", "1", "--backend", backend, "--no-report"
    )
    assert again.returncode in (0, 1, 3), again.stdout + again.stderr
    assert "1 trials already recorded" in again.stdout + again.stderr
    assert trial["verdict"]["outcome"] != "infra_error", trial["verdict"]
    assert not any(w in trial["verdict"].get("reason") or "" for w in ("/tmp/", "harness-"))
    return trial


@pytest.mark.parametrize("release", ["result_surrogate", "future_times", "big_xattr"])
def test_junk_after_an_honest_fix_still_passes(project, backend, release):
    trial = _judged_and_resumed(project, release, backend)
    assert trial["verdict"]["outcome"] == "pass", (release, trial["verdict"])
    if release == "result_surrogate":  # stored, the surrogates read as U+FFFD
        assert "fixed \\ufffd" in json.dumps(trial), trial["attempts"][0]


def test_a_surrogate_in_the_evidence_stream_is_the_candidates_fail(project, backend):
    trial = _judged_and_resumed(project, "stream_surrogate", backend)
    assert trial["verdict"]["outcome"] == "fail", trial["verdict"]
