"""A backend-agnostic conformance suite for :class:`~harness.sandbox.base.Sandbox` backends.

Every backend must pass every check (the tests run it against ``local`` and ``docker``)::

    for name, check in conformance_checks().items():
        check(sandbox, tmp_path)          # raises AssertionError with a clear message

Commands are ``python3 -c`` programs so the same checks run on the host and in a Debian
image with python3. A container backend passes its image via ``base``::

    conformance_checks(PhaseContract(image="python:3.11-slim"))

The fork-bomb check requires ``PIDS`` (the bomb's first process dies of a refused fork,
so the backend must be able to tell that the pids limit was hit); ``WALL_CLOCK`` is not
accepted because a backend that cannot see the pids limit cannot classify the failure.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import socket
import stat
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.cases.model import PhaseContract
from harness.errors import SandboxUnavailableError
from harness.sandbox.base import (
    DROP_BOX,
    ExecResult,
    Sandbox,
    SandboxSession,
    SealedView,
    Termination,
    ViewMount,
)

__all__ = ["Check", "conformance_checks"]

Check = Callable[[Sandbox, Path], None]
"""A conformance check: raises ``AssertionError`` naming what the backend got wrong."""

_SECRET = "HARNESS_CONFORMANCE_SECRET"
_ALLOWED = "HARNESS_CONFORMANCE_ALLOWED"


def _show(r: ExecResult) -> str:
    return (
        f"termination={r.termination.value} exit={r.exit_code} signal={r.signal} "
        f"bound={r.bound} stdout={r.stdout[-300:]!r} stderr={r.stderr[-600:]!r}"
    )


def _py(code: str) -> list[str]:
    return ["python3", "-c", code]


@contextlib.contextmanager
def _unix_http_server() -> Iterator[str]:
    """Serve HTTP on a host unix socket (the shape of the model gateway); yield its path."""
    import http.server
    import shutil
    import socketserver
    import tempfile
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def _reply(self, text: str) -> None:
            body = text.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._reply(f"relay-ok GET {self.path}")

        def do_POST(self) -> None:
            data = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self._reply(f"relay-ok POST {self.path} {len(data)}")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
        daemon_threads = True

    folder = tempfile.mkdtemp(prefix="harness-gw-")
    path = os.path.join(folder, "gw.sock")
    server = Server(path, Handler)
    os.chmod(path, 0o666)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield path
    finally:
        server.shutdown()
        server.server_close()
        shutil.rmtree(folder, ignore_errors=True)


@dataclass(frozen=True)
class _Sessions:
    """Opens the checks' sessions: ``base``, the suite's small bounds, a check's overrides."""

    base: PhaseContract

    def contract(self, **update: Any) -> PhaseContract:
        fields = {"timeout_seconds": 30.0, "memory_mb": 512, "pids": 64, "disk_mb": 64}
        return PhaseContract.model_validate({**self.base.model_dump(), **fields, **update})

    @contextlib.contextmanager
    def session(
        self, sandbox: Sandbox, name: str, view: SealedView | None = None, **update: Any
    ) -> Iterator[SandboxSession]:
        s = sandbox.open(self.contract(**update), label=f"conformance-{name}", view=view)
        try:
            yield s
        finally:
            s.close()


def _exec_exit_codes_and_output(on: _Sessions, sandbox: Sandbox, tmp: Path) -> None:
    with on.session(sandbox, "exec") as s:
        r = s.exec(_py("import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"))
        assert r.termination is Termination.EXIT and r.exit_code == 3, _show(r)
        assert r.stdout == b"out\n" and r.stderr == b"err\n", _show(r)
        assert r.stdout_total == 4 and not r.stdout_truncated, _show(r)
        ok = s.exec(_py("import sys; sys.stdout.write(sys.stdin.read().upper())"), stdin=b"ping")
        assert ok.ok and ok.stdout == b"PING", f"stdin not delivered: {_show(ok)}"
        assert ok.duration_s >= 0 and not ok.bound, _show(ok)


def _stdout_truncation_recorded(on: _Sessions, sandbox: Sandbox, tmp: Path) -> None:
    with on.session(sandbox, "truncate", output_bytes=1024) as s:
        r = s.exec(_py("import sys; sys.stdout.write('x' * 5000); sys.stderr.write('e' * 10)"))
        assert r.ok, _show(r)
        assert r.stdout == b"x" * 1024, f"kept {len(r.stdout)} bytes, expected 1024"
        assert r.stdout_truncated and r.stdout_total == 5000, _show(r)
        assert r.stderr == b"e" * 10 and not r.stderr_truncated, _show(r)


def _env_allowlist(on: _Sessions, sandbox: Sandbox, tmp: Path) -> None:
    saved = {k: os.environ.get(k) for k in (_SECRET, _ALLOWED)}
    os.environ[_SECRET], os.environ[_ALLOWED] = "s3cret-must-not-leak", "allowed-value"
    try:
        with on.session(sandbox, "env", env=(_ALLOWED,)) as s:
            r = s.exec(
                _py("import json, os; print(json.dumps(dict(os.environ)))"),
                env={"HARNESS_EXTRA": "extra"},
            )
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert r.ok, _show(r)
    assert b"s3cret-must-not-leak" not in r.stdout and _SECRET.encode() not in r.stdout, (
        f"host variable {_SECRET} (not allowlisted) leaked into the sandbox"
    )
    assert b'"allowed-value"' in r.stdout, f"allowlisted {_ALLOWED} missing: {_show(r)}"
    assert b'"HARNESS_EXTRA": "extra"' in r.stdout, f"exec(env=) missing: {_show(r)}"


def _workspace_round_trip(on: _Sessions, sandbox: Sandbox, tmp: Path) -> None:
    src = tmp / "rt-src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "data.txt").write_text("data\n")
    script = src / "run.py"
    script.write_text("#!/usr/bin/env python3\nprint('ran')\n")
    script.chmod(0o755)
    (src / "link").symlink_to("pkg/data.txt")
    os.link(src / "pkg" / "data.txt", src / "pkg" / "same.txt")  # a hard link: a path too
    out = tmp / "rt-out"
    with on.session(sandbox, "roundtrip") as s:
        s.put_tree(src)
        r = s.exec(["./run.py"])
        assert r.ok and r.stdout == b"ran\n", f"exec bit lost on put_tree: {_show(r)}"
        r = s.exec(
            _py("import os; print(os.readlink('link')); open('made.txt', 'w').write('made')")
        )
        assert r.ok and r.stdout == b"pkg/data.txt\n", f"symlink lost: {_show(r)}"
        twin = "import os; os.link('made.txt', 'twin'); print(open('pkg/same.txt').read())"
        r = s.exec(_py(twin))
        assert r.ok and r.stdout == b"data\n\n", f"hard link lost on put_tree: {_show(r)}"
        s.get_tree(out)
    assert (out / "pkg" / "data.txt").read_text() == "data\n"
    assert (out / "twin").read_text() == "made", "hard link made inside not copied out"
    assert (out / "made.txt").read_text() == "made", "file made inside not copied out"
    assert os.stat(out / "run.py").st_mode & stat.S_IXUSR, "exec bit lost on get_tree"
    assert (out / "link").is_symlink(), "symlink followed (not kept) on get_tree"
    assert os.readlink(out / "link") == "pkg/data.txt"


def _files_write_read_remove(on: _Sessions, sandbox: Sandbox, tmp: Path) -> None:
    with on.session(sandbox, "files") as s:
        path = f"{s.paths.workspace}/sub/dir/f.txt"
        s.write_file(path, b"hello world")
        r = s.exec(_py("print(open('sub/dir/f.txt').read())"))
        assert r.ok and r.stdout == b"hello world\n", _show(r)
        assert s.read_file(path) == b"hello world"
        assert s.read_file(path, limit=5) == b"hello"
        assert s.read_file(f"{s.paths.workspace}/absent") is None
        s.write_file(f"{s.paths.io}/result.json", b"{}")
        assert s.read_file(f"{s.paths.io}/result.json") == b"{}"
        s.remove(path)
        assert s.read_file(path) is None, "remove() left the file"
        s.remove(f"{s.paths.workspace}/sub")
        r = s.exec(_py("import os; print(os.path.exists('sub'))"))
        assert r.stdout == b"False\n", f"remove() of a tree failed: {_show(r)}"
        s.remove(f"{s.paths.workspace}/never-existed")


def _drop_box(on: _Sessions, sandbox: Sandbox, tmp: Path) -> None:
    # A sandboxed command adds a file it names; it cannot list the box, nor take it away
    # unseen; the harness reads every file back and names whatever else is there.
    code = (
        "import os, sys\n"
        "box = os.open(sys.argv[1], os.O_PATH | os.O_DIRECTORY)\n"
        "fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=box)\n"
        "os.write(fd, sys.argv[2].encode() * 2)\n"
        "refused = []\n"
        "for what, call in (('list', lambda: os.listdir(sys.argv[1])),"
        " ('chmod', lambda: os.chmod(sys.argv[1], 0o777))):\n"
        "    try:\n        call()\n    except PermissionError:\n        refused.append(what)\n"
        "print(','.join(refused))\n"
    )
    with on.session(sandbox, "drop-box") as s:
        # the default box (a backend may make it at open) and one anywhere else in io
        other = f"{s.paths.io}/other"
        s.make_drop_box(other)
        r = s.exec([*_py(code), other, "k0"])
        assert r.ok and r.stdout == b"list,chmod\n", _show(r)
        found = s.read_drop_box(other, max_files=8, max_bytes=16)
        assert found.files == {"k0": b"k0k0"} and found.odd == (), found
        box = f"{s.paths.io}/{os.path.basename(DROP_BOX)}"
        s.make_drop_box(box)
        for name in ("k1", "k2"):
            r = s.exec([*_py(code), box, name])
            assert r.ok and r.stdout == b"list,chmod\n", _show(r)
        found = s.read_drop_box(box, max_files=8, max_bytes=16)
        assert found.files == {"k1": b"k1k1", "k2": b"k2k2"} and found.odd == (), found
        odd = (
            "import os, sys\nbox = os.open(sys.argv[1], os.O_PATH | os.O_DIRECTORY)\n"
            "os.symlink('/etc/passwd', 'link', dir_fd=box)\n"
            "os.mkfifo('fifo', dir_fd=box)\n"
            "fd = os.open('big', os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=box)\n"
            "os.write(fd, b'x' * 64)\n"
        )
        r = s.exec([*_py(odd), box])
        assert r.ok, _show(r)
        found = s.read_drop_box(box, max_files=8, max_bytes=16)
        assert found.files == {"k1": b"k1k1", "k2": b"k2k2"}, found
        assert len(found.odd) == 3 and all(
            n in " ".join(found.odd) for n in ("link", "fifo", "big")
        )
        few = s.read_drop_box(box, max_files=2, max_bytes=16)
        assert "more than 2 entries" in few.odd[-1] and len(few.odd) + len(few.files) == 3, few
        # a folder of the sandboxed user's own in the box's place is never taken for it
        swap = (
            "import os, sys\n"
            "try:\n    os.rename(sys.argv[1], sys.argv[1] + '.old')\n"
            "except PermissionError:\n    print('refused')\n"
            "else:\n    os.mkdir(sys.argv[1], 0o1733)\n"
        )
        r = s.exec([*_py(swap), box])
        assert r.ok, _show(r)
        found = s.read_drop_box(box, max_files=8, max_bytes=16)
        if r.stdout != b"refused\n":
            assert found.files == {} and "replaced" in " ".join(found.odd), found


def _network_denied(on: _Sessions, sandbox: Sandbox, tmp: Path) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    try:
        with on.session(sandbox, "network", network="none") as s:
            r = s.exec(
                _py(
                    "import socket\ntry:\n"
                    f"    socket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
                    "    print('CONNECTED')\nexcept OSError as e:\n    print('DENIED', e)"
                )
            )
    finally:
        listener.close()
    assert r.ok, _show(r)
    assert r.stdout.startswith(b"DENIED"), (
        f"network=none but a host listener on 127.0.0.1:{port} was reachable: {_show(r)}"
    )


def _wall_clock_kills_grandchild(on: _Sessions, sandbox: Sandbox, tmp: Path) -> None:
    child = (
        "import os, time; open('child.pid', 'w').write(str(os.getpid())); "
        "time.sleep(3); open('child.alive', 'w').write('alive')"
    )
    parent = (
        "import subprocess, sys, time; "
        f"subprocess.Popen([sys.executable, '-c', {child!r}], "
        "start_new_session=True, stdin=subprocess.DEVNULL, "
        "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
        "time.sleep(60)"
    )
    with on.session(sandbox, "wallclock", timeout_seconds=1.5) as s:
        start = time.monotonic()
        r = s.exec(_py(parent))
        assert r.termination is Termination.WALL_CLOCK, _show(r)
        assert r.bound is not None and r.bound.kind is Termination.WALL_CLOCK, _show(r)
        assert r.bound.limit == 1.5, _show(r)
        assert r.duration_s < 10, f"kill took too long: {r.duration_s:.1f} s"
        pid_file = f"{s.paths.workspace}/child.pid"
        assert s.read_file(pid_file), "the setsid grandchild never started"
        time.sleep(max(0.0, start + 4.5 - time.monotonic()))
        alive = s.read_file(f"{s.paths.workspace}/child.alive")
        assert alive is None, "a setsid grandchild survived the wall-clock kill"


def _memory_bound(on: _Sessions, sandbox: Sandbox, tmp: Path) -> None:
    with on.session(sandbox, "memory", memory_mb=64) as s:
        r = s.exec(_py("b = b'x' * (512 * 1024 * 1024); print(len(b))"))
        assert r.termination is Termination.MEMORY, _show(r)
        assert r.bound is not None and r.bound.limit == 64, _show(r)


def _fork_bomb_contained(on: _Sessions, sandbox: Sandbox, tmp: Path) -> None:
    with on.session(sandbox, "forkbomb", pids=24, memory_mb=1024, timeout_seconds=30) as s:
        r = s.exec(_py("import os\nwhile True:\n    os.fork()"))
        assert r.termination is Termination.PIDS, _show(r)
        assert r.bound is not None and r.bound.limit == 24, _show(r)
        after = s.exec(_py("print('still fine')"))
        assert after.ok, f"session unusable after a fork bomb: {_show(after)}"


def _read_only_root(on: _Sessions, sandbox: Sandbox, tmp: Path) -> None:
    probe = f"/harness-conformance-probe-{uuid.uuid4().hex[:12]}"
    with on.session(sandbox, "rootfs", read_only_root=True) as s:
        r = s.exec(
            _py(
                "import os, tempfile\n"
                f"for p in ({probe!r}, '/usr' + {probe!r}):\n"
                "    try:\n        open(p, 'w').write('x'); print('WROTE', p)\n"
                "    except OSError:\n        print('DENIED')\n"
                "open('inside.txt', 'w').write('ok')\n"
                "assert tempfile.gettempdir() == os.environ['TMPDIR'], tempfile.gettempdir()\n"
                "with tempfile.NamedTemporaryFile() as f: f.write(b'tmp ok')\n"
            )
        )
        assert r.ok, f"workspace or TMPDIR not writable: {_show(r)}"
        assert r.stdout == b"DENIED\nDENIED\n", f"wrote outside the workspace: {_show(r)}"
    leaked = [p for p in (Path(probe), Path("/usr" + probe)) if p.exists()]
    for p in leaked:  # never leave the probe behind, even when the check fails
        with contextlib.suppress(OSError):
            p.unlink()
    assert not leaked, f"{leaked} appeared on the host"


def _closed_session_leaves_no_files(on: _Sessions, sandbox: Sandbox, tmp: Path) -> None:
    s = sandbox.open(on.contract(), label="conformance-close")
    with s:
        s.write_file(f"{s.paths.workspace}/a.txt", b"a")
        r = s.exec(_py("open('b.txt', 'w').write('b')"))
        assert r.ok, _show(r)
        ws, io = Path(s.paths.workspace), Path(s.paths.io)
    s.close()  # idempotent
    for p in (ws, io):
        assert not (p / "a.txt").exists() and not (p / "b.txt").exists(), (
            f"{p} still holds files after close()"
        )
    try:
        s.exec(["true"])
    except SandboxUnavailableError:
        pass
    else:
        raise AssertionError("exec() on a closed session did not raise SandboxUnavailableError")


def _view_mounts_path_env(on: _Sessions, sandbox: Sandbox, tmp: Path) -> None:
    src = tmp / "view-src"
    (src / "bin").mkdir(parents=True)
    tool = src / "bin" / "harness-view-tool"
    tool.write_text("#!/bin/sh\necho tool-ran\n")
    tool.chmod(0o755)
    (src / "data.txt").write_text("view data\n")
    target = "/opt/harness/conformance-view"
    view = SealedView(
        mounts=(ViewMount(source=str(src), target=target),),
        path_prefix=(f"{target}/bin",),
        env={"HARNESS_VIEW_VAR": "view-value"},
    )
    s = sandbox.open(on.contract(), label="conformance-view", view=view)
    with s:
        r = s.exec(["harness-view-tool"])
        assert r.ok and r.stdout == b"tool-ran\n", f"view prefix not on PATH: {_show(r)}"
        r = s.exec(
            _py(
                "import json, os\n"
                f"print(json.dumps([os.environ['PATH'], os.environ.get('HARNESS_VIEW_VAR'),"
                f" open({target!r} + '/data.txt').read()]))\n"
                "for p in ('/data.txt', '/new.txt', '/bin/harness-view-tool'):\n"
                "    try:\n"
                f"        open({target!r} + p, 'a').write('x'); print('WROTE', p)\n"
                "    except OSError:\n        print('DENIED')\n"
            ),
            env={"HARNESS_VIEW_VAR": "exec-wins"},
        )
    assert r.ok, _show(r)
    first, *rest = r.stdout.decode().splitlines()
    path, var, data = __import__("json").loads(first)
    assert path.split(":")[0] == f"{target}/bin", f"PATH does not start with the view: {path}"
    assert os.path.dirname(sys.executable) not in path.split(":"), (
        f"the harness's own interpreter directory is on the sandbox PATH: {path}"
    )
    assert var == "exec-wins", f"exec(env=) must override the view's env, got {var!r}"
    assert data == "view data\n", f"view mount content not visible: {data!r}"
    assert rest == ["DENIED"] * 3, f"view mount is writable from inside: {_show(r)}"
    assert (src / "data.txt").read_text() == "view data\n" and not (src / "new.txt").exists()
    s2 = sandbox.open(on.contract(), label="conformance-view-env", view=view)
    with s2:
        r = s2.exec(_py("import os; print(os.environ.get('HARNESS_VIEW_VAR'))"))
    assert r.ok and r.stdout == b"view-value\n", f"view env not set: {_show(r)}"


def _endpoint_relay(on: _Sessions, sandbox: Sandbox, tmp: Path) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    code = (
        "import os, socket, sys, urllib.request\n"
        "url = os.environ['HARNESS_ENDPOINT']\n"
        "print(url)\n"
        "print(urllib.request.urlopen(url + '/v1/models', timeout=20).read().decode())\n"
        "req = urllib.request.Request(url + '/echo', data=b'x' * 300000, method='POST')\n"
        "print(urllib.request.urlopen(req, timeout=20).read().decode())\n"
        f"for host, port in (('127.0.0.1', {port}), ('10.0.0.1', 80), ('1.1.1.1', 443)):\n"
        "    try:\n"
        "        socket.create_connection((host, port), timeout=3); print('REACHED', host)\n"
        "    except OSError:\n        print('DENIED')\n"
        "sys.exit(3)\n"
    )
    try:
        with (
            _unix_http_server() as path,
            on.session(sandbox, "relay", view=SealedView(endpoint=path), network="none") as s,
        ):
            r = s.exec(_py(code))
    finally:
        listener.close()
    assert r.termination is Termination.EXIT and r.exit_code == 3, _show(r)
    lines = r.stdout.decode().splitlines()
    assert lines[:3] == [
        "http://127.0.0.1:18080",
        "relay-ok GET /v1/models",
        "relay-ok POST /echo 300000",
    ], f"endpoint not relayed: {_show(r)}"
    assert lines[3:] == ["DENIED"] * 3, f"more than the endpoint is reachable: {_show(r)}"
    with on.session(sandbox, "no-relay", network="none") as s:
        r = s.exec(
            _py(
                "import os, socket\nprint(os.environ.get('HARNESS_ENDPOINT'))\ntry:\n"
                "    socket.create_connection(('127.0.0.1', 18080), timeout=3)\n"
                "    print('REACHED')\nexcept OSError:\n    print('DENIED')"
            )
        )
    assert r.ok and r.stdout == b"None\nDENIED\n", f"relay without an endpoint: {_show(r)}"


def _unprivileged(on: _Sessions, sandbox: Sandbox, tmp: Path) -> None:
    # Host kernel state (core_pattern, domainname) is guarded by uid, not capability:
    # writing back the value just read proves writability without changing anything.
    code = (
        "import json, os, resource\n"
        "caps = {l.split(':')[0]: int(l.split()[1], 16) for l in open('/proc/self/status')"
        " if l.startswith('Cap')}\n"
        "wrote = []\n"
        "for p in ('/proc/sys/kernel/core_pattern', '/proc/sys/kernel/domainname',"
        " '/proc/sys/kernel/hostname'):\n"
        "    try:\n        v = open(p).read()\n        open(p, 'w').write(v); wrote.append(p)\n"
        "    except OSError:\n        pass\n"
        "try:\n    resource.setrlimit(resource.RLIMIT_CORE, (1 << 20, 1 << 20))\n"
        "    core = 'raised'\n"
        "except (ValueError, OSError):\n    core = resource.getrlimit(resource.RLIMIT_CORE)\n"
        "print(json.dumps([os.getuid(), os.geteuid(), os.getgroups(), caps, wrote, core]))\n"
    )
    with on.session(sandbox, "unprivileged") as s:
        r = s.exec(_py(code))
    assert r.ok, _show(r)
    uid, euid, groups, caps, wrote, core = json.loads(r.stdout)
    assert uid != 0 and euid != 0 and 0 not in groups, f"runs as root: {_show(r)}"
    assert not any(caps.values()), f"capabilities left: {caps}"
    assert wrote == [], f"host kernel state writable from the sandbox: {wrote}"
    assert core == [0, 0], f"core dumps not off: {core}"


_CHECKS: tuple[tuple[str, Callable[[_Sessions, Sandbox, Path], None]], ...] = (
    ("exec_exit_codes_and_output", _exec_exit_codes_and_output),
    ("unprivileged", _unprivileged),
    ("stdout_truncation_recorded", _stdout_truncation_recorded),
    ("env_allowlist", _env_allowlist),
    ("workspace_round_trip", _workspace_round_trip),
    ("files_write_read_remove", _files_write_read_remove),
    ("drop_box", _drop_box),
    ("network_denied", _network_denied),
    ("wall_clock_kills_grandchild", _wall_clock_kills_grandchild),
    ("memory_bound", _memory_bound),
    ("fork_bomb_contained", _fork_bomb_contained),
    ("read_only_root", _read_only_root),
    ("closed_session_leaves_no_files", _closed_session_leaves_no_files),
    ("view_mounts_path_env", _view_mounts_path_env),
    ("endpoint_relay", _endpoint_relay),
)
"""(name, check) in the order the suite runs them."""


def conformance_checks(base: PhaseContract | None = None) -> dict[str, Check]:
    """Return the named checks; each opens its own sessions from ``base`` + overrides."""
    on = _Sessions(base or PhaseContract())
    return {name: functools.partial(check, on) for name, check in _CHECKS}
