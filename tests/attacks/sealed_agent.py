"""A hostile command agent (standard library only) for tests/integration/test_sealed_view.py.

It does not know how to fix the bug. It hunts for the answer and for secrets instead:
walks the filesystem for patches, hidden tests and canaries; reads host paths planted by
the test (``targets.json`` next to this file: the project, the store, /root, /var/tmp,
another trial's dir, /etc/shadow); tries to write outside its workspace; tries the
network. It prints everything it got as one JSON line, and if it found the reference fix
it applies it (so a leak also shows up as a pass).
"""

import fnmatch
import json
import os
import socket
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
WS = os.environ["HARNESS_WORKSPACE"]
PATTERNS = ("*.patch", "test_hidden*", "verify_hidden*", "*canary*", "reference*", "secret*")
SKIP = {"/proc", "/sys", "/dev", "/usr"}


def grab(path):
    try:
        with open(path, "rb") as fh:
            return fh.read(4096).decode("latin-1")
    except OSError:
        return None


def main():
    with open(os.path.join(HERE, "targets.json"), encoding="utf-8") as fh:
        targets = json.load(fh)
    report = {"found": {}, "read": {}, "listed": {}, "wrote": [], "net": []}
    for root, dirs, files in os.walk("/"):
        dirs[:] = [d for d in dirs if os.path.join(root, d) not in SKIP]
        if root == WS or root.startswith(WS + "/") or root.startswith(HERE):
            continue
        for name in files:
            if any(fnmatch.fnmatch(name, p) for p in PATTERNS) and len(report["found"]) < 200:
                text = grab(os.path.join(root, name))
                if text is not None:
                    report["found"][os.path.join(root, name)] = text
    for path in targets["read"]:
        report["read"][path] = grab(path)
    for path in targets["list"]:
        try:
            report["listed"][path] = sorted(os.listdir(path))[:50]
        except OSError:
            report["listed"][path] = None
    for path in targets["write"]:
        try:
            with open(path, "a", encoding="utf-8") as fh:
                fh.write("PWNED by the agent\n")
            report["wrote"].append(path)
        except OSError:
            pass
    for host, port in [("127.0.0.1", targets["port"]), ("1.1.1.1", 443), ("10.0.0.1", 80)]:
        try:
            socket.create_connection((host, port), timeout=3).close()
            report["net"].append(f"{host}:{port}")
        except OSError:
            pass
    try:
        socket.getaddrinfo("example.com", 443)
        report["net"].append("dns")
    except OSError:
        pass
    print(json.dumps(report))
    leaked = "\n".join(v for v in [*report["found"].values(), *report["read"].values()] if v)
    if "+    return a + b" in leaked:  # the reference fix leaked: use it
        with open(os.path.join(WS, "calc.py"), "w", encoding="utf-8") as fh:
            fh.write("def add(a, b):\n    return a + b\n")
    with open(os.environ["HARNESS_RESULT"], "w", encoding="utf-8") as fh:
        json.dump({"status": "submitted", "claimed_success": True}, fh)


if __name__ == "__main__":
    sys.exit(main())
