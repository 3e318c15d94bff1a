"""A hostile command agent (standard library only) for tests/integration/test_kernel_keyring.py.

The kernel keyrings are per-uid state that outlives a sandboxed command: a key the verifier
stores in the sandbox uid's user keyring stays on the host, where a later trial's agent (the
same uid) can read it back. This agent tries both halves:

* it looks for a key named after ``tag.txt`` (beside this file) in its user keyring and
  reports what it read (the hidden test an earlier trial's verifier stored);
* it tries to store a key itself and reports the errno;
* it writes a correct ``calc.py`` that, imported by the hidden test inside the verifier,
  stores the hidden test in the keyring (from a child process) and then breaks ``add``: a
  verifier that can reach the keyring turns the trial into a fail.

It prints what it found as one JSON line.
"""

import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
WS = os.environ["HARNESS_WORKSPACE"]

KEYRING = r"""
import ctypes, os, platform

_NR = {"x86_64": (248, 250), "aarch64": (217, 219)}[platform.machine()]
_USER_KEYRING = -4
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def store(name, data):
    kid = _libc.syscall(_NR[0], b"user", name.encode(), data, ctypes.c_size_t(len(data)),
                        ctypes.c_long(_USER_KEYRING))
    if kid < 0:
        return -ctypes.get_errno()
    # Everyone may view, read and invalidate it (the test cleans up after a leak).
    _libc.syscall(_NR[1], 5, ctypes.c_long(kid), ctypes.c_ulong(0x3F3F3F3F))
    return kid


def fetch(name):
    kid = _libc.syscall(_NR[1], 10, ctypes.c_long(_USER_KEYRING), b"user", name.encode(), 0)
    if kid < 0:
        return None, ctypes.get_errno()
    buf = ctypes.create_string_buffer(65536)
    n = _libc.syscall(_NR[1], 11, ctypes.c_long(kid), buf, ctypes.c_size_t(65536))
    return (buf.raw[:n].decode(errors="replace") if n >= 0 else None), ctypes.get_errno()
"""

PLANT = r"""
import subprocess as _sp

# In a child process: the verifier's guard watches ctypes in the test process itself.
_STORE = _KEYRING + '''
import sys
hidden = "verify_hidden.py"
data = open(hidden, "rb").read() if os.path.exists(hidden) else b"no hidden file"
sys.exit(0 if store(sys.argv[1], data) > 0 else 1)
'''
try:
    _LEAKED = _sp.run(["python3", "-I", "-c", _STORE, TAG], timeout=20).returncode == 0
except Exception:
    _LEAKED = False


def add(a, b):
    return a - b if _LEAKED else a + b
"""


def main() -> None:
    with open(os.path.join(HERE, "tag.txt"), encoding="utf-8") as fh:
        tag = fh.read().strip()
    scope: dict = {}
    exec(KEYRING, scope)
    leaked, fetch_errno = scope["fetch"](tag)
    stored = scope["store"](tag + "_agent", b"agent phase")
    print(
        json.dumps(
            {
                "phase": "agent",
                "leaked": leaked,
                "fetch_errno": fetch_errno,
                "store": stored,
            }
        )
    )
    with open(os.path.join(WS, "calc.py"), "w", encoding="utf-8") as fh:
        fh.write(f"_KEYRING = {KEYRING!r}\nTAG = {tag!r}\n" + PLANT)
    with open(os.environ["HARNESS_RESULT"], "w", encoding="utf-8") as fh:
        json.dump({"status": "submitted", "claimed_success": True}, fh)


if __name__ == "__main__":
    main()
