"""The endpoint relay, run INSIDE a sandbox before the command (standard library only).

Usage: ``python3 -I -S -c <this source> PORT SOCKET MAX -- ARGV...``

It listens on ``127.0.0.1:PORT`` (port 0 or a taken port: any free one), then double-forks
a relay that pipes every TCP connection to the unix socket ``SOCKET`` (the one
harness-provided endpoint, bound into the sandbox), sets ``HARNESS_ENDPOINT`` and execs
``ARGV``: the command keeps its own pid, exit status and signals. The relay detaches from
the command's stdio and dies with the sandbox (pid namespace / container). It pipes at
most ``MAX`` connections at once (two threads each, in the sandbox's own pids); the next
is closed at once. A connection the endpoint closes is closed both ways.
"""

import contextlib
import os
import socket
import sys
import threading


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s, how in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
            with contextlib.suppress(OSError):
                s.shutdown(how)


def _serve_one(conn: socket.socket, path: str) -> None:
    up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        up.connect(path)
    except OSError:
        conn.close()
        up.close()
        return
    back = threading.Thread(target=_pump_back, args=(up, conn), daemon=True)
    try:
        back.start()
    except RuntimeError:  # no thread left in the sandbox's pids: this connection only
        up.close()
        conn.close()
        return
    _pump(conn, up)
    back.join()
    conn.close()
    up.close()


def _pump_back(up: socket.socket, conn: socket.socket) -> None:
    """Pipe the endpoint's replies; once it closes, end the client's side too."""
    _pump(up, conn)
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_RDWR)  # wakes the forward pump: nothing more is read


def _serve(srv: socket.socket, path: str, most: int) -> None:
    slots = threading.BoundedSemaphore(most)

    def one(conn: socket.socket) -> None:
        try:
            _serve_one(conn, path)
        finally:
            slots.release()

    while True:
        try:
            conn, _ = srv.accept()
        except OSError:
            continue
        if not slots.acquire(blocking=False):
            conn.close()  # over the bound: closed at once, no thread
            continue
        try:
            threading.Thread(target=one, args=(conn,), daemon=True).start()
        except RuntimeError:
            conn.close()
            slots.release()


def _listen(port: int) -> socket.socket:
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        srv.bind(("127.0.0.1", port))
    except OSError:
        srv.bind(("127.0.0.1", 0))  # the fixed port is taken (host network): any port
    srv.listen(128)
    return srv


def main() -> None:
    """Listen, detach the relay, exec the command."""
    port, path, most, sep = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
    argv = sys.argv[5:]
    if sep != "--" or not argv:
        sys.stderr.write("harness relay: usage: PORT SOCKET MAX -- ARGV...\n")
        os._exit(125)
    srv = _listen(port)
    bound = srv.getsockname()[1]
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() != 0:
            os._exit(0)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        try:
            _serve(srv, path, most)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    srv.close()
    os.environ["HARNESS_ENDPOINT"] = f"http://127.0.0.1:{bound}"
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        sys.stderr.write(f"{argv[0]}: {exc.strerror}\n")
        os._exit(127 if isinstance(exc, FileNotFoundError) else 126)


if __name__ == "__main__":
    main()
