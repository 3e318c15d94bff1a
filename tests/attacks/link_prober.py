"""An agent that hunts for the gateway link of a Dask run (it runs with the host network).

It lists the listening TCP sockets of the machine (/proc/net/tcp), asks each loopback one
who it is (GET), and at the gateway link tries to open a session with no secret and with
the only credential it holds (its own gateway token). It prints what it got as one line,
``LINK-PROBE {"port": [status without secret, status with its token], ...}``, then fixes
the case so that only the gateway's answers can make the trial interesting.
"""

import json
import os
import urllib.error
import urllib.request


def listening_ports():
    ports = set()
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as fh:
                lines = fh.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 3 and fields[3] == "0A":  # LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return sorted(ports)


def ask(port, method, auth=None, body=None):
    headers = {"Content-Type": "application/json"}
    if auth is not None:
        headers["Authorization"] = auth
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/link/v1/open", data=body, headers=headers, method=method
    )
    try:
        with urllib.request.urlopen(req, timeout=3) as resp:
            return resp.status, resp.headers.get("Server", "")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Server", "")
    except Exception as exc:  # not HTTP, or nothing on IPv4 loopback
        return type(exc).__name__, ""


opening = json.dumps(
    {
        "key": {
            "arm": "candidate",
            "release": "tool",
            "case_id": "add-0",
            "case_version": 1,
            "trial": 0,
        },
        "attempt": 1,
    }
).encode()
found = {}
for port in listening_ports():
    _, server = ask(port, "GET")
    if "harness-gateway-link" in server:
        token = os.environ.get("OPENAI_API_KEY", "")
        found[port] = [
            ask(port, "POST", None, opening)[0],
            ask(port, "POST", f"Bearer {token}", opening)[0],
        ]
print("LINK-PROBE " + json.dumps(found), flush=True)
ws = os.environ["HARNESS_WORKSPACE"]
with open(os.path.join(ws, "calc.py")) as fh:
    src = fh.read()
with open(os.path.join(ws, "calc.py"), "w") as fh:
    fh.write(src.replace("a - b", "a + b"))
with open(os.environ["HARNESS_RESULT"], "w") as fh:
    json.dump({"status": "submitted"}, fh)
