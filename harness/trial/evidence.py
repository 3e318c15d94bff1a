"""Evidence the verifier's verdict rests on, held by the harness, not by the sandbox.

Candidate code is imported by the tests and runs inside the test runner's process, as the
same user as the runner: any file the runner can write there (a log in the io dir, a
collection list) the candidate can delete or forge. So the evidence does not live in a
file. The harness's guard (:func:`guard_files`, mounted read-only outside the io dir)
writes it to the verifier's inherited stderr *as it happens*, one line per record, and the
harness reads it from the captured stream after the run: what was written cannot be taken
back by code that runs later in the process (an exit handler, a rewritten report).

Records (``@@harness:<tag>@@ {json} <mac>``: a public tag derived from the writing process's
key, and an HMAC-SHA256 of the JSON under that key, which no record carries, so code that
reads the records on their way out cannot change them or make new ones). Each record's JSON
starts with its place in its process's sequence (``q``: 0, 1, 2, ...): the test process can
open the stream's pipe again for reading and take a record back off it before the harness
reads it, and the gap, or a record put back out of its place, is tampering. Each guarded pytest
process makes its own key before any code the candidate wrote runs and leaves it in the
harness's drop box (:meth:`~harness.sandbox.base.SandboxSession.make_drop_box`: a folder the
sandboxed user may add a file to but never list); no environment, descriptor or other
process holds it, so a shell that started pytest has nothing to leak. Candidate code can
leave a key of its own there too, and sign records with it: a run belongs to the key that
started it, and the run starts (``pytest_load_initial_conftests``) before any ``conftest.py``
loads, so such records finish no real run and a run of its own over the same report is a
second writer (:func:`check_reports`: tampering either way). The records:

* ``start``: a pytest run that writes a JUnit report began (its report path, its run id);
* ``t``: one phase of one test ended (JUnit id, phase, outcome), from the runner's own
  report object, before any report writer sees it;
* ``n``: how many items the run collected (after the canary was added);
* ``x``: the guard saw tampering in the process: a runner module or class attribute
  replaced since the plugin loaded (before any candidate code), a hook implemented by
  candidate code or by code without a source file, or an audited event (``gc`` object
  walks, frame access, ``ctypes``, tracing, a code object replaced) raised directly by
  candidate code (the irremovable audit hook of the guard's ``sitecustomize``);
* ``end``: the run finished (its exit status, how many outcomes it streamed).

:func:`check_reports` compares each pytest JUnit report with its run's stream: a report
without a stream, a stream without its ``end``, a test the stream failed, skipped or never
ran that the report passes, a failed test the report dropped, a canary the stream saw pass,
or any ``x`` record: tampering, never "no evidence either way". There is one run: nothing
tells candidate code it is being checked rather than judged.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from harness._safefs import loads_json
from harness.sandbox import seal_program
from harness.trial.junit import JUnitError, parse_junit
from harness.trial.runner_guard import canary_token

__all__ = [
    "GUARD_MOUNT",
    "KEY_BYTES",
    "Stream",
    "check_reports",
    "guard_files",
    "parse_stream",
    "read_keys",
    "strip_stream",
]

GUARD_MOUNT = "/harness/guard"
"""Where the guard is mounted, read-only and root-owned, in the verifier's sandbox."""
_MAX_RECORDS = 200_000
_MAX_X = 50

_PATHS = r'''
# Paths resolved with the system calls themselves, taken when this file loads (before any
# code of the run's): ``os.path``'s helpers look up ``os.fspath``, ``os.lstat`` and the rest
# in ``os`` at each call, where code under test may put a function of its own. What the
# functions use is bound as their defaults: nothing here is looked up by name when called.
import posix as _posix  # noqa: E402

_LSTAT, _STAT, _ACCESS = _posix.lstat, _posix.stat, _posix.access
_READLINK, _GETCWD, _W_OK = _posix.readlink, _posix.getcwd, _posix.W_OK
_S_IFMT, _S_IFLNK, _S_IFREG = 0o170000, 0o120000, 0o100000


def _normpath(path, _getcwd=_GETCWD):
    """``path`` made absolute, its ``.``, ``..`` and repeated slashes taken out (by text)."""
    if not path.startswith("/"):
        path = _getcwd() + "/" + path
    parts = []
    for part in path.split("/"):
        if part == "..":
            if parts:
                parts.pop()
        elif part and part != ".":
            parts.append(part)
    return "/" + "/".join(parts)


def _realpath(path, _lstat=_LSTAT, _readlink=_READLINK, _getcwd=_GETCWD, _norm=_normpath):
    """``os.path.realpath`` of a ``str`` (a loop of links: the path as is, normalized)."""
    if not path.startswith("/"):
        path = _getcwd() + "/" + path
    todo = path.split("/")[1:]
    todo.reverse()
    out, links = "", 0
    while todo:
        part = todo.pop()
        if part == "" or part == ".":
            continue
        if part == "..":
            out = out.rsplit("/", 1)[0]
            continue
        step = out + "/" + part
        try:
            mode = _lstat(step).st_mode
        except OSError:
            out = step
            continue
        if mode & 0o170000 != 0o120000:
            out = step
            continue
        links += 1
        if links > 40:
            return _norm(path)
        target = _readlink(step)
        if target.startswith("/"):
            out = ""
        more = target.split("/")
        more.reverse()
        todo.extend(more)
    return out or "/"

'''

_SITECUSTOMIZE = r'''"""harness guard: workspace imported last; an audit hook none can remove."""
import json as _json
import os as _os
import sys as _sys
from importlib.machinery import PathFinder

_extra = [_os.getcwd()]
if _sys.argv and _sys.argv[0].endswith(".py"):
    _extra.append(_os.path.dirname(_os.path.abspath(_sys.argv[0])))
for _p in _extra:
    if _p not in _sys.path:
        _sys.path.append(_p)


def _pytest_run():
    argv = list(getattr(_sys, "orig_argv", ()))
    for i, a in enumerate(argv[1:], 1):
        if a == "-m":
            return i + 1 < len(argv) and argv[i + 1] in ("pytest", "py.test")
        if a.startswith("-m"):
            return a[2:] in ("pytest", "py.test")
        if not a.startswith("-"):
            return _os.path.basename(a) in ("pytest", "py.test")
    return False


class _HarnessEarly:
    """Until the guard's pytest plugin has loaded, import no module the candidate wrote.

    The standard library probes optional modules while pytest starts (``copy`` tries
    ``org.python.core``): a workspace module by such a name would run before the guard
    took its snapshot. Locked workspace files (unchanged since the starting state) stay
    importable: a project's own ``-p`` plugin loads as before.
    """

    def __init__(self, roots, locked, report):
        self.roots = tuple(r.rstrip("/") + "/" for r in roots)
        self.locked = locked
        self.report = report

    def find_spec(self, name, path=None, target=None):
        if path is not None or "harness_canary" in _sys.modules:
            return None
        for root in self.roots:
            spec = PathFinder.find_spec(name, [root.rstrip("/")])
            if spec is None:
                continue
            where = spec.origin if spec.has_location else None
            if where is not None and _os.path.realpath(where) in self.locked:
                return None
            first = PathFinder.find_spec(name)
            if first is not None and first.origin == spec.origin:
                self.report(name)
                raise ModuleNotFoundError(
                    "harness guard: %s is the candidate's and the test run has not started"
                    % name,
                    name=name,
                )
        return None


def _wipe(value):
    """Zero the characters of a bytes or ASCII str object in place (it is about to go)."""
    try:
        import ctypes

        if type(value) is bytes:
            at = _sys.getsizeof(b"") - 1
        elif type(value) is str and value.isascii():
            at = _sys.getsizeof("") - 1
        else:
            return
        ctypes.memset(id(value) + at, 0, len(value))
    except Exception:
        pass


def _undumpable():
    """Make this process non-dumpable: the kernel then gives its ``/proc/<pid>/mem`` and
    ``environ`` to root, so neither this process (the sandbox user) nor any other process
    of that user can open them, and none may trace it."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
    except Exception:
        pass


def _dict_tags():
    """Return ``view(d)``, a read of dict ``d``'s header whose item 3 is its version tag, or
    None where this interpreter keeps no tag that every write to a dict changes.

    CPython 3.11 to 3.13 keep one (PEP 509): a write of any kind gives the dict a number
    never used before. Trusted only once proven here, before any other code runs, on every
    kind of write there is (and on the header's layout); else None and every check reads
    every entry, as before."""
    try:
        import ctypes
        import gc
        import types

        if _sys.implementation.name != "cpython" or not (3, 11) <= _sys.version_info < (3, 14):
            return None

        def view(d):
            return memoryview((ctypes.c_char * 32).from_address(id(d))).cast("B").cast("Q")

        class Probe:
            a = 1

        mod = types.ModuleType("probe")
        mod.a = 1
        writes = (
            lambda d: d.__setitem__("a", object()),
            lambda d: d.__setitem__("new", 1),
            lambda d: d.__delitem__("a"),
            lambda d: d.pop("a"),
            lambda d: d.popitem(),
            lambda d: d.clear(),
            lambda d: d.update(a=2),
            lambda d: d.setdefault("new", 1),
            lambda d: d.__ior__({"a": 3}),
            lambda d: dict.__init__(d, a=4),
        )
        for write in writes:
            d = {"a": 1, "b": 2}
            v = view(d)
            before = v[3]
            write(d)
            if v[2] != len(d) or v[3] == before:
                return None
        cls = gc.get_referents(Probe.__dict__)
        if len(cls) != 1 or type(cls[0]) is not dict:
            return None
        for d, write in (
            (cls[0], lambda: setattr(Probe, "a", 2)),
            (cls[0], lambda: delattr(Probe, "a")),
            (mod.__dict__, lambda: setattr(mod, "a", 2)),
            (mod.__dict__, lambda: delattr(mod, "a")),
        ):
            v = view(d)
            before = v[3]
            write()
            if v[3] == before:
                return None
        return view
    except Exception:
        return None


# seccomp(2) by machine: the filter itself is the harness's (``seal.bpf``, built by
# harness.sandbox.seal_program), only installed here.
_SEAL_ABI = {"x86_64": 317, "aarch64": 277}


def _seal_signals():
    """Refuse every new signal handler in this process and its children, for good.

    A Python-level handler runs between any two bytecodes of the main thread and is handed
    the frame running there: candidate code with a timer and a handler reaches any frame,
    the guard's own among them, without one audited event. So before pytest or anything it
    loads runs, SIGINT's Python handler goes back to the default, faulthandler (pytest's
    crash reports) installs its handlers, and the harness's kernel filter (seccomp,
    ``seal.bpf``, on every thread and every child) makes ``rt_sigaction`` with a new action
    fail with EPERM (reading a disposition still works), and ``ptrace``,
    ``process_vm_readv``/``writev`` and ``pidfd_getfd`` too: no process the candidate starts
    reaches a later pytest's memory. Returns why it could not, or None.
    """
    try:
        import ctypes
        import faulthandler
        import signal

        seccomp = _SEAL_ABI.get(_os.uname().machine)
        here = _os.path.dirname(_os.path.abspath(__file__))
        try:
            with open(_os.path.join(here, "seal.bpf"), "rb") as fh:
                code = fh.read()
        except OSError:
            code = b""
        if seccomp is None or not code or len(code) % 8:
            return "no signal seal for machine %s" % _os.uname().machine
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
        if not faulthandler.is_enabled():
            faulthandler.enable()  # its handlers now; pytest's enable only moves its file
        _reset_on_fatal(ctypes)
        buf = ctypes.create_string_buffer(code, len(code))

        class Fprog(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

        fprog = Fprog(len(code) // 8, ctypes.addressof(buf))
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
            return "no signal seal: no_new_privs refused (errno %d)" % ctypes.get_errno()
        # SECCOMP_SET_MODE_FILTER with SECCOMP_FILTER_FLAG_TSYNC: every thread at once
        if libc.syscall(seccomp, 1, 1, ctypes.byref(fprog)) != 0:
            return "no signal seal: seccomp refused (errno %d)" % ctypes.get_errno()
    except Exception as exc:
        return "no signal seal: %s" % (type(exc).__name__,)
    return None


# glibc's struct sigaction (x86_64, aarch64): handler, 128-byte mask, int flags, restorer.
_SIGACTION_SIZE, _SA_FLAGS_AT, _SA_RESETHAND = 152, 136, 0x80000000


def _reset_on_fatal(ctypes):
    """Make faulthandler's fatal-signal handlers reset to the default as they are entered.

    Once dumped, faulthandler puts the previous disposition back with ``sigaction`` and
    raises the signal again. Under the seal that ``sigaction`` fails, so the handler stayed:
    a SIGSEGV (sent, or a real fault) re-entered it, or returned into the faulting
    instruction, and the verifier ran on to its timeout. With ``SA_RESETHAND`` the kernel
    restores the default itself: the second raise ends the process, as without the seal.
    """
    import signal

    libc = ctypes.CDLL(None, use_errno=True)
    for sig in (signal.SIGSEGV, signal.SIGFPE, signal.SIGABRT, signal.SIGBUS, signal.SIGILL):
        act = ctypes.create_string_buffer(_SIGACTION_SIZE)
        if libc.sigaction(int(sig), None, act) != 0:
            continue
        flags = int.from_bytes(act.raw[_SA_FLAGS_AT : _SA_FLAGS_AT + 4], "little")
        handler = int.from_bytes(act.raw[:8], "little")
        if handler in (0, 1):  # SIG_DFL, SIG_IGN: nothing to reset
            continue
        flags |= _SA_RESETHAND
        ctypes.memmove(
            ctypes.addressof(act) + _SA_FLAGS_AT, (flags & 0xFFFFFFFF).to_bytes(4, "little"), 4
        )
        libc.sigaction(int(sig), act, None)


def _own_domain():
    """Put this process and every process it starts in a Landlock domain of their own.

    The kernel then refuses them ``ptrace`` access to anything outside it (opening another
    process's ``/proc/<pid>/mem`` or ``environ``, attaching): the shell or script that
    started this pytest, the sandbox's init, a later pytest of the same command. The
    domain restricts no file (its one rule allows executing anything under ``/``).
    Needs ``no_new_privs`` (set by :func:`_seal_signals`). Returns why it could not, or None.
    """
    try:
        import ctypes
        import struct

        libc = ctypes.CDLL(None, use_errno=True)
        create, add, restrict = 444, 445, 446  # the same numbers on x86_64 and aarch64
        execute = 1  # LANDLOCK_ACCESS_FS_EXECUTE
        attr = ctypes.create_string_buffer(struct.pack("=Q", execute), 8)
        ruleset = libc.syscall(create, attr, 8, 0)
        if ruleset < 0:
            return "no Landlock domain (errno %d)" % ctypes.get_errno()
        try:
            root = _os.open("/", _os.O_PATH | _os.O_CLOEXEC)
            try:
                rule = ctypes.create_string_buffer(struct.pack("=Qi", execute, root), 12)
                if libc.syscall(add, ruleset, 1, rule, 0) != 0:  # LANDLOCK_RULE_PATH_BENEATH
                    return "no Landlock rule (errno %d)" % ctypes.get_errno()
            finally:
                _os.close(root)
            if libc.syscall(restrict, ruleset, 0) != 0:
                return "no Landlock domain (errno %d)" % ctypes.get_errno()
        finally:
            _os.close(ruleset)
    except Exception as exc:
        return "no Landlock domain: %s" % (type(exc).__name__,)
    return None


def _tolerant_faulthandler():
    """Under the signal seal (this process's or a parent's), enabling faulthandler fails:
    pytest's own enable and re-enable then go on without its handlers, never crash."""
    try:
        import faulthandler

        real = faulthandler.enable

        def enable(*args, **kwargs):
            try:
                return real(*args, **kwargs)
            except RuntimeError:
                return None

        faulthandler.enable = enable
    except Exception:
        pass


def _register(cfg):
    """Return a fresh key for this process's records, once it is in the harness's box.

    The box must be the harness's (a folder owned by ``box_owner``, mode 1733), opened
    without following a link and checked on the open descriptor, so a folder the
    candidate put in its place never sees the key. A key that could not be left there is
    still returned: every record signed with it is one the harness cannot check
    (tampering, never a verdict believed)."""
    key = _os.urandom(32)
    # O_PATH: the box may not be read (listed), only searched and added to
    flags = _os.O_PATH | _os.O_DIRECTORY | _os.O_NOFOLLOW | _os.O_CLOEXEC
    try:
        box = _os.open(cfg["box"], flags)
    except (OSError, KeyError, TypeError, ValueError):
        return key
    try:
        st = _os.fstat(box)
        if st.st_uid != cfg.get("box_owner", 0) or st.st_mode & 0o7777 != 0o1733:
            return key
        hexlify = __import__("binascii").hexlify
        made = _os.O_WRONLY | _os.O_CREAT | _os.O_EXCL | _os.O_NOFOLLOW | _os.O_CLOEXEC
        name, text = hexlify(_os.urandom(16)), hexlify(key)
        try:
            fd = _os.open(name, made, 0o600, dir_fd=box)
            try:
                _os.write(fd, text)
            finally:
                _os.close(fd)
        finally:
            _wipe(name)
            _wipe(text)
    except OSError:
        pass
    finally:
        _os.close(box)
    return key


# @@paths@@: _PATHS goes here

def _install():
    # Every name the hook's functions call is bound here, before any code the candidate
    # wrote runs: a builtin, ``os`` or ``sys`` attribute rebound later never runs inside the
    # hook. Code that runs while the hook is on the stack could walk up to the hook's
    # frames and read the stream's key from them (red team round twenty-one's primitive).
    _b = __import__("builtins").__dict__
    (
        AttributeError, Exception, ImportError, KeyError, OSError, ValueError, all, any,
        bool, bytearray, bytes, callable, compile, dict, enumerate, frozenset, getattr, id,
        int, isinstance, issubclass, len, list, map, object, open, ord, range, set, str,
        tuple, type, vars, zip,
    ) = [_b[n] for n in (
        "AttributeError", "Exception", "ImportError", "KeyError", "OSError", "ValueError",
        "all", "any", "bool", "bytearray", "bytes", "callable", "compile", "dict",
        "enumerate", "frozenset", "getattr", "id", "int", "isinstance", "issubclass", "len",
        "list", "map", "object", "open",
        "ord", "range", "set", "str", "tuple", "type", "vars", "zip",
    )]
    _os, _sys = __import__("os"), __import__("sys")
    norm, realpath = _normpath, _realpath  # see _PATHS: taken before any other code
    gc = __import__("gc")
    gc_enabled, gc_disable, gc_enable = gc.isenabled, gc.disable, gc.enable
    _thread = __import__("_thread")
    get_ident, new_lock = _thread.get_ident, _thread.RLock
    locks, inside = [new_lock()], [0]  # the hook's turn, and the thread that has it
    del _thread
    # Records signed but not yet written (see out): held here alone, in order.
    pending, held = [], [0, 0.0]  # lines; their bytes, when the first was held

    def fork_child():
        # a child forked while another thread had the hook's turn: that thread is not here;
        # the parent's held records are the parent's to write (a copy here would write
        # them twice)
        locks[0], inside[0] = new_lock(), 0
        del pending[:]
        held[0] = 0

    _os.register_at_fork(after_in_child=fork_child)
    join = "".join

    def exact(text):
        # a str subclass's own methods (``__eq__``, ``__hash__``, ``startswith``) are
        # candidate code: judge its characters as a plain str
        return text if type(text) is str else join((text,))

    here = _os.path.dirname(_os.path.abspath(__file__))
    early = []
    escapes = {i: "\\u%04x" % i for i in (*range(32), *range(0xD800, 0xE000))}
    escapes.update({ord('"'): '\\"', ord("\\"): "\\\\"})

    def encode(value, depth=0):
        # JSON for a record, with nothing a candidate can rebind (the ``json`` module can be)
        kind = type(value)
        if value is None or kind is bool:
            return {None: "null", True: "true", False: "false"}[value]
        if kind is int:
            return int.__repr__(value)
        if kind is dict and depth < 2:
            return "{" + ",".join(
                encode(k if type(k) is str else "?", depth + 1) + ":" + encode(v, depth + 1)
                for k, v in dict.items(value)
            ) + "}"
        if kind is not str:
            value = object.__repr__(value)
        return '"' + str.translate(value, escapes) + '"'
    try:
        with open(_os.path.join(here, "guard.json")) as fh:
            cfg = _json.load(fh)
    except (OSError, ValueError):
        cfg = {}
    ws = cfg.get("workspace", "/workspace")
    cand = frozenset(_os.path.join(ws, p) for p in cfg.get("candidate", ()))
    locked = frozenset(_os.path.join(ws, p) for p in cfg.get("locked", ()))
    writes = _os.O_WRONLY | _os.O_RDWR | _os.O_CREAT | _os.O_TRUNC | _os.O_APPEND
    changes = frozenset(("os.remove", "os.rename", "os.truncate", "os.chmod", "os.utime"))
    getcwd = _os.getcwd
    # The stream's key: this process's own, made here before any code the candidate wrote
    # can run, and left in the harness's drop box (a folder the sandboxed user may add a
    # file to but never list) under a random name. No other process holds it, none
    # inherits it, no environment or descriptor carries it: a wrapper that started this
    # pytest knows only that the harness asked for a stream (``HARNESS_STREAM``, taken out
    # here so a pytest a test starts streams nothing). From here on only the audit hook
    # below holds it, and no Python object reaches an audit hook. Held masked (XOR with a
    # random key) and unmasked in place only while a record is signed, so no copy of the
    # key sits in this process's memory for code that reads it (``ctypes``) to find.
    running = _pytest_run()
    armed = (_os.environ.pop if running else _os.environ.get)("HARNESS_STREAM", "")
    if armed and running:
        _undumpable()  # first: no other process opens /proc/<pid>/fd or mem from here on
        raw = _register(cfg)
    else:
        raw = b""
    sec, key = bytearray(raw), bytearray(_os.urandom(len(raw)))
    span = range(len(raw))
    for i in span:
        sec[i] ^= key[i]
    # Each record is written under a public tag and carries a MAC under the key, which
    # is never written: code that reads the records on their way out (a pipe of its own
    # over this descriptor) can drop them, not change them or make new ones.
    try:
        from _hashlib import hmac_digest as mac, openssl_sha256 as sha256
    except ImportError:
        from hmac import digest as mac
        from hashlib import sha256
    tagger = sha256(b"harness-tag:")
    tagger.update(raw)  # no joined copy of the key to leave behind
    head = b"\n@@harness:" + tagger.hexdigest()[:32].encode() + b"@@ "
    del tagger
    unsealed = None
    tag_view = None  # see _dict_tags: what tells this hook a dict was written since it looked
    if raw:
        _wipe(raw)
        unsealed = _seal_signals() or _own_domain()
        tag_view = _dict_tags()
    del raw
    plugin = _os.path.join(here, "harness_canary.py")
    emitter = []  # the plugin's ``_emit`` code, registered once when it loads
    try:
        fd = _os.dup(2)
    except OSError:
        return
    roots = [r for r in _extra if r == ws or r.startswith(ws.rstrip("/") + "/")]
    if roots and _pytest_run():

        def report(name):
            _sys.audit("harness.guard.early", name)

        early.append(report.__code__)

        _sys.meta_path.insert(0, _HarnessEarly(roots, locked, report))
    watch = frozenset(
        (
            "sys._getframe", "object.__setattr__", "object.__delattr__", "sys.addaudithook",
            "code.__new__", "function.__new__",
        )
    )
    # What hands out every object or frame of the process, the guard's own among them, or
    # runs a function at every call: judged by the frame that asked, and the standard
    # library's does not vouch (a thread, a finalizer or a C callback runs the candidate's
    # callable under it). Vouched: the guard, the verifier's own files, installed packages.
    strict = frozenset(
        (
            "gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames",
            "sys.settrace", "sys.setprofile",
        )
    )
    stdlib = norm(_os.path.dirname(_os.__file__)) + "/"
    # what hands frames (or tracebacks' frames) to its caller
    frame_apis = frozenset(
        [(stdlib + "inspect.py", n) for n in (
            "currentframe", "stack", "getouterframes", "trace", "getinnerframes")]
        + [(stdlib + "traceback.py", n) for n in ("walk_stack", "walk_tb")]
        + [(stdlib + "logging/__init__.py", "<lambda>")]
    )
    tracers = frozenset((stdlib + "threading.py", stdlib + "doctest.py"))

    def vouched(code, event):
        # A file vouches for the frame only when the frame runs that file's own code: code
        # compiled from other source under an installed file's name (through a standard
        # library trampoline, ``code.InteractiveInterpreter.runsource``) borrows the name,
        # not the trust (red team round nineteen installed a tracer so).
        name = exact(code.co_filename)
        n = norm(name) if name.startswith("/") else ""
        if name == plugin:
            return genuine(code, name)
        if not n or n in cand or n == ws or n.startswith(ws.rstrip("/") + "/"):
            return n in locked and genuine(code, n)
        if "/site-packages/" in n or "/dist-packages/" in n:
            return genuine(code, n)
        # a thread starting under threading.settrace/setprofile; doctest putting back the
        # tracer it found
        return event in ("sys.settrace", "sys.setprofile") and n in tracers and genuine(code, n)

    def own_file(code):
        # the frame's file is the image's or a locked one, and the frame runs its own code
        name = exact(code.co_filename)
        if name.startswith("<frozen"):
            return True
        n = norm(name) if name.startswith("/") else ""
        if not n or n in cand or (n.startswith(ws.rstrip("/") + "/") and n not in locked):
            return False
        return genuine(code, n)

    compiled = {}  # path -> {(name, first line): [code]} as the file's source compiles
    compile_, open_, any_, type_ = compile, open, any, type
    code_type = type(vouched.__code__)

    def genuine(code, path):
        # what pytest compiled for it (assertions rewritten), kept under its real path
        kept = shadow.get(path) or shadow.get(realpath(path))
        if kept is not None and kept.get(id(code)) is code:
            return True
        if type(code.co_name) is not str or type(code.co_firstlineno) is not int:
            return False  # made by hand: the compiler names code with plain strings
        index = compiled.get(path)
        if index is None:
            index = compiled[path] = {}
            try:
                with open_(path, "rb") as fh:
                    todo = [compile_(fh.read(), path, "exec", dont_inherit=True)]
            except Exception:
                todo = []
            while todo:
                c = todo.pop()
                index.setdefault((c.co_name, c.co_firstlineno), []).append(c)
                todo.extend(k for k in c.co_consts if type_(k) is code_type)
        # ``==`` on code objects compares names and constants with the objects' own
        # ``__eq__``, which code made by hand could supply: only plain code is compared
        if not plain_code(code, 0):
            return False
        return any_(c == code for c in index.get((code.co_name, code.co_firstlineno), ()))

    plain_types = (type(None), bool, int, float, complex, str, bytes, type(...))

    def among(kind, kinds):
        # by identity: ``in`` would ask the class's metaclass (``__eq__``, ``__hash__``)
        for k in kinds:
            if kind is k:
                return True
        return False

    def plain_code(code, depth):
        # what a compiler makes: names that are plain strings, constants of built-in types
        if depth > 32:
            return False
        for names in (code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars):
            if type_(names) is not tuple or not all(type_(n) is str for n in names):
                return False
        if type_(code.co_qualname) is not str or type_(code.co_filename) is not str:
            return False
        return all(plain_const(k, depth) for k in code.co_consts)

    def plain_const(value, depth):
        kind = type_(value)
        if among(kind, plain_types):
            return True
        if kind is tuple or kind is frozenset:
            return depth < 32 and all(plain_const(v, depth + 1) for v in value)
        return kind is code_type and plain_code(value, depth + 1)
    frames = frozenset(("tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back"))
    private = ("/environ", "/mem")
    native = frozenset(
        (
            "prctl", "ptrace", "process_vm_readv", "process_vm_writev", "syscall",
            "execv", "execve", "execvp", "execvpe", "execl", "execle", "execlp", "fexecve",
        )
    )
    me = _os.getpid()
    prefix = _sys.pycache_prefix
    getframe = _sys._getframe
    write = _os.write
    join_bytes = b"".join
    pipe_buf = getattr(__import__("select"), "PIPE_BUF", 512)
    monotonic = __import__("time").monotonic
    pid = _os.getpid
    state = [False, 0, 0]  # in a record; tampering records written; records written

    def flush():
        if pending:
            lines = join_bytes(pending)
            del pending[:]
            held[0] = 0
            try:
                write(fd, lines)
            except OSError:
                pass

    def out(rec, hold=False):
        # ``hold``: a test's outcome, which may wait for the next few (one write of at most
        # PIPE_BUF bytes, atomic on a pipe, so no other writer's output splits a record;
        # a write a record woke the harness's reader for cost more than the rest of a
        # record). Anything else is written at once, after what is held. Held records
        # that never reach the stream (the process killed) leave the run without its end
        # record, which the harness judges as a run cut short.
        if not span:
            return  # no key (a pytest a test started): nothing to write records under
        # Each record carries its place in this process's sequence, under the MAC: code
        # that opens the stream's pipe again for reading (/proc/self/fd) and takes a record
        # back off it leaves a gap the harness sees, or a record out of its place.
        text = encode(rec)
        place = '{"q":' + int.__repr__(state[2])
        state[2] += 1
        text = place + ("}" if text == "{}" else "," + text[1:])
        body = text.encode("utf-8", "surrogatepass")
        for i in span:
            sec[i] ^= key[i]
        try:
            sig = mac(sec, body, "sha256").hex().encode()
        finally:
            for i in span:
                sec[i] ^= key[i]
        line = head + body + b" " + sig + b"\n"
        if held[0] + len(line) > pipe_buf:
            flush()
        if not pending:
            held[1] = monotonic()
        pending.append(line)
        held[0] += len(line)
        if not hold or monotonic() - held[1] > 0.5:
            flush()

    if unsealed:  # fail closed: a run whose frames a signal handler could reach
        out({"k": "x", "pid": pid(), "what": unsealed})

    # What a record may have beneath it. Taken when the plugin registers, before any code
    # the candidate wrote can run: pytest's session and per-test protocol (by code object,
    # which no rebinding changes), and the folders only the image and the guard write.
    pyt = []
    homes = []
    seen = {}
    reports = set()
    session_frame = [None]
    noted = set()  # what the plugin wrote as tampering (``_REPORTED`` holds no more)

    known = {}

    def trusted(name):
        # a pure function of the name once the plugin registered (homes are fixed then)
        name = exact(name)
        hit = known.get(name)
        if hit is None:
            hit = known[name] = judge(name)
        return hit

    def judge(name):
        if name.startswith("<frozen"):
            return True
        if not name.startswith("/"):
            return False
        n = norm(name)
        if n in locked or n == plugin:
            return True
        if n == ws or n.startswith(ws.rstrip("/") + "/"):
            return False
        for r in homes:
            if n.startswith(r):
                return True
        return False

    def vet(rec, f):
        # A record counts only if pytest's own session made it: every frame beneath it is
        # the runner's, a test report comes from the protocol of that very test, and each
        # record is made once. Candidate code that calls the plugin or pytest's hooks
        # itself (from its modules, a thread, an exit handler) is refused and noted.
        kind = rec.get("k")
        if kind == "x":
            return None
        if len(pyt) < 3:
            return "the guard could not find pytest's session code"
        session = proto = None
        g = f
        while g is not None:
            code = g.f_code
            if not trusted(code.co_filename):
                return "a %s record was made with %s:%d beneath it, not the runner's code" % (
                    kind, exact(code.co_filename), g.f_lineno)
            if code is pyt[0]:
                session = session_frame[0] = g
            elif code is pyt[1] and proto is None:
                proto = g
            g = g.f_back
        if kind != "start" and session is None:
            return "a %s record was made outside pytest's session" % (kind,)
        if kind == "t" or kind == "r":
            if not seen.get("n") or seen.get("end"):
                return "a test report was made outside the test loop"
            item = proto.f_locals.get("item") if proto is not None else None
            try:
                node = pyt[2](item) if item is not None and readable(item) else None
            except Exception:
                node = None
            if type(node) is not str or node != rec.get("node"):
                return "a report of %s was made outside that test's own protocol" % (
                    rec.get("node"),)
            if kind == "r":
                return None
            key = (node, rec.get("when"))
            if key[1] == "subtest":  # pytest 9's subtests: one report each, any number
                return None
            if key in reports:
                return "a second %s report of %s" % (key[1], node)
            reports.add(key)
        elif seen.get(kind):
            return "a second %s record" % (kind,)
        seen[kind] = True
        return None

    # The plugin's own namespace and what it checks with, and pytest's session, as they were
    # when the collection record went out: the plugin's checks run in the test process, so
    # before every report this hook (which no candidate code reaches) sees that none of it
    # was rebound, edited or shadowed since.
    pglobals = []
    sealed = {}
    runner_mods = {}  # id -> the runner's modules (and the guard's), none to change class
    module_type = type(_sys)
    module_dict = module_type.__dict__["__dict__"]

    def take_runner_mods():
        roots = ("_pytest", "pytest", "pluggy", "unittest", "builtins", "re", "_sre")
        for mname, m in list(dict.items(_sys.modules)):
            if type(mname) is str and m is not None and (
                mname.split(".")[0] in roots or mname.startswith("harness_canary")
            ):
                runner_mods[id(m)] = m

    def odd_runner_mod():
        for m in list(runner_mods.values()):
            if type(m) is not module_type:
                return "the runner's module %s was given another class" % (
                    exact(dict.get(module_dict.__get__(m), "__name__", "?")),)
        return None

    type_dict = type.__dict__["__dict__"]
    runner_roots = frozenset(("_pytest", "pytest", "pluggy", "unittest", "harness_canary"))

    def module_of(kind):
        # the module name a class's own namespace gives (its metaclass is not asked)
        name = type_dict.__get__(kind).get("__module__")
        return exact(name) if isinstance(name, str) else ""

    def runner_kind(target):
        root = module_of(type(target)).split(".")[0]
        return root in runner_roots or root.startswith("harness_canary")

    def own_class(target):
        if not issubclass(type(target), type):
            return False
        mod = _sys.modules.get(module_of(target))
        if mod is None or not issubclass(type(mod), module_type) or id(mod) in runner_mods:
            return False
        where = dict.get(module_dict.__get__(mod), "__file__")
        return type(where) is str and norm(where) in cand

    def own_module(target):
        # a module of a candidate file (read past its class: its own ``__getattribute__``
        # is never run here)
        if not issubclass(type(target), module_type) or id(target) in runner_mods:
            return False
        where = dict.get(module_dict.__get__(target), "__file__")
        return type(where) is str and norm(where) in cand
    slots = {}  # hook caller class -> its ``_hookimpls`` slot (pluggy's), when it has one
    member_type = __import__("types").MemberDescriptorType
    hooks = (
        "pytest_runtest_protocol", "pytest_runtest_logstart", "pytest_runtest_setup",
        "pytest_runtest_call", "pytest_runtest_teardown", "pytest_runtest_makereport",
        "pytest_runtest_logreport", "pytest_runtest_logfinish", "pytest_pyfunc_call",
        "pytest_report_teststatus", "pytest_runtestloop", "pytest_sessionfinish",
        "pytest_exception_interact", "pytest_assertion_pass", "pytest_assertrepr_compare",
    )

    loaded = {}
    shadow = {}  # path -> {id: code}: what pytest compiled, as the plugin recorded it
    freezing = frozenset(
        ("_STATE", "_HOT_STATE", "_SEEN", "_KNOWN", "_KNOWN_TYPES", "_ITEMS", "_GLOBALS")
    )

    def functions(g):
        return tuple(
            (v, v.__code__, v.__defaults__, v.__kwdefaults__)
            for v in g.values()
            if type(v) is type(functions) and v.__globals__ is g
        )

    def take_loaded(g):
        take_runner_mods()
        loaded["names"] = dict(g)
        loaded["fns"] = functions(g)
        loaded["state"] = tuple(g["_STATE"])
        loaded["hot"] = tuple(g["_HOT_STATE"])
        loaded["known"] = dict(g["_KNOWN"])
        loaded["types"] = dict(g["_KNOWN_TYPES"])
        loaded["record"] = g["_record"].__code__
        take_functions(loaded["state"])

    def same_codes(path, codes):
        kept = shadow.get(path)
        return kept is not None and len(kept) == len(codes) and all(
            codes.get(k) is c for k, c in kept.items()
        )

    def as_loaded(g):
        # Between the plugin's load and the end of collection candidate code runs (test
        # modules import it): nothing the checks stand on may have changed meanwhile.
        names = loaded["names"]
        if len(g) != len(names):
            return "the guard plugin's namespace changed before the tests ran"
        for k, v in names.items():
            now = g.get(k, as_loaded)
            if k in freezing:
                if type(now) not in (tuple, frozenset, type(type.__dict__)):
                    return "the guard plugin's %s was replaced before the tests ran" % (k,)
            elif now is not v:
                return "the guard plugin's %s was replaced before the tests ran" % (k,)
        for fn, code, dflt, kw in loaded["fns"]:
            if fn.__code__ is not code or fn.__defaults__ is not dflt or (
                fn.__kwdefaults__ is not kw
            ):
                return "the guard plugin's %s was changed before the tests ran" % (fn.__name__,)
        st, first = g["_STATE"], loaded["state"]
        if len(st) < len(first) or any(a is not b for a, b in zip(st, first)):
            return "the guard plugin's runner snapshot was edited"
        hot = g["_HOT_STATE"]
        if len(hot) != len(loaded["hot"]) or any(a is not b for a, b in zip(hot, loaded["hot"])):
            return "the guard plugin's runner snapshot was edited"
        for name, key in (("_KNOWN", "known"), ("_KNOWN_TYPES", "types")):
            now, then = g[name], loaded[key]
            if len(now) != len(then) or any(now.get(k) is not v for k, v in then.items()):
                return "the guard plugin's trusted code was edited"
        codes = g["_MODCODES"]
        if len(codes) != len(shadow) or not all(same_codes(p, c) for p, c in codes.items()):
            return "the guard plugin's record of compiled test code was edited"
        return None

    def seal_plugin(frame):
        if not loaded:
            return "the guard plugin did not finish loading"
        try:
            why = as_loaded(pglobals[0])
        except Exception as exc:
            why = "the guard plugin's state is broken (%s)" % (type(exc).__name__,)
        if why is not None:
            return why
        sess = frame.f_locals.get("session") if frame is not None else None
        config = sess.config if readable(sess) else None
        pm = config.pluginmanager if readable(config) else None
        g = pglobals[0] if pglobals else None
        if sess is None or pm is None or g is None or not readable(pm):
            return "the guard could not take pytest's session"
        if not readable(pm.hook):
            return "pytest's hook relay is of a class the guard cannot read"
        take_runner_mods()
        why = odd_runner_mod()
        if why is not None:
            return why
        sealed["names"] = tuple(g.items())
        sealed["fns"] = functions(g)
        sealed["fn_ids"] = frozenset(id(f[0]) for f in sealed["fns"])
        sealed["pm"], sealed["hook"], sealed["session"] = pm, pm.hook, sess
        sealed["kind"] = type(sess)
        sealed["hook_kind"], sealed["pm_kind"] = type(pm.hook), type(pm)
        callers = [getattr(pm.hook, h, None) for h in hooks]
        if not all(c is None or readable(c) for c in callers):
            return "a pytest hook caller is of a class the guard cannot read"
        sealed["callers"] = tuple(
            (c, tuple(c.get_hookimpls()), type(c)) for c in callers if c is not None
        )
        for c in callers:
            slot = type(c).__dict__.get("_hookimpls") if c is not None else None
            if type(slot) is member_type:
                slots[type(c)] = slot
        attrs = vars(sess)
        sess_view = tag_view(attrs) if tag_view is not None and type(attrs) is dict else None
        sealed["sess"] = [attrs, sess_view, None]
        sealed["wrapped"] = dict(g.get("_WRAPPED") or {})
        sealed["paths"] = dict(g.get("_MODCODES") or {})
        sealed["unseen"] = set(g.get("_UNSEEN") or ())
        sealed["g"] = [tag_view(g), None] if tag_view is not None else None
        take_watch(g["_STATE"])
        return None

    # The runner's state the plugin checks (every binding of pytest's, pluggy's, unittest's,
    # re's and the builtins', as the plugin took it before any candidate code ran), by the
    # dict that holds it: what was written since this hook last found it as taken, the
    # plugin checks before each report; the rest it need not read again. Held here alone:
    # the reads of the dicts' headers are in no object candidate code can reach.
    watched = []  # (dict, its entries, {key: value as taken}) per dict
    views = []  # each dict's header (item 3: its version tag)
    tags = []  # each dict's tag when it was last found as taken (None: not yet)
    always = []  # entries of no plain dict (a candidate's module): checked every time
    _op, _it = __import__("operator"), __import__("itertools")
    third, is_, repeat = _op.itemgetter(3), _op.is_, _it.repeat
    del _op, _it
    proxy_type = type(type.__dict__)
    referents = gc.get_referents

    # The code and defaults of every function of the runner's state, as they were when the
    # plugin took it (before any candidate code ran): a function kept by identity but given
    # other code (``functools.update_wrapper(runtest, noop, assigned=("__code__",))``, a
    # standard-library frame doing the write) ran nothing of the test (red team round
    # thirty-two). Only a function some attribute write touched since is read again.
    fn_kept = {}  # id -> (function, code, defaults, kwdefaults, where)
    noted_swaps = set()
    touched_ids = [set()]  # objects an attribute was set on or deleted from, since the check

    def take_functions(state):
        for entry in state:
            if type(entry) is not tuple or len(entry) != 4:
                continue
            fn = entry[3]
            if type(fn) is function_type and id(fn) not in fn_kept:
                fn_kept[id(fn)] = (
                    fn, fn.__code__, fn.__defaults__, fn.__kwdefaults__,
                    "%s.%s" % (exact(entry[0]), exact(entry[2])) if type(entry[2]) is str else "?",
                )

    def swapped():
        # the runner's functions touched since the last check whose code or defaults are
        # not what they were (by identity, built-in reads only)
        ids, touched_ids[0] = touched_ids[0], set()
        found = []
        for i in ids:
            kept = fn_kept.get(i)
            if kept is None:
                continue
            fn, code, dflt, kw, where = kept
            if fn.__code__ is not code or fn.__defaults__ is not dflt or (
                fn.__kwdefaults__ is not kw
            ):
                found.append("runner function %s was given other code or defaults" % (where,))
        return found

    def take_watch(state):
        take_functions(state)
        if tag_view is None or type(state) is not tuple:
            return
        groups = {}
        mine = pglobals[0]  # the plugin's own names: changed() holds each to its object
        for entry in state:
            if type(entry) is not tuple or len(entry) != 4:
                return  # not the plugin's own snapshot: the plugin checks its hot list
            d = entry[1]
            if d is mine:
                continue
            real = d if type(d) is dict else None
            if type(d) is proxy_type:  # a class's own namespace
                got = referents(d)
                real = got[0] if len(got) == 1 and type(got[0]) is dict else None
            if real is None or type(entry[2]) is not str:
                always.append(entry)
                continue
            group = groups.get(id(real))
            if group is None:
                group = groups[id(real)] = (real, [], {})
            group[1].append(entry)
            group[2][entry[2]] = entry[3]
        for real, entries, snap in groups.values():
            watched.append((real, tuple(entries), snap))
            views.append(tag_view(real))
            tags.append(None)

    def as_taken(real, snap):
        # every entry taken from this dict holds the very object it held (by identity and
        # built-in types only: a key of a str subclass is not compared, it fails)
        n = 0
        for k, v in dict.items(real):
            if type(k) is not str:
                return False
            s = dict.get(snap, k, as_taken)
            if s is as_taken:
                continue
            if s is not v:
                return False
            n += 1
        return n == len(snap)

    def written(box):
        # The entries the plugin must check now, then None (no None: the plugin checks
        # what it did before this hook could tell, its hot list).
        now = list(map(third, views))
        if now != tags:
            for i, t in enumerate(now):
                if t != tags[i]:
                    real, entries, snap = watched[i]
                    try:
                        same = as_taken(real, snap)
                    except Exception:  # written while read (a thread): read next time
                        same = False
                    if same:
                        tags[i] = t  # the tag read before the entries: a write since shows
                    else:
                        box.extend(entries)
        box.extend(always)
        box.append(None)

    def breach():
        try:
            return changed()
        except Exception as exc:
            return "the guard plugin's state is broken (%s)" % (type(exc).__name__,)

    def plain(values, kinds):
        # what the plugin's containers may hold: objects whose hashing and comparing is the
        # built-in types' own (candidate code may add to them; this hook must not run it)
        return all(type(v) in kinds for v in values)

    def changed():
        # Reads the plugin's state by identity and by built-in types only: nothing here may
        # call a method the candidate wrote (see the builtins bound at the top).
        g = pglobals[0]
        names = sealed["names"]
        if type(g) is not dict or len(g) != len(names):
            return "the guard plugin's namespace changed"
        tag = sealed["g"]
        now = tag[0][3] if tag is not None else None
        if now is None or now != tag[1]:  # written since it was last found as sealed
            for (k, v), (k0, v0) in zip(dict.items(g), names):
                if k is not k0 or v is not v0:
                    return "the guard plugin's %s was replaced" % (exact(k0),)
            if tag is not None:
                tag[1] = now
        # each function's code and defaults, each the very object sealed: read again only
        # when an attribute write touched one of them since the last check (see swapped)
        if not touched_ids[0].isdisjoint(sealed["fn_ids"]):
            for fn, code, dflt, kw in sealed["fns"]:
                if fn.__code__ is not code or fn.__defaults__ is not dflt or (
                    fn.__kwdefaults__ is not kw
                ):
                    return "the guard plugin's %s was changed" % (fn.__name__,)
        for name, key in (("_WRAPPED", "wrapped"), ("_MODCODES", "paths")):
            now, before = g[name], sealed[key]
            if type(now) is not dict or not plain(now, (int, str)):
                return "the guard plugin's %s lost or changed an entry" % (name,)
            for k, v in before.items():
                if now.get(k) is not v:
                    return "the guard plugin's %s lost or changed an entry" % (name,)
            if len(now) != len(before):
                if name == "_MODCODES" and not all(
                    same_codes(p, c) for p, c in now.items() if p not in before
                ):
                    return "the guard plugin's record of compiled test code was edited"
                sealed[key] = dict(now)
        unseen, made = g["_UNSEEN"], g["_REPORTED"]
        if type(unseen) is not set or type(made) is not set or not (
            plain(unseen, (str,)) and plain(made, (str,))
        ):
            return "the guard plugin's record of tests was edited"
        if not sealed["unseen"] <= unseen:
            return "the guard plugin's tests seen not running their code were dropped"
        sealed["unseen"] = set(unseen)
        if not made <= noted:
            return "the guard plugin's reports were marked made without being made"
        last = g["_LAST"]
        if type(last) is not list or not last or type(last[0]) is not float or not (
            last[0] <= monotonic()
        ):
            return "the guard plugin's check clock was moved"
        pm, sess = sealed["pm"], sealed["session"]
        if not readable(pm) or not readable(sess):
            return "pytest's plugin manager or session was given attributes of its own kind"
        if pm.hook is not sealed["hook"] or type(sess) is not sealed["kind"]:
            return "pytest's hook relay or session class was replaced"
        if type(pm.hook) is not sealed["hook_kind"] or type(pm) is not sealed["pm_kind"]:
            return "pytest's hook relay or plugin manager was given another class"
        for caller, impls, kind in sealed["callers"]:
            if type(caller) is not kind or not readable(caller):
                return "a pytest hook caller was replaced"
            # the list the caller calls from (pluggy's own slot, read by its descriptor),
            # else by its class's method: an instance attribute is not asked
            slot = slots.get(kind)
            now = slot.__get__(caller, kind) if slot is not None else kind.get_hookimpls(caller)
            if type(now) is not list:
                return "a pytest hook caller was replaced"
            if len(now) != len(impls) or not all(map(is_, now, impls)):
                return "a pytest hook implementation was added or removed after collection"
        why = odd_runner_mod()
        if why is not None:
            return why
        # the session's own attributes: read again only when its dict was written since
        # they were last found clean (its version tag; the dict itself held, so the view
        # stays on it, and a dict put in its place is read)
        attrs, held = vars(sess), sealed["sess"]
        tag = held[1][3] if held[1] is not None and attrs is held[0] else None
        if tag is None or tag != held[2]:
            for k, v in list(dict.items(attrs)):
                if type(k) is not str:
                    return "pytest's session has an attribute named by an object"
                if callable(v) and callable(getattr(type(sess), k, None)) and k[:2] != "__":
                    return "pytest's session has %s set over its method" % (k,)
            held[2] = tag
        return None

    def guard_event(event, args):
        f = getframe(3)  # the code that raised the event (beneath the hook)
        if event == "harness.guard.loaded":
            if not loaded and pglobals and f.f_globals is pglobals[0] and (
                exact(f.f_code.co_name) == "<module>" and exact(f.f_code.co_filename) == plugin
            ):
                take_loaded(pglobals[0])
            return
        if event == "harness.guard.codes":
            if loaded and f.f_code is loaded["record"] and len(args) == 2:
                shadow.setdefault(args[0], {}).update((id(c), c) for c in args[1])
            return
        if event == "harness.guard.check":
            why = breach() if sealed else None
            if why is not None:
                state[1] += 1
                out({"k": "x", "pid": pid(), "what": why})
            elif views and args and type(args[0]) is list:
                written(args[0])
            for what in swapped():
                if what not in noted_swaps:
                    noted_swaps.add(what)
                    state[1] += 1
                    out({"k": "x", "pid": pid(), "what": what})
            return
        if event == "harness.guard.early":
            if early and f.f_code is early[0]:
                out({"k": "x", "pid": pid(), "what": "candidate module %s imported before "
                     "the test run started (refused)" % (args[0],)})
            return
        if event == "harness.guard.register":
            ok = (not emitter and f.f_code.co_filename == plugin
                  and f.f_code.co_name == "<module>" and args
                  and getattr(args[0], "co_filename", None) == plugin)
            if ok:
                emitter.append(args[0])
                pglobals.append(f.f_globals)
                mods = _sys.modules
                try:
                    pyt.extend((mods["_pytest.main"].wrap_session.__code__,
                                mods["_pytest.runner"].runtestprotocol.__code__,
                                mods["_pytest.nodes"].Node.nodeid.fget))
                except (KeyError, AttributeError):
                    pass
                found = [here, _sys.prefix, _sys.base_prefix, _sys.exec_prefix,
                         _sys.base_exec_prefix, _os.path.dirname(_os.__file__)]
                for name in ("_pytest", "pluggy"):
                    where = getattr(mods.get(name), "__file__", None)
                    if where:
                        found.append(_os.path.dirname(_os.path.dirname(where)))
                for h in found:
                    h = norm(h)
                    if h not in ("/", "") and h + "/" not in homes:
                        homes.append(h + "/")
                return
        elif emitter and f.f_code is emitter[0] and args and type(args[0]) is dict:
            g = getframe(4)
            if exact(g.f_code.co_filename) == plugin:
                rec = clean(args[0])
                why = vet(rec, g)
                kind = rec.get("k")
                if why is None and kind == "r":
                    raised.add(rec.get("node"))  # kept here, where no candidate code reaches
                    return
                if why is None and kind == "start" and not known_kinds:
                    take_kinds()  # before any conftest.py or candidate module loads
                if why is None and kind == "t" and rec.get("when") == "call":
                    node = rec.get("node")
                    if node in raised:
                        raised.discard(node)
                        if rec.get("o") == "passed":
                            why = ("test %s raised in its call, but its report says it passed"
                                   % (node,))
                if why is None and kind == "n":
                    why = seal_plugin(session_frame[0])
                elif why is None and kind == "end" and sealed:
                    why = breach()
                    for what in swapped():
                        if what not in noted_swaps:
                            noted_swaps.add(what)
                            state[1] += 1
                            out({"k": "x", "pid": pid(), "what": what})
                elif why is None and kind == "x":
                    noted.add(rec.get("what"))
                if why is None:
                    out(rec, hold=kind == "t")
                    return
                state[1] += 1
                out({"k": "x", "pid": pid(), "what": why})
                return
            f = g
        state[1] += 1
        out({"k": "x", "pid": pid(), "what": "guard record (%s) from code not the guard's"
             % event, "where": "%s:%d" % (exact(f.f_code.co_filename), f.f_lineno)})

    raised = set()  # tests whose call raised (pytest-style), until their call is reported

    # Objects of the runner this hook reads attributes of (an item's node id, the session,
    # the plugin manager): a class the candidate made (``obj.__class__ = Mine``) or a key of
    # its own in the object's dict (a str subclass hashing like a name) would run its code
    # in the lookup. Read only objects of classes the run had before any candidate code ran,
    # or whose own attributes are code of files the run cannot change, holding plain names.
    known_kinds = set()  # every class there was when the run started (the start record)
    kinds_ok = {}
    function_type = type(exact)
    slot_types = tuple(
        type(d)
        for d in (
            type.__dict__["__dict__"], type.__dict__["__basicsize__"],
            object.__dict__["__init__"], str.__dict__["join"],
        )
    )

    def take_kinds():
        todo = [object]
        while todo:
            c = todo.pop()
            if c not in known_kinds:
                known_kinds.add(c)
                todo.extend(type.__subclasses__(c))

    def plain_meta(kind):
        # a class whose metaclass is ``type`` or one the run had before candidate code ran
        # (pytest's ``NodeMeta``): asking it for its attributes runs no candidate code
        meta = type(kind)
        return meta is type or (type(meta) is type and meta in known_kinds)

    def own_kind(kind):
        for c in kind.__mro__:
            if not plain_meta(c):
                return False
            if c in known_kinds:
                continue
            for k, v in c.__dict__.items():
                t = type(v)
                if type(k) is not str:
                    return False
                if among(t, plain_types) or among(t, slot_types) or t is tuple or t is frozenset:
                    continue
                if t is staticmethod or t is classmethod:
                    fns = (v.__func__,)
                elif t is property:
                    fns = tuple(x for x in (v.fget, v.fset, v.fdel) if x is not None)
                else:
                    fns = (v,)
                for fn in fns:
                    if type(fn) is not function_type or not trusted(fn.__code__.co_filename):
                        return False
        return True

    def readable(obj):
        kind = type(obj)
        if not plain_meta(kind):
            return False
        ok = kinds_ok.get(kind)
        if ok is None:
            ok = kinds_ok[kind] = kind in known_kinds or own_kind(kind)
        if not ok:
            return False
        try:
            own = object.__getattribute__(obj, "__dict__")  # a class that passed: its own
        except AttributeError:
            return True  # no attributes of its own
        return type(own) is dict and all(map(is_, map(type, own), repeat(str)))

    def clean(rec):
        # the plugin's record as plain data: the candidate can reach the dict on its way
        # here (a frame of the plugin's) and put its own objects in it
        kept = {}
        for k, v in dict.items(rec):
            if type(k) is str:
                kind = type(v)
                if kind is str or kind is int or kind is bool or v is None:
                    kept[k] = v
                elif issubclass(kind, str):
                    kept[k] = exact(v)
                else:
                    kept[k] = "?"
        return kept

    def hook(event, args):
        tid = get_ident()
        if inside[0] == tid:
            return  # raised by this hook's own work, in this thread
        # One thread at a time: an event another thread raises while this hook runs waits
        # its turn and is judged then. (A flag shared by all threads let a candidate thread
        # that saw the collector stop, below, take every frame of the process unjudged and
        # walk into this hook's own: a way to its key.)
        # Re-entrant: an event this thread raises before it is marked inside (the
        # collector's callbacks, candidate code, may run at any allocation until the
        # collector is stopped below) is judged there and then, not waited for.
        lock = locks[0]
        lock.acquire()
        before = inside[0]
        inside[0] = tid
        try:
            # No collection while the hook runs: the collector runs callbacks and
            # finalizers, code the candidate wrote, which could walk up to this hook's
            # frames (red team round twenty-one reached pytest's frames so from a
            # collector callback).
            was = gc_enabled()
            if was:
                gc_disable()
            try:
                if (event == "object.__setattr__" or event == "object.__delattr__") and args:
                    touched_ids[0].add(id(args[0]))
                judge_event(event, args)
            finally:
                if was:
                    gc_enable()
        finally:
            inside[0] = before
            lock.release()

    def judge_event(event, args):
        if state[0]:
            return
        if event.startswith("harness.guard"):
            state[0] = True
            try:
                guard_event(event, args)
            except Exception:
                pass
            finally:
                state[0] = False
            return
        if event == "import" and _sys.pycache_prefix is not prefix:
            # where the importer reads compiled modules: only beside their sources, which
            # the run cannot write for the image's and the verifier's files; put back
            # before this import reads anything, and noted
            _sys.pycache_prefix = prefix
            if state[1] < 50:
                state[0] = True
                try:
                    state[1] += 1
                    out({"k": "x", "pid": pid(), "what": "the importer's bytecode cache "
                         "was moved (sys.pycache_prefix)"})
                except Exception:
                    pass
                finally:
                    state[0] = False
        if state[1] >= 50:
            return
        anyone = False
        if event == "object.__getattr__":
            if len(args) < 2 or type(args[1]) is not str or args[1] not in frames:
                return
        elif event == "open" or event in changes:
            # the run cannot change a locked file (the sandbox denies it); trying is noted;
            # so is reading a process's environment or memory (where secrets were)
            # (an event's arguments are the caller's objects: only their characters count)
            target = args[0] if args else None
            kind = type(target)
            if kind is not str and kind is not bytes:
                if issubclass(kind, str):
                    target = exact(target)
                elif issubclass(kind, bytes):
                    target = b"".join((target,))
                else:
                    return
            if type(target) is bytes:
                target = target.decode("utf-8", "surrogateescape")
            try:
                full = norm(target if target.startswith("/") else getcwd() + "/" + target)
            except Exception:
                full = target
            if event == "open" and full.startswith("/proc/") and full.endswith(private):
                anyone = True  # from any frame: a borrowed file name does not excuse it
            else:
                if event == "open":
                    mode, flags = (args[1], args[2]) if len(args) > 2 else (None, 0)
                    if not (type(mode) is str and any(c in mode for c in "wax+")) and not (
                        type(flags) is int and flags & writes
                    ):
                        return
                if full not in locked:
                    return
        elif event == "object.__setattr__" or event == "object.__delattr__":
            what = args[1] if len(args) > 1 else None
            what = exact(what) if isinstance(what, str) else None
            target = args[0] if args else None
            if what == "__doc__":
                return  # a docstring decides nothing (a class's own, set at import)
            if what == "__class__" and (id(target) in runner_mods or runner_kind(target)):
                # the runner's modules or objects given another class (``__getattribute__``
                # serving a lenient ``raises``, a hook relay answering ``dict`` for a hook):
                # from any frame, ``mock.patch.object`` doing the write in a standard-library
                # one (red team round thirty-nine)
                anyone = True
            elif what == "__class__" and own_module(target):
                return  # a candidate module giving itself a class (module properties)
            elif what in ("__name__", "__qualname__", "__module__") and own_class(target):
                return  # a candidate class naming itself
        elif event == "os.exec":
            # The test process replaced by another program: its run would end unreported
            # while the program does what it likes with the run's descriptors.
            anyone = pid() == me
            if not anyone:
                return
        elif event == "ctypes.dlsym":
            # what lets a process read its memory or undo the guard's non-dumpable state
            anyone = len(args) > 1 and type(args[1]) is str and args[1] in native
        elif event not in watch and event not in strict and not event.startswith("ctypes."):
            return
        state[0] = True
        try:
            f = getframe(2)  # beneath this function and the hook
            name = exact(f.f_code.co_filename)
            if event in strict:
                anyone = not vouched(f.f_code, event)
            elif event.startswith("ctypes.") and not anyone:
                anyone = not own_file(f.f_code)  # rare in an honest run: worth a compile
            elif event == "sys._getframe" or event == "object.__getattr__":
                # A standard-library function that hands frames to its caller asks for them
                # under its own file: the frames go to the code that called it (red team
                # round twenty-two reached a unittest test's outcome so, from the code the
                # test called, through ``inspect.currentframe().f_back``).
                g = f
                while g is not None and (
                    exact(g.f_code.co_filename), exact(g.f_code.co_name)
                ) in frame_apis:
                    g = g.f_back
                if g is not f and g is not None:
                    f, name = g, exact(g.f_code.co_filename)
            if anyone or name in cand or (
                name.startswith("<") and not name.startswith("<frozen")
            ):
                state[1] += 1
                out({"k": "x", "pid": pid(), "what": "audit: " + event,
                     "where": "%s:%d" % (name, f.f_lineno)})
        except Exception:
            pass
        finally:
            state[0] = False

    _sys.addaudithook(hook)


_tolerant_faulthandler()
_install()
del _install, _register, _wipe, _undumpable, _own_domain, _tolerant_faulthandler
del _dict_tags, _normpath, _realpath, _posix
'''

_PLUGIN = r'''"""harness guard plugin: a canary test; every outcome streamed to the harness."""
import json
import os
import secrets
import sys
import threading
import types
import unittest  # watched like the runner: its assertions decide unittest-style tests
from time import monotonic as _monotonic

import pytest

_Frozen = types.MappingProxyType

# The file system as the checks read it: the system calls themselves, taken before any other
# code runs. ``os.access``, ``os.stat`` and ``os.path``'s helpers are looked up in ``os`` at
# each call, where code under test may rebind them: ``os.access`` answering False made a
# module the candidate wrote under /tmp a file "the run cannot change", and its function
# stood over ``Function.runtest`` (found while fixing red team round thirty-eight's false
# verdicts). A test that patches ``open`` or ``os.path.exists`` no longer misleads them.
# @@paths@@: _PATHS goes here
_OPEN = open


def _dirname(path):
    return path.rsplit("/", 1)[0] or "/"


def _is_file(path):
    try:
        return _STAT(path).st_mode & _S_IFMT == _S_IFREG
    except OSError:
        return False
_NAME = "harness_canary_" + os.environ.get("HARNESS_CANARY", "unset")
_RUN = "%d-%s" % (os.getpid(), secrets.token_hex(4))
_AUDIT = sys.audit


def _emit(rec):
    # Written by the guard's audit hook (sitecustomize), which alone holds the stream's
    # key and its descriptor, and takes records only from this code, called by this file.
    rec["run"] = _RUN
    _AUDIT("harness.guard", rec)


_AUDIT("harness.guard.register", _emit.__code__)


def _guard_config():
    try:
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "guard.json")) as fh:
            cfg = json.load(fh)
    except (OSError, ValueError):
        cfg = {}
    ws = cfg.get("workspace", "/workspace")
    return (
        ws,
        frozenset(os.path.join(ws, p) for p in cfg.get("candidate", ())),
        frozenset(os.path.join(ws, p) for p in cfg.get("locked", ())),
    )


_WS, _CANDIDATE, _LOCKED = _guard_config()
# ``re`` and ``_sre``: pytest's own checks (``raises``/``warns`` with ``match=``) call
# ``re.search``, which candidate code rebound to match any message (red team round
# twenty-eight).
_WATCHED = ("_pytest", "pytest", "pluggy", "unittest", "builtins", "re", "_sre", __name__)
# Checked before every report is made (the rest at most once a second): what makes,
# carries and judges a test's report, and the builtins tests call.
_HOT = ("_pytest.runner", "_pytest.reports", "_pytest.python", "_pytest.unittest",
        "_pytest.outcomes", "_pytest.python_api", "_pytest._code.code.ExceptionInfo", "pluggy",
        "unittest.case", "builtins")
# ... and the functions of ``re`` and ``_sre`` that ``ExceptionInfo.match`` calls, not their
# classes or internals (about 500 bindings, checked at most once a second like the rest).
_HOT_MODULES = frozenset(("re", "_sre"))
# State pytest itself rebinds during a run (the debugger's and the assertion rewriter's).
# What only shapes a failure's message, which a project's own conftest or tests set to plain
# values (``maxDiff = None``, longer assertion diffs): any plain value may stand there (red
# team round thirty-three: both were called tampering, so such a case could not validate).
_PARTIAL = __import__("functools").partial
_DISPLAY = frozenset(
    (
        "unittest.case.TestCase.maxDiff",
        "unittest.case.TestCase.longMessage",
        "unittest.util._MAX_LENGTH",
        "unittest.util._PLACEHOLDER_LEN",
        "unittest.util._MIN_BEGIN_LEN",
        "unittest.util._MIN_END_LEN",
        "unittest.util._MIN_COMMON_LEN",
        "unittest.util._MIN_DIFF_LEN",
        "_pytest.assertion.truncate.DEFAULT_MAX_LINES",
        "_pytest.assertion.truncate.DEFAULT_MAX_CHARS",
        "_pytest._io.saferepr.DEFAULT_REPR_MAX_SIZE",
    )
)
_REBOUND = frozenset(
    (
        "_pytest.config.Config._getini_unknown_type",
        "_pytest.debugging.pytestPDB._pluginmanager",
        "_pytest.debugging.pytestPDB._config",
        "_pytest.debugging.pytestPDB._saved",
        "_pytest.debugging.pytestPDB._recursive_debug",
        "_pytest.debugging.pytestPDB._wrapped_pdb_cls",
        "_pytest.assertion.util._reprcompare",
        "_pytest.assertion.util._config",
        "_pytest.assertion.util._assertion_pass",
        # set once, the first time they are needed (``global`` in the runner's own code)
        "_pytest.doctest.RUNNER_CLASS",
        "_pytest.doctest.CHECKER_CLASS",
        "unittest.mock.file_spec",
        "unittest.mock.open_spec",
        "unittest.signals._interrupt_handler",
    )
)


def _snapshot(seen, out):
    for name, mod in list(sys.modules.items()):
        if name in seen or mod is None or not name.split(".")[0] in _WATCHED:
            continue
        seen.add(name)
        d = getattr(mod, "__dict__", None)
        if not isinstance(d, dict):
            continue
        for key, value in list(d.items()):
            if not key.startswith("__") and name + "." + key not in _REBOUND:
                out.append((name, d, key, value))
            if name == "builtins":
                continue  # the builtin types cannot be changed
            if isinstance(value, type) and getattr(value, "__module__", None) == name:
                owner = name + "." + key
                for ckey, cvalue in list(value.__dict__.items()):
                    if ckey in ("__dict__", "__weakref__", "__doc__", "__abstractmethods__"):
                        continue
                    if owner + "." + ckey not in _REBOUND:
                        out.append((owner, value.__dict__, ckey, cvalue))


# Taken when pytest imports this plugin (``-p``): before conftests, entry points and tests,
# so before any candidate code has run.
# The code of every module pytest compiles (test modules, conftests: assertion rewriting),
# as it compiles it: a test function must run code of its own module, as compiled.
_MODCODES = {}


def _record(path, code):
    out = []
    _codes(code, out)
    real = _realpath(str(path))
    codes = _MODCODES.setdefault(real, {})
    if type(codes) is dict:  # frozen once collection is done: no code added under its name
        codes.update((id(c), c) for c in out)
        _AUDIT("harness.guard.codes", real, tuple(out))  # the hook keeps its own copy


def _rewrite_test(fn, config):
    stat, code = _REAL_REWRITE(fn, config)
    _record(fn, code)
    return stat, code


def _read_pyc(source, pyc, trace=lambda x: None):
    # A cached rewrite is bytecode a file holds, not what the source compiles to (an
    # outside red team planted one under a ``sys.pycache_prefix`` of its own): never read;
    # pytest rewrites the module from its source (the sandbox writes no caches anyway).
    return None


import _pytest.assertion.rewrite as _rw  # noqa: E402

_REAL_REWRITE, _REAL_READ_PYC = _rw._rewrite_test, _rw._read_pyc
_rw._rewrite_test, _rw._read_pyc = _rewrite_test, _read_pyc

# unittest swallows its private ``_ShouldStop`` in every test part (it means "stop, failfast
# asked for it", which pytest's unittest items never ask): code a test calls could raise it
# to end the test before its assertions, recorded a success (red team round twenty-three).
# Under pytest nothing raises it legitimately, so nothing is swallowed as it any more: an
# empty tuple matches no exception, and the raise becomes the test's error.
import unittest.case as _uc

_uc._ShouldStop = ()

# ``re`` keeps the patterns it compiled in dicts keyed by (type, pattern, flags): one
# compiled from another pattern, put under a key a test matches with, made ``pytest.raises``'
# ``match=`` pass on any message (red team round thirty-six: ``re._cache[(str, "date", 0)] =
# re.compile("")``). A cached pattern is taken only if it is what its key compiles to: its
# own pattern and flags (a pattern whose flags its own text may set is compiled again to
# compare); ``re`` never caches under a compiled pattern.
import re as _re

_PATTERN = _re.Pattern
_RE_COMPILE = _re._compiler.compile
_RE_ASCII, _RE_UNICODE = int(_re.ASCII), int(_re.UNICODE)


def _re_cached(key, p):
    """Tell whether ``p`` is what ``re`` compiles ``key`` (type, pattern, flags) to."""
    if type(key) is not tuple or len(key) != 3 or type(p) is not _PATTERN:
        return False
    kind, pattern, flags = key
    if (kind is not str and kind is not bytes) or type(pattern) is not kind:
        return False
    if type(flags) is not int or type(p.pattern) is not kind or p.pattern != pattern:
        return False
    want = flags | _RE_UNICODE if kind is str and not flags & _RE_ASCII else flags
    if p.flags == want:
        return True
    if (b"(?" if kind is bytes else "(?") not in pattern:
        return False
    try:  # flags its text may set: what it compiles to, uncached
        return p.flags == _RE_COMPILE(pattern, flags).flags
    except Exception:
        return False


class _ReCache(dict):
    """``re``'s pattern cache, which hands out only what each key compiles to."""

    __slots__ = ()

    def __getitem__(self, key):
        p = dict.__getitem__(self, key)
        if _re_cached(key, p):
            return p
        _re_poisoned(self, key)
        raise KeyError(key)

    def get(self, key, default=None):
        p = dict.get(self, key, _ReCache)
        if p is _ReCache:
            return default
        if _re_cached(key, p):
            return p
        _re_poisoned(self, key)
        return default

    def pop(self, key, *default):
        p = dict.pop(self, key, _ReCache)
        if p is _ReCache:
            if default:
                return default[0]
            raise KeyError(key)
        if _re_cached(key, p):
            return p
        _re_poisoned(self, key, gone=True)
        if default:
            return default[0]
        raise KeyError(key)


def _re_poisoned(cache, key, gone=False):
    if not gone:
        dict.pop(cache, key, None)
    kind = key[0] if type(key) is tuple and key else None
    if kind is str or kind is bytes:  # a str subclass's pattern is only compiled again
        _x("re's pattern cache held a pattern not compiled from its key")


_RE_CACHES = tuple(
    name for name in ("_cache", "_cache2") if type(_re.__dict__.get(name)) is dict
)
for _name in _RE_CACHES:
    setattr(_re, _name, _ReCache(_re.__dict__[_name]))
_RE_METHODS = tuple((k, v) for k, v in vars(_ReCache).items() if callable(v))


def _check_re_caches():
    for name in _RE_CACHES:
        if type(_re.__dict__.get(name)) is not _ReCache:
            _x("re.%s, its pattern cache, was replaced or given another class" % (name,))
    for k, v in _RE_METHODS:
        if _ReCache.__dict__.get(k) is not v:
            _x("the guard's check of re's pattern cache was changed")


_SEEN = set()
_STATE = []
_snapshot(_SEEN, _STATE)
_MISSING = object()


def _code_of(value):
    value = getattr(value, "__func__", value)
    return getattr(value, "__code__", None)


# The runner's own code, as it was before any other code ran: trusted as it is.
_KNOWN = {}
_KNOWN_TYPES = {}
for _owner, _d, _key, _value in _STATE:
    _c = _code_of(_value)
    if _c is not None:
        _KNOWN[id(_c)] = _c
    if isinstance(_value, type):
        _KNOWN_TYPES[id(_value)] = _value
_HOT_STATE = [e for e in _STATE if e[0].startswith(_HOT) or e[0] in _HOT_MODULES]
_COMPILED = {}
_SIMPLE = (type(None), bool, int, float, str, bytes)


def _codes(code, out):
    out.append(code)
    for c in code.co_consts:
        if isinstance(c, type(code)):
            _codes(c, out)


def _compiled(path, rewrite):
    """Every code object of ``path`` compiled as the importer (or pytest's rewriter) does."""
    key = (path, rewrite)
    if key not in _COMPILED:
        out = []
        try:
            with _OPEN(path, "rb") as fh:
                src = fh.read(8 << 20)
            if rewrite:
                import ast
                from _pytest.assertion.rewrite import rewrite_asserts

                tree = ast.parse(src, filename=path)
                rewrite_asserts(tree, src, path, _CONFIG[0] if _CONFIG else None)
                _codes(compile(tree, path, "exec", dont_inherit=True), out)
            else:
                _codes(compile(src, path, "exec", dont_inherit=True), out)
        except Exception:
            out = []
        _COMPILED[key] = out
    return _COMPILED[key]


_GUARD_HOME = os.path.realpath(os.path.dirname(os.path.abspath(__file__))).rstrip("/") + "/"


def _fixed_file(path):
    """Tell whether ``path`` is a file this run cannot have written or changed, other than the
    guard's own (its functions, set over a runner's or a test's name, would serve the run:
    ``Function.runtest = <a guard function that returns its argument>`` ran no test)."""
    if not isinstance(path, str) or not path.startswith("/"):
        return False
    real = _realpath(path)
    if real.startswith(_GUARD_HOME):
        return False
    if real == _WS or real.startswith(_WS.rstrip("/") + "/"):
        return real in _LOCKED
    return all(_unchangeable(p) for p in (real, _dirname(real)))


def _unchangeable(path):
    """Not writable here, or root's alone (sandboxed commands never run as root)."""
    try:
        st = _STAT(path)
    except OSError:
        return False
    return not _ACCESS(path, _W_OK) or (st.st_uid == 0 and not st.st_mode & 0o022)


def _own_code(code, real):
    """Tell whether ``code`` is the file ``real``'s, as pytest compiled it (or compiles it)."""
    known = _MODCODES.get(real)
    if known is not None:  # pytest compiled this file: its code is what it compiled
        return known.get(id(code)) is code
    if _realpath(code.co_filename) != real:
        return False
    for rewrite in (True, False):
        for c in _compiled(real, rewrite):
            if c.co_firstlineno == code.co_firstlineno and c.co_name == code.co_name and c == code:
                return True
    return False


_TESTS_OK = {}


def _test_ok(item):
    """Tell whether the test ``item`` runs its own module's code (deny by default).

    Its function, after any decorators from files the run cannot change, must be code of
    the module the runner collected it from, as the runner compiled it: a test function
    replaced while its module loaded (a stub, a module swapped in ``sys.modules``) fails.
    """
    fn = getattr(item, "obj", None)
    key = id(fn)
    if key in _TESTS_OK and _TESTS_OK[key][0] is fn:
        return _TESTS_OK[key][1]
    mod = getattr(item, "module", None)
    where = getattr(mod, "__file__", None)
    ok = False
    f = getattr(fn, "__func__", fn)
    if isinstance(where, str):
        real = _realpath(where)
        for depth in range(16):
            code = getattr(f, "__code__", None)
            if code is None:
                break
            if _own_code(code, real):
                ok = True
                if depth:  # reached through decorators: proven to run when it passes
                    _WRAPPED[key] = (fn, code)
                break
            if _verified(f, wrapper=True):
                inner = getattr(f, "__wrapped__", None)
                if inner is None:  # hypothesis keeps the test it wraps here
                    inner = getattr(getattr(fn, "hypothesis", None), "inner_test", None)
            else:
                inner = _trampoline(f)
            f = getattr(inner, "__func__", inner)
    if not ok:
        ok = _inherited(item, getattr(fn, "__func__", fn))
    _TESTS_OK[key] = (fn, ok)
    return ok


# What a generated signature-keeping wrapper (hypothesis's) may do: call the one function in
# its closure with its own arguments and return the result; no names, no handlers.
_TRAMPOLINE_OPS = frozenset(
    (
        "CACHE", "NOP", "RESUME", "COPY_FREE_VARS", "MAKE_CELL", "PUSH_NULL", "LOAD_DEREF",
        "LOAD_FAST", "LOAD_CONST", "KW_NAMES", "PRECALL", "CALL", "CALL_FUNCTION_EX",
        "BUILD_TUPLE", "BUILD_LIST", "BUILD_MAP", "LIST_EXTEND", "LIST_TO_TUPLE", "DICT_MERGE",
        "RETURN_VALUE",
    )
)


def _trampoline(f):
    """The function a pure trampoline ``f`` calls, else ``None``.

    Whatever it is, the test it leads to passes only if its own code was seen to start.
    """
    import dis

    code = getattr(f, "__code__", None)
    cells = getattr(f, "__closure__", None) or ()
    if code is None or len(cells) != 1 or code.co_names or code.co_exceptiontable:
        return None
    if any(not isinstance(c, _SIMPLE) for c in code.co_consts):
        return None
    if any(i.opname not in _TRAMPOLINE_OPS for i in dis.get_instructions(code)):
        return None
    try:
        target = cells[0].cell_contents
    except ValueError:
        return None
    return target if _code_of(target) is not None else None


# Tests reached through decorators: a decorator's wrapper runs what its closure holds, and
# ``__wrapped__`` is only an attribute. Such a test passes only if its own code ran.
_WRAPPED = {}


def _watch_own_code(item):
    """Arm a profile hook that notes when the test's own code starts; ``None`` if direct."""
    fn = getattr(item, "obj", None)
    entry = _WRAPPED.get(id(fn))
    if entry is None or entry[0] is not fn:
        return None
    code, seen = entry[1], []
    before = sys.getprofile()

    def profile(frame, event, arg):
        if event == "call" and frame.f_code is code:
            seen.append(True)
            sys.setprofile(before)
            threading.setprofile(before)

    sys.setprofile(profile)
    threading.setprofile(profile)
    return seen, before
def _inherited(item, fn):
    """Tell whether ``fn`` is a test the test's class or module has from a locked module.

    A test class may take its tests from a class of another test module or of a helper
    module (``tests/_base.py``), and a test module may import a test function from one (red
    team round thirty-eight's honest suites were called tampering): the function must be
    its file's own code as compiled, of a file the run cannot change, running in that
    module's namespace, and found on the test's class or in the test's module.
    """
    cls = getattr(item, "cls", None)
    code = getattr(fn, "__code__", None)
    if code is None:
        return False
    if cls is not None:
        name = getattr(fn, "__name__", None)
        if not any(vars(k).get(name) is fn for k in getattr(cls, "__mro__", ())):
            return False
    else:  # imported: never under a name the test module defines itself (a test swapped
        # for another locked file's passing one keeps the node id it had)
        test_mod = getattr(item, "module", None)
        home = getattr(test_mod, "__dict__", None)
        name = getattr(item, "originalname", None) or getattr(item, "name", None)
        if type(home) is not dict or dict.get(home, name) is not fn:
            return False
        where = _realpath(getattr(test_mod, "__file__", "") or "")
        codes = list((_MODCODES.get(where) or {}).values()) or _compiled(where, False)
        if not codes or any(c.co_name == name for c in codes):
            return False
    real = _realpath(code.co_filename)
    mod = sys.modules.get(getattr(fn, "__globals__", {}).get("__name__") or "")
    where = getattr(mod, "__file__", None)
    return (
        _fixed_file(real)
        and mod is not None
        and mod.__dict__ is fn.__globals__
        and isinstance(where, str)
        and _realpath(where) == real
        and _own_code(code, real)
    )


_GLOBALS = {}
_IS = __import__("operator").is_
_BUILTIN_NAMES = frozenset(vars(sys.modules["builtins"]))


def _module_names(mod):
    """Names the module's own code binds or reads at its top level (as pytest compiled it)."""
    real = _realpath(getattr(mod, "__file__", "") or "")
    names = set()
    for code in _MODCODES.get(real, {}).values():
        if code.co_name == "<module>":
            names.update(code.co_names)
    return names


def _snap_globals(items):
    """Keep each test module's globals as they are after collection; check what is extra."""
    for item in items:
        mod = getattr(item, "module", None)
        if mod is None or id(mod) in _GLOBALS:
            continue
        d = getattr(mod, "__dict__", {})
        _GLOBALS[id(mod)] = (mod, dict(d), tuple(d), tuple(d.values()))
        own = _module_names(mod)
        for key, value in list(d.items()):
            if own and key not in own and not key.startswith("__") and not (
                _own_binding(value) if key in _BUILTIN_NAMES else _benign(value)
            ):
                _x("test module %s has %s, set by code from %s (not its own)"
                   % (mod.__name__, key, _where(value)))


def _where(value):
    return _foreign(value) or getattr(_code_of(value), "co_filename", type(value).__name__)


def _check_globals(item):
    """A test module's names rebound, or builtins shadowed, by code not its file's own."""
    mod = getattr(item, "module", None)
    kept = _GLOBALS.get(id(mod))
    if kept is None or kept[0] is not mod:
        return
    _, before, keys, values = kept
    now = mod.__dict__
    try:
        if (
            type(now) is dict
            and len(now) == len(keys)
            and all(map(_IS, now, keys))
            and all(map(_IS, now.values(), values))
        ):
            return  # every name holds the very object it held after collection (a C loop)
    except RuntimeError:  # written while read (a thread): read one by one below
        pass
    for key, value in list(now.items()):
        old = before.get(key, _MISSING)
        if old is value or key.startswith("__"):
            continue
        if key not in _BUILTIN_NAMES and not _code_like(old):
            continue  # data: a name the module's tests may set as they run (``global``)
        if not _own_binding(value):
            _x("test module %s: %s rebound by code from %s" % (mod.__name__, key, _where(value)))


def _code_like(value):
    """Code, a class or a module: what a test calls or reaches through (not its data)."""
    return _code_of(value) is not None or isinstance(
        value, (type, types.ModuleType, types.BuiltinFunctionType)
    )


def _own_binding(value):
    """Tell whether a test module's name that held code, a class or a module may now hold
    ``value`` (deny by default): only code of a file the run cannot change, or a class made
    of such code. A builtin (``tuple`` for a helper), an object of a built-in type (a
    namespace for a module alias) or data (a shorter list for a parameter table) rebound
    there turns a strong test weak (red team round twenty). A closure or a default of any
    kind is the test's own doing when its code is its file's (a fixture's fake closing
    over ``tmp_path``: red team round thirty-two found such honest tests called tampering)."""
    if _code_of(value) is not None:
        return _verified(value, wrapper=True)
    if isinstance(value, type) and value.__flags__ & (1 << 9):  # a class Python code made
        return _benign(value)
    return False


def _check_tests(items):
    for item in items:
        if isinstance(item, pytest.Function) and not isinstance(item, _Canary):
            if not _test_ok(item):
                code = _code_of(getattr(item, "obj", None))
                _x(
                    "test %s does not run its own module's code (%s)"
                    % (item.nodeid, getattr(code, "co_filename", "no code"))
                )


def _verified(value, wrapper=False):
    """Tell whether the function ``value`` runs only its own file's code.

    Deny by default: its code must be the runner's own as loaded before any other code ran,
    or equal to the code its file compiles to, where that file is one this run cannot
    change, in the module the file defines, with no closure and only constant defaults
    (``wrapper``: any closure and defaults, a wrapper's or a test's own fake's).
    Code compiled under a borrowed file name, or rebuilt around other globals, fails.
    """
    fn = getattr(value, "__func__", value)
    code = getattr(fn, "__code__", None)
    if code is None:
        return False
    if _KNOWN.get(id(code)) is code:
        return True
    if not wrapper and getattr(fn, "__closure__", None) is not None:
        return False
    defaults = (*(fn.__defaults__ or ()), *(fn.__kwdefaults__ or {}).values())
    if not wrapper and any(not isinstance(d, _SIMPLE) for d in defaults):
        return False
    path = code.co_filename
    if not _fixed_file(path):
        return False
    # The module whose namespace the function runs in (``functools.wraps`` copies the
    # wrapped test's ``__module__`` onto mock's and unittest's skip wrappers: only a name).
    name = fn.__globals__.get("__name__")
    mod = sys.modules.get(name) if isinstance(name, str) else None
    where = getattr(mod, "__file__", None)
    if mod is None or mod.__dict__ is not fn.__globals__ or not isinstance(where, str):
        return False
    if _realpath(where) != _realpath(path):
        return False
    return _own_code(code, _realpath(path))  # not cached: a cache is candidate-writable


def _benign(value, depth=0):
    """Tell whether ``value``, set over a runner attribute, may stand there (deny by default).

    A function must run its own file's code (:func:`_verified`); a class, or an object of
    a class, must be one the runner had before any other code ran, a built-in one, or one
    whose every method runs code of a file the run cannot change.
    """
    if isinstance(value, _SIMPLE) or depth > 3:
        return depth <= 3
    if _code_of(value) is not None:
        return _verified(value)
    inner = getattr(value, "func", None) or getattr(value, "__wrapped__", None)
    if inner is not None and inner is not value:
        return _benign(inner, depth + 1)
    kind = value if isinstance(value, type) else type(value)
    if id(kind) in _KNOWN_TYPES or not kind.__flags__ & (1 << 9):  # known, or not a heap type
        return _foreign(value) is None
    for member in vars(kind).values():
        fn = getattr(member, "fget", None) or member
        if _code_of(fn) is not None and not _verified(fn, wrapper=True):
            return False
    return _foreign(value) is None
_REPORTED = set()
_LAST = [0.0]


def _x(what):
    if what not in _REPORTED and len(_REPORTED) < 50:
        _REPORTED.add(what)
        _emit({"k": "x", "what": what})


def _foreign_file(name):
    if not isinstance(name, str):
        return None
    if name in _CANDIDATE or (name.startswith("<") and not name.startswith("<frozen")):
        return name
    return None


def _foreign(value, depth=0):
    """Where ``value`` comes from when that is candidate code or code without a file."""
    if depth > 3 or value is None:
        return None
    fn = getattr(value, "__func__", value)
    code = getattr(fn, "__code__", None)
    if code is not None:
        return _foreign_file(code.co_filename)
    inner = (
        getattr(value, "func", None)
        or getattr(value, "__wrapped__", None)
        or getattr(value, "fget", None)
    )
    if inner is not None and inner is not value:
        return _foreign(inner, depth + 1)
    kind = value if isinstance(value, type) else type(value)
    mod = sys.modules.get(getattr(kind, "__module__", "") or "")
    where = getattr(mod, "__file__", None)
    if where is None and kind.__module__ not in ("builtins",) and not isinstance(value, type):
        return None
    if where is None and isinstance(value, type) and kind.__module__ not in sys.modules:
        return "<%s>" % kind.__module__
    return _foreign_file(where)


# The runner's own packages: what they hold decides every test, so nothing may stand in for
# it but code a plugin or a locked file of the run added (a fixture's patch, a plugin's
# wrapper). A plain value, a builtin, the runner's own code under another name or a class of
# the standard library each turned a check off while it counted as harmless (red team round
# thirty-one: ``approx``'s tolerance set to 1e9, ``ExceptionInfo.match = id``,
# ``match = exconly``, ``RaisesContext = contextlib.suppress``,
# ``TestCase.assertEqual = print``).
_RUNNER_ROOTS = frozenset(("_pytest", "pytest", "pluggy", "unittest"))


def _runner_homes():
    homes = []
    for mod in ("_pytest", "pytest", "pluggy"):
        where = getattr(sys.modules.get(mod), "__file__", None)
        if where:
            homes.append(os.path.realpath(os.path.dirname(where)).rstrip("/") + "/")
    return tuple(homes), os.path.realpath(os.path.dirname(os.__file__)).rstrip("/") + "/"


_HOMES, _STDLIB = _runner_homes()


def _added_file(path):
    """A file of a plugin or a locked file of the run: not the runner's, not the standard
    library's (whose code the runner did not have there before), and one the run cannot
    change."""
    if not _fixed_file(path):
        return False
    real = _realpath(path)
    if real.startswith(_HOMES):
        return False
    if real.startswith(_STDLIB):
        rest = real[len(_STDLIB):]
        return "site-packages/" in rest or "dist-packages/" in rest
    return True


def _added_by_run(value):
    """Tell whether ``value``, set over the runner's own attribute, may stand there (deny by
    default): a function of a plugin's or a locked file's own code, not the runner's, or a
    class, or an object of a class, of such a file whose every method is its file's own."""
    code = _code_of(value)
    if code is not None:
        return id(code) not in _KNOWN and _added_file(code.co_filename) and _verified(value)
    kind = value if isinstance(value, type) else type(value)
    if not kind.__flags__ & (1 << 9) or id(kind) in _KNOWN_TYPES:
        return False  # built-in, or the runner's own class
    mod = sys.modules.get(getattr(kind, "__module__", None) or "")
    return _added_file(getattr(mod, "__file__", None)) and _benign(value)


def _library_may_hold(value, was, depth=0):
    """Tell whether ``value``, set over a builtin or an attribute of ``re`` that held
    ``was``, may stand there: a test's patch (its own code, a mock), never a plain value,
    another builtin or the library's own code under another name (``all = any`` turns a
    check off), nor a wrapper of one (``partial(any)``: red team round thirty-three); a
    wrapper of the very object it replaces (``partial(open, encoding=...)``) may."""
    if value is was:
        return depth > 0
    if depth > 3:
        return False
    inner = _inner(value)
    if inner is not None:
        return _library_may_hold(inner, was, depth + 1)
    code = _code_of(value)
    if code is not None:  # a test's fake may close over its locals (see _own_binding)
        return id(code) not in _KNOWN and _verified(value, wrapper=True)
    if isinstance(value, _SIMPLE):
        return False
    kind = value if isinstance(value, type) else type(value)
    if not kind.__flags__ & (1 << 9):
        return False  # a builtin function, class or object of a built-in type
    return _benign(value)


# What a test puts over the builtins that only print and ask (red team round thirty-six:
# ``monkeypatch.setattr(builtins, "print", lines.append)``, ``input`` answered by a dict's
# ``get``, called tampering): a method of an object (a list, a dict, an in-memory file), by
# its name. Over no builtin whose answer a check reads: ``isinstance = {}.get`` answers
# every class.
_TEST_SINKS = {
    ("builtins", "print"): frozenset(
        ("append", "extend", "add", "appendleft", "write", "writelines", "put", "put_nowait")
    ),
    ("builtins", "input"): frozenset(
        ("get", "__getitem__", "pop", "popleft", "__next__", "readline")
    ),
}
_BOUND_BUILTINS = (types.BuiltinMethodType, types.MethodWrapperType)


def _test_sink(owner, key, value):
    names = _TEST_SINKS.get((owner, key))
    if names is None or type(value) not in _BOUND_BUILTINS:
        return False
    bound = value.__self__
    if bound is None or isinstance(bound, (types.ModuleType, type)):
        return False  # a builtin function (``print = input``), a class's (``dict.fromkeys``)
    return value.__name__ in names


def _inner(value):
    """What a ``functools.partial`` calls (a mock, which makes up any attribute asked of
    it, is not asked)."""
    if isinstance(value, _PARTIAL):
        return _PARTIAL.__dict__["func"].__get__(value)
    return None


def _check_state(entries=None):
    for owner, d, key, value in _STATE if entries is None else entries:
        now = d.get(key, _MISSING)
        if now is value:
            continue
        root = owner.split(".", 1)[0]
        if root == __name__:
            continue  # the plugin's own names: the guard's hook holds each to its object
        if now is _MISSING:
            _x("runner attribute deleted: %s.%s" % (owner, key))
            continue
        if root in _RUNNER_ROOTS:
            ok = _added_by_run(now) or (
                owner + "." + key in _DISPLAY and isinstance(now, _SIMPLE)
            )
        else:
            ok = _library_may_hold(now, value) or _test_sink(owner, key, now)
        if not ok:
            _x("runner attribute %s.%s replaced by %s" % (owner, key, _what(now)))


def _what(value):
    if _code_of(value) is None:
        kind = value if isinstance(value, type) else type(value)
        if isinstance(value, _SIMPLE):
            return "a plain value (%s)" % type(value).__name__
        if not kind.__flags__ & (1 << 9):
            return "a built-in %s" % (getattr(value, "__name__", None) or kind.__name__,)
        name = "%s.%s" % (getattr(kind, "__module__", "?"), getattr(kind, "__qualname__", "?"))
        return ("the class %s" if kind is value else "an object of the class %s") % name
    return "code from %s" % _where(value)


def _check_hooks(config):
    pm = config.pluginmanager
    for hook_name in dir(pm.hook):
        if not hook_name.startswith("pytest_"):
            continue
        caller = getattr(pm.hook, hook_name, None)
        get = getattr(caller, "get_hookimpls", None)
        for impl in get() if get is not None else ():
            fn = getattr(impl, "function", None)
            if not _verified(fn):
                _x("hook %s implemented by code not its file's own: %s" % (hook_name, _where(fn)))


def _junit_id(config, nodeid):
    from _pytest.junitxml import mangle_test_address

    names = mangle_test_address(nodeid)
    prefix = getattr(config.option, "junitprefix", None)
    if prefix:
        names[0] = prefix + "." + names[0]
    return ".".join(names[:-1]) + "::" + names[-1] if len(names) > 1 else names[0]


class _Canary(pytest.Item):
    def runtest(self):
        raise AssertionError("harness canary")

    def repr_failure(self, excinfo, style=None):
        return "harness canary: fails on purpose (checks the runner reports failures)"

    def reportinfo(self):
        return self.path, None, _NAME


_CONFIG = []
# Each collected item as the runner made it: its class, its test object, its own names.
_ITEMS = {}


def _test_fn(item):
    obj = getattr(item, "obj", None)  # unittest's is bound to a new instance at setup
    return getattr(obj, "__func__", obj)


def _snap_items(items):
    for item in items:
        fn = _test_fn(item)
        _ITEMS[id(item)] = (item, type(item), fn, _code_of(fn))


def _check_item(item):
    """The item the runner runs is the one it collected, with the runner's own methods."""
    entry = _ITEMS.get(id(item))
    if entry is None or entry[0] is not item:
        _x("test %s was not among the items collected" % item.nodeid)
        return
    _, kind, obj, code = entry
    if type(item) is not kind:
        _x("test %s: its class was replaced (%s)" % (item.nodeid, _where(type(item))))
    now = _test_fn(item)
    if now is not obj:
        _x("test %s: its test function was replaced by %s" % (item.nodeid, _where(now)))
    elif _code_of(now) is not code:
        _x("test %s: its test function's code was replaced" % (item.nodeid,))
    for key, value in list(vars(item).items()):
        if callable(value) and callable(getattr(kind, key, None)) and not key.startswith("__"):
            _x("test %s: %s set on the item by %s" % (item.nodeid, key, _where(value)))


_STARTED = []  # the report this run said it writes, before any conftest.py was loaded


def _start(config, option):
    xml = getattr(option, "xmlpath", None)
    if xml and not getattr(option, "collectonly", False):
        _STARTED.append(os.path.abspath(xml))
        _emit({"k": "start", "junit": _STARTED[0], "dir": str(config.invocation_params.dir)})


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    # Before any conftest.py (the first code of the workspace's that runs): the run's start
    # is on the harness's stream before candidate code could keep it off, so a run of the
    # candidate's own over the same report is a second writer, never the only one.
    if not _STARTED:
        _start(early_config, early_config.known_args_namespace)


def pytest_configure(config):
    _CONFIG.append(config)
    if not _STARTED:
        _start(config, config.option)  # a pytest whose -p plugins miss the early hook
    config._harness_canary = bool(_STARTED)
    xml = getattr(config.option, "xmlpath", None)
    if _STARTED and (not xml or _normpath(xml) != _STARTED[0]):
        _x("the run's JUnit report was moved after it started (to %r)" % (xml,))


# What the runner made for each test as it collected it, and reads when it runs it: a
# parametrized test's values, a doctest's examples and the options they are checked with.
# Candidate code reaches the session's items through pytest's own import hook (red team
# round thirty-seven rewrote ``callspec.params`` in place: ``test_on_off[ON-True]`` ran with
# "on"; and a doctest example's ``want``): taken as each item is collected, before the next
# module is imported, and checked before each of its reports.
_MADE = {}
_SUBTEST = getattr(sys.modules.get("_pytest.subtests"), "SubtestReport", None)
_DIRECT_PARAM = getattr(sys.modules["_pytest.python"], "get_direct_param_fixture_func", None)


def _doctest_state(item):
    test, runner = getattr(item, "dtest", None), getattr(item, "runner", None)
    if test is None:
        return None
    examples = getattr(test, "examples", None)
    return (
        test,
        examples,
        tuple(
            (e, e.source, e.want, e.exc_msg, tuple(sorted(e.options.items())))
            for e in (examples if type(examples) is list else ())
        ),
        runner,
        getattr(runner, "_checker", None),
        getattr(runner, "optionflags", None),
    )


@pytest.hookimpl(tryfirst=True)
def pytest_itemcollected(item):
    cs = getattr(item, "callspec", None)
    params = getattr(cs, "params", None)
    _MADE[id(item)] = (
        item,
        cs,
        params,
        tuple(params.items()) if type(params) is dict else None,
        _doctest_state(item),
    )


def _check_made(item, when):
    made = _MADE.get(id(item))
    if made is None or made[0] is not item:
        return  # the canary; an item not collected is _check_item's to report
    _, cs, params, values, doc = made
    name = item.nodeid
    if getattr(item, "callspec", None) is not cs or (
        cs is not None and cs.params is not params
    ):
        _x("test %s: its parametrization was replaced after collection" % (name,))
    elif values is not None and (
        len(params) != len(values) or any(params.get(k, _MISSING) is not v for k, v in values)
    ):
        _x("test %s: its parameters were changed after collection" % (name,))
    elif values and when == "call":
        # a direct parameter reaches the test as the very value collected
        defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", None) or {}
        args = getattr(item, "funcargs", None) or {}
        for k, v in values:
            d = defs.get(k)
            direct = d and getattr(d[-1], "func", None) is _DIRECT_PARAM
            if direct and k in args and args[k] is not v:
                _x("test %s: its parameter %s was changed before it ran" % (name, k))
    if doc is not None and not _same_doctest(_doctest_state(item), doc):
        _x("test %s: its doctest examples or their options were changed" % (name,))
    if when == "call":
        _check_testcase(item)
        _check_fixture_values(item)


# Each fixture's value as its fixture made it (the runner's own setup hook returns it):
# the value a test receives must be that very object, not one swapped into the item's
# ``funcargs`` or the fixture's cache by code the tests call (the expected values a hidden
# test's fixture computed, say).
_FIXTURE_VALUES = {}


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_fixture_setup(fixturedef, request):
    outcome = yield
    if outcome.excinfo is None:
        _FIXTURE_VALUES[id(fixturedef)] = (fixturedef, outcome.get_result())


def _check_fixture_values(item):
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", None) or {}
    args = getattr(item, "funcargs", None)
    if type(args) is not dict:
        return
    for name, value in list(args.items()):
        chain = defs.get(name)
        made = _FIXTURE_VALUES.get(id(chain[-1])) if chain else None
        if made is not None and made[0] is chain[-1] and made[1] is not value:
            _x("test %s: the value of its fixture %s was replaced after the fixture made it"
               % (item.nodeid, name))


# The TestCase instance the runner made for a unittest-style test: its assertions look up
# an equality table and methods on it (red team round thirty-seven put "assertNotEqual" in
# the table for bool: the wrong value's own assertEqual passed).
_UT_DEFAULTS = dict(unittest.TestCase()._type_equality_funcs)
# unittest's own comparators and the kind each is as strict as ``==`` for: a test may register
# one for a kind of its own (``addTypeEqualityFunc(frozenset, self.assertSetEqual)``: red team
# round thirty-nine's honest suite); never another assertion (``"assertNotEqual"`` for bool).
_UT_STRICT = {
    unittest.TestCase.assertSetEqual: (set, frozenset),
    unittest.TestCase.assertListEqual: (list,),
    unittest.TestCase.assertTupleEqual: (tuple,),
    unittest.TestCase.assertDictEqual: (dict,),
    unittest.TestCase.assertMultiLineEqual: (str,),
}


def _test_own(value):
    """Code of a file the run added and cannot change (a test's), not the runner's or the
    standard library's under another name (``assertEqual = assertNotEqual``)."""
    code = _code_of(value)
    return (
        code is not None
        and id(code) not in _KNOWN
        and _added_file(code.co_filename)
        and _verified(value, wrapper=True)
    )


def _check_testcase(item):
    tc = getattr(item, "_testcase", None)
    if tc is None or not isinstance(tc, unittest.TestCase):
        return
    name, own = item.nodeid, vars(tc)
    table = own.get("_type_equality_funcs")
    if type(table) is not dict:
        _x("test %s: its TestCase's equality table was replaced" % (name,))
        table = {}
    for kind, asserter in list(table.items()):
        default = _UT_DEFAULTS.get(kind)
        if type(asserter) is str and type(default) is str and str.__eq__(asserter, default):
            continue
        if type(asserter) is str:  # a name: of the test's own method, or unittest's own
            asserter = getattr(type(tc), asserter, None)
        strict = _UT_STRICT.get(getattr(asserter, "__func__", asserter), ())
        if any(k in getattr(kind, "__mro__", ()) for k in strict):
            continue  # unittest's own comparator for its kind (as strict as ==)
        if not _test_own(asserter):
            _x("test %s: its TestCase's equality table names %s for %s"
               % (name, _what(table[kind]), getattr(kind, "__name__", "?")))
    for key, value in list(own.items()):
        if key.startswith("__") or not callable(value):
            continue
        if callable(getattr(type(tc), key, None)) and not _test_own(value):
            _x("test %s: %s set on its TestCase by %s" % (name, key, _where(value)))


def _same_doctest(now, then):
    """By identity and the strings' own characters (no ``__eq__`` of a class is asked)."""
    if now is None or any(a is not b for a, b in zip(now[:2] + now[3:5], then[:2] + then[3:5])):
        return False
    if type(now[5]) is not int or now[5] != then[5] or len(now[2]) != len(then[2]):
        return False
    for (e, *fields), (e0, *fields0) in zip(now[2], then[2]):
        if e is not e0:
            return False
        for a, b in zip(fields, fields0):
            if type(a) is not type(b) or (type(a) is str and not str.__eq__(a, b)):
                return False
            if type(a) is tuple and a != b:  # the options: (int, bool) pairs
                return False
    return True


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    if getattr(config, "_harness_canary", False):
        items.append(_Canary.from_parent(session, name=_NAME))


def pytest_collection_finish(session):
    if getattr(session.config, "_harness_canary", False) and type(_STATE) is list:
        _snapshot(_SEEN, _STATE)
        _check_state()
        _check_hooks(session.config)
        _check_tests(session.items)
        _check_sources(session)
        _snap_globals(session.items)
        _snap_items(session.items)
        _freeze()
        _emit({"k": "n", "n": len(session.items)})


def _check_sources(session):
    """The runner's configuration file and every collected test module are files of the
    tree the verifier was given (locked, or the candidate's): one written during the run
    (by code an earlier pytest of the same command imported: a ``pytest.ini`` that moves
    the rootdir, gutted copies of the tests) is tampering."""
    top = _WS.rstrip("/") + "/"
    known = _CANDIDATE | _LOCKED
    ini = getattr(session.config, "inipath", None)
    paths = [str(ini)] if ini is not None else []
    for item in session.items:
        where = getattr(item, "path", None) or getattr(item, "fspath", None)
        if where is not None and getattr(item, "name", None) != _NAME:
            paths.append(str(where))
    for path in dict.fromkeys(paths):
        p = _normpath(path)
        if p.startswith(top) and p not in known and _is_file(p):
            _x("%s was written during the test run (not in the tree the verifier was "
               "given)" % p[len(top):])


def _freeze():
    """What the checks compare against, made immutable once collection is done.

    Rebinding any of these names afterwards is seen by the guard's audit hook, which holds
    the plugin's namespace as it was when the collection record went out."""
    global _STATE, _HOT_STATE, _SEEN, _KNOWN, _KNOWN_TYPES, _ITEMS, _GLOBALS
    if type(_STATE) is tuple:
        return
    _STATE, _HOT_STATE, _SEEN = tuple(_STATE), tuple(_HOT_STATE), frozenset(_SEEN)
    _KNOWN, _KNOWN_TYPES = _Frozen(_KNOWN), _Frozen(_KNOWN_TYPES)
    _ITEMS = _Frozen(_ITEMS)
    _GLOBALS = _Frozen({k: (m, _Frozen(d), *rest) for k, (m, d, *rest) in _GLOBALS.items()})
    for path, codes in list(_MODCODES.items()):
        _MODCODES[path] = _Frozen(codes)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_call(item):
    watch = None
    armed = _CONFIG and getattr(_CONFIG[0], "_harness_canary", False)
    if armed:
        _check_item(item)
        _check_tests([item])
        # what the test is about to receive (after this, pytest hands it over at once: a
        # value swapped in setup and put back during the call is seen here)
        _check_made(item, "call")
        watch = _watch_own_code(item)
    outcome = yield
    if armed and (outcome.excinfo is not None or getattr(item, "_excinfo", None)):
        # The test raised (or unittest recorded its failure): its call cannot be reported
        # passed. Told to the guard's hook at once, before pytest builds the call's report
        # (code run by the collector in between can reach that object: red team round
        # twenty-one dropped its exception).
        _emit({"k": "r", "node": item.nodeid})
    if watch is not None:
        seen, before = watch
        sys.setprofile(before)
        threading.setprofile(before)
        if not seen:  # judged when its report says passed (unittest reports skips later)
            _UNSEEN.add(item.nodeid)


_UNSEEN = set()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_makereport(item, call):
    # Before the report of each phase is made: what makes and judges it, as loaded.
    if _CONFIG and getattr(_CONFIG[0], "_harness_canary", False):
        # The hook checks this plugin and the session, and names the runner's state
        # written since it last found it as taken (then None): all of it is checked now.
        # Without that answer (an interpreter whose dicts keep no version), the hot list.
        written = []
        _AUDIT("harness.guard.check", written)
        _check_state(written[:-1] if written and written[-1] is None else _HOT_STATE)
        _check_globals(item)
        _check_re_caches()
        _check_made(item, call.when)
        _check_item(item)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logreport(report):
    if not _CONFIG or not getattr(_CONFIG[0], "_harness_canary", False):
        return
    if report.when == "call" and report.passed and report.nodeid in _UNSEEN:
        _x("test %s passed without running its own code (a decorator ran something else)"
           % report.nodeid)
    test_id = _junit_id(_CONFIG[0], report.nodeid)
    # pytest 9 reports each subtest (unittest's ``subTest``, the ``subtests`` fixture) as
    # one more call report of its test: streamed apart, a failing one fails the test
    when = "subtest" if _SUBTEST is not None and isinstance(report, _SUBTEST) else report.when
    _emit({"k": "t", "id": test_id, "when": when, "o": report.outcome,
           "node": report.nodeid})
    if report.when == "teardown" and _monotonic() - _LAST[0] > 1.0:
        # A few ms a check: after each test at most once a second, and always at the end.
        _LAST[0] = _monotonic()
        _check_state()


@pytest.hookimpl(tryfirst=True)
def pytest_report_teststatus(report, config):
    # Keep the canary out of the terminal's failures (reviewers read that output).
    if report.when == "call" and report.nodeid.endswith("::" + _NAME):
        return "harness canary", "", ""


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    config = session.config
    if not getattr(config, "_harness_canary", False):
        return
    _check_state()
    _check_hooks(config)
    _emit({"k": "end", "exit": int(exitstatus)})
    # The canary's own failure must not change the run's exit status.
    if exitstatus == 1 and session.testsfailed == 1:
        session.exitstatus = 0


# The plugin's own code, every function and method defined above, is the runner's: trusted
# where it runs (its hooks need no compiling to be proven), never over another name (a
# runner's attribute or a builtin; see _added_by_run, _library_may_hold).
for _value in list(globals().values()):
    _kinds = vars(_value).values() if isinstance(_value, type) else ()
    for _v in (_value, *_kinds):
        _c = _code_of(_v)
        if _c is not None and _c.co_filename == __file__:
            _KNOWN[id(_c)] = _c

_AUDIT("harness.guard.loaded")  # the guard's hook keeps this namespace as it is now
'''

# The path functions, one source for both files (each binds its own copies as it loads).
_SITECUSTOMIZE = _SITECUSTOMIZE.replace("# @@paths@@: _PATHS goes here\n", _PATHS)
_PLUGIN = _PLUGIN.replace("# @@paths@@: _PATHS goes here\n", _PATHS)


def guard_files(
    workspace: str,
    candidate: Iterable[str],
    locked: Iterable[str] = (),
    *,
    box: str | None = None,
    box_owner: int = 0,
) -> dict[str, bytes]:
    """Return the guard's files (mounted read-only at :data:`GUARD_MOUNT`).

    ``box``: the drop box (:meth:`harness.sandbox.base.SandboxSession.make_drop_box`)
    where each guarded pytest leaves its key, owned by ``box_owner``; a guard that finds
    no such box there signs with a key the harness never learns (its records: tampering).

    ``candidate``: the workspace-relative files the candidate added or changed; code from
    them that walks the runner's objects, or implements a runner hook, is tampering.
    ``locked``: the workspace files the run cannot change; a runner hook is trusted only
    from those or from files outside the workspace the run cannot change, and only when its
    code is what that file compiles to.
    """
    cfg = {
        "workspace": workspace,
        "candidate": sorted(candidate),
        "locked": sorted(locked),
        "box": box,
        "box_owner": box_owner,
    }
    files = {
        "sitecustomize.py": _SITECUSTOMIZE.encode(),
        "harness_canary.py": _PLUGIN.encode(),
        "guard.json": json.dumps(cfg).encode(),
    }
    # no filter for this machine: the guard says so (tampering: closed)
    with contextlib.suppress(ValueError):
        files["seal.bpf"] = seal_program()
    return files


# ---------------------------------------------------------------------------- the stream


@dataclass
class _Run:
    junit: str
    key: bytes
    outcomes: list[tuple[str, str, str]] = field(default_factory=list)
    nodes: dict[str, str] = field(default_factory=dict)
    """JUnit id -> pytest node id (``path/to/test_x.py::test_y``, from the rootdir)."""
    collected: int | None = None
    end: dict[str, object] | None = None


@dataclass
class Stream:
    """The guard's records, as read from the verifier's captured stderr."""

    runs: dict[str, _Run] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    """Run ids in the order they started."""
    tampering: list[str] = field(default_factory=list)
    """What the guard saw in the process (``x`` records), deduplicated, in order."""
    malformed: int = 0
    """Records under a guard's key that are not valid (only candidate code writes those)."""

    def nodes(self, junit: str) -> dict[str, str] | None:
        """Return JUnit id -> node id for the last run writing ``junit`` (None: no run)."""
        runs = [self.runs[r] for r in self.order if self.runs[r].junit == os.path.normpath(junit)]
        return dict(runs[-1].nodes) if runs else None

    def ran_tests(self, junit: str) -> bool:
        """Tell whether the last run writing ``junit`` streamed any test outcome.

        A run whose collection failed runs no test, the canary included: its report has
        no canary to check.
        """
        runs = [self.runs[r] for r in self.order if self.runs[r].junit == os.path.normpath(junit)]
        return bool(runs and runs[-1].outcomes)


_ANY_MARKER = b"@@harness:"
_TAGGED = re.compile(rb"@@harness:[0-9a-f]{32}@@ ")
_FOREIGN = "a stream record under a key the guard did not leave in the harness's drop box"
_TAKEN = (
    "a guard record was taken off the evidence stream, or put back out of its place "
    "(a gap in its process's sequence)"
)
KEY_BYTES = 32
"""A guard's key: random bytes, left in the drop box as lowercase hex."""


def read_keys(files: Mapping[str, bytes]) -> tuple[list[bytes], list[str]]:
    """Return the guards' keys from the drop box's files, and what else was there.

    Only a guard, before any candidate code ran in its process, and candidate code write
    to the box: a file that is not one key is the candidate's (tampering).
    """
    keys: list[bytes] = []
    odd: list[str] = []
    for name, data in sorted(files.items()):
        if re.fullmatch(rb"[0-9a-f]{%d}" % (2 * KEY_BYTES), data) is None:
            odd.append(f"the harness's drop box holds {name[:40]!r}, which is not a key")
            continue
        keys.append(bytes.fromhex(data.decode()))
    return keys, odd


def _marker(key: bytes) -> bytes:
    """Return the records' marker: a public tag derived from the key (never written)."""
    tag = hashlib.sha256(b"harness-tag:" + key).hexdigest()[:32]
    return f"@@harness:{tag}@@ ".encode()


def _signed(rest: bytes, key: bytes) -> bytes | None:
    """Return the record's JSON if its MAC under ``key`` holds, else None."""
    body, _, sig = rest.rstrip(b"\r").rpartition(b" ")
    good = hmac.digest(key, body, "sha256").hex().encode()
    return body if hmac.compare_digest(good, sig) else None


def parse_stream(stderr: bytes, keys: Iterable[bytes]) -> Stream:
    """Parse the guard's records out of ``stderr`` (other output is ignored).

    ``keys``: the guards' keys (:func:`read_keys`), one per guarded pytest process. A
    record under any other key (a tag no guard left a key for) is tampering.
    """
    stream = Stream()
    markers = {_marker(k): k for k in keys}
    places = dict.fromkeys(markers.values(), 0)  # each key's next record
    count = 0
    for line in stderr.split(b"\n"):
        at = line.find(_ANY_MARKER)
        if at < 0:
            continue
        tagged = _TAGGED.match(line, at)
        key = markers.get(tagged.group(0)) if tagged is not None else None
        if tagged is None or key is None:
            if _FOREIGN not in stream.tampering:
                stream.tampering.append(_FOREIGN)  # a guessed key, or one never registered
            continue
        count += 1
        if count > _MAX_RECORDS:
            stream.malformed += 1
            break
        try:
            body = _signed(line[tagged.end() :], key)
            if body is None:
                raise ValueError("a record whose MAC does not hold")
            rec = loads_json(body)  # lone surrogates become U+FFFD
            if not isinstance(rec, dict):
                raise ValueError
            place = rec.get("q")
            if type(place) is not int:
                raise ValueError("a record without its place in its process's sequence")
            if place != places[key] and _TAKEN not in stream.tampering:
                stream.tampering.append(_TAKEN)
            places[key] = place + 1
            _apply(stream, rec, key)
        except (ValueError, TypeError, KeyError, RecursionError):
            stream.malformed += 1
    return stream


def _apply(stream: Stream, rec: dict[str, object], key: bytes) -> None:
    kind = rec["k"]
    if kind == "x":
        what = f"{rec['what']}" + (f" at {rec['where']}" if "where" in rec else "")
        if what not in stream.tampering and len(stream.tampering) < _MAX_X:
            stream.tampering.append(what)
        return
    run_id = str(rec["run"])
    if kind == "start":
        if run_id in stream.runs:
            raise ValueError("a run started twice")
        stream.runs[run_id] = _Run(junit=os.path.normpath(str(rec["junit"])), key=key)
        stream.order.append(run_id)
        return
    run = stream.runs[run_id]
    if run.key != key:
        # one process, one key: a record for a run under another process's key is code
        # that made a key of its own finishing a run it did not start
        raise ValueError("a record under a key not its run's")
    if run.end is not None:
        raise ValueError("a record after the run's end")
    if kind == "t":
        run.outcomes.append((str(rec["id"]), str(rec["when"]), str(rec["o"])))
        run.nodes.setdefault(str(rec["id"]), str(rec.get("node", "")))
    elif kind == "n":
        run.collected = int(str(rec["n"]))
    elif kind == "end":
        run.end = rec
    else:
        raise ValueError(f"unknown record kind {kind!r}")


def strip_stream(stderr: bytes, keys: Iterable[bytes]) -> bytes:
    """Return ``stderr`` without the guards' records (what a reviewer reads).

    Lines under a key no guard left stay: they are the candidate's, and shown.
    """
    markers = [m for m in map(_marker, keys) if m in stderr]
    if not markers:
        return stderr
    # Whole lines go (a line a record shares goes with it), and the empty line the guard's
    # own newline before each record makes: no blank lines left where records were.
    shown: list[bytes] = []
    for line in stderr.splitlines(keepends=True):
        if any(m in line for m in markers):
            if shown and shown[-1] in (b"\n", b"\r\n"):
                shown.pop()
            continue
        shown.append(line)
    return b"".join(shown)


# ---------------------------------------------------------------------------- judging


def _streamed_status(phases: Sequence[tuple[str, str]]) -> str:
    """Summarise one test's phases the way a JUnit writer would."""
    outcomes = {(when, o) for when, o in phases}
    if ("call", "failed") in outcomes or ("subtest", "failed") in outcomes:
        return "failed"
    if any(o == "failed" for _, o in outcomes):
        return "error"
    if any(o == "skipped" for _, o in outcomes):
        return "skipped"
    if ("call", "passed") in outcomes:
        return "passed"
    return "error"  # a test with no call phase that neither failed nor skipped


def _cut_or_rewritten(stream: Stream) -> list[str]:
    """Every run followed by another must have ended, and each report has one run.

    A run cut short (its process replaced or killed) and followed by another, or a second
    run writing a report an earlier run wrote (an outside red team's: candidate code in a
    wrapper's later step ran a pytest of its own over
    gutted tests after the real run had skipped the hidden ones), would judge the report by
    a run the candidate started. An honest verifier writes each report once.
    """
    out: list[str] = []
    for run_id in stream.order[:-1]:  # the last one's report says it (``_compare``)
        run = stream.runs[run_id]
        if run.end is None:
            out.append(
                f"{run.junit}: a test run that started never ended (its process was cut "
                "short or replaced)"
            )
            break
    writers = Counter(stream.runs[r].junit for r in stream.order)
    for junit, n in writers.items():
        if n > 1:
            out.append(
                f"{junit}: {n} test runs wrote this report (a verifier that runs pytest "
                "more than once writes a report for each run)"
            )
            break
    return out


def _compare(run: _Run, data: bytes, nonce: str) -> str | None:
    if run.end is None:
        return (
            "the run's evidence stream ended before the run did (the process was cut short "
            "or its stream silenced)"
        )
    per_test: dict[str, list[tuple[str, str]]] = {}
    for test_id, when, outcome in run.outcomes:
        per_test.setdefault(test_id, []).append((when, outcome))
    canary = [k for k in per_test if k.endswith(f"harness_canary_{canary_token(nonce)}")]
    streamed = {k: _streamed_status(v) for k, v in per_test.items() if k not in canary}
    if canary and any(_streamed_status(per_test[k]) not in ("failed", "error") for k in canary):
        return "the harness canary test passed in the runner itself: the runner was patched"
    if streamed and not canary:
        return "the harness canary test never ran: the runner's collection was changed"
    try:
        report = parse_junit(data)
    except JUnitError:
        return None  # judged (and failed) as an invalid artifact
    token = canary_token(nonce)
    cases = [c for c in report.cases if not c.name.endswith(f"harness_canary_{token}")]
    reported = Counter(c.id for c in cases if c.status == "passed")
    ran = Counter(k for k, s in streamed.items() if s == "passed")
    forged = [k for k in reported if reported[k] > ran.get(k, 0)]
    if forged:
        was = streamed.get(forged[0], "never run")
        return (
            f"the report passes {len(forged)} test(s) the runner did not pass "
            f"(e.g. {forged[0]}: {was} in the harness's stream)"
        )
    in_report = {c.id for c in cases}
    dropped = [k for k, s in streamed.items() if s in ("failed", "error") and k not in in_report]
    if dropped:
        return f"the report dropped {len(dropped)} failing test(s) (e.g. {dropped[0]})"
    return None


def check_reports(
    stream: Stream,
    reports: Mapping[str, bytes | None],
    nonce: str,
    *,
    pytest_command: bool,
) -> list[str]:
    """Check each JUnit report (host-side data keyed by its path in the sandbox) on the stream.

    ``pytest_command``: the verifier command names pytest, so each of its JUnit reports
    must have come with a stream. Returns the problems (each one is tampering).
    """
    problems = [
        f"the harness guard saw tampering in the test process: {w}" for w in stream.tampering
    ]
    if stream.malformed:
        problems.append(
            f"{stream.malformed} forged or malformed record(s) in the harness's evidence stream"
        )
    problems += _cut_or_rewritten(stream)
    for path, data in reports.items():
        runs = [
            stream.runs[r] for r in stream.order if stream.runs[r].junit == os.path.normpath(path)
        ]
        if not runs:
            made_by_pytest = data is not None and b'name="pytest"' in data[:4096]
            if data is not None and (pytest_command or made_by_pytest):
                problems.append(
                    f"{path}: no harness-held evidence for this report (the runner's guard "
                    "never reported the run that wrote it)"
                )
            continue
        if data is None:
            continue  # judged (and failed) as a missing artifact
        problem = _compare(runs[-1], data, nonce)
        if problem is not None:
            problems.append(f"{path}: {problem}")
    return problems
