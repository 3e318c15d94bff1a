"""The verifier's interpreter guard, canary and evidence stream, with a real pytest."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from subprocess import PIPE

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.sandbox._dropbox import make_host_box, read_host_box
from harness.trial.evidence import check_reports, guard_files, parse_stream, read_keys
from harness.trial.junit import parse_junit
from harness.trial.runner_guard import check_canary, guard_env

PATCH_OUTCOMES = (
    "import _pytest.reports as _r\n_init = _r.TestReport.__init__\n"
    "def _patched(self, *a, **k):\n    _init(self, *a, **k)\n"
    "    self.outcome, self.longrepr = 'passed', None\n"
    "_r.TestReport.__init__ = _patched\n"
)


def _run(
    tmp_path: Path,
    lib: str,
    extra: dict[str, str] | None = None,
    argv_extra=(),
    locked: dict[str, str] | None = None,
    nonce: str = "n0nce",
    armed: bool = True,
    home: Path | None = None,
    unlisted: dict[str, str] | None = None,
    late: bool = False,
    tags: bool = True,
    slow_reader: bool = False,
):
    ws, guard, box = tmp_path / "ws", tmp_path / "guard", tmp_path / "box"
    tmp_path.mkdir(parents=True, exist_ok=True)
    make_host_box(box, None)
    (ws / "tests").mkdir(parents=True)
    (ws / "lib.py").write_text(lib)
    (ws / "tests" / "test_lib.py").write_text(
        "from lib import X\n\ndef test_x():\n    assert X == 2\n\ndef test_y():\n    pass\n"
    )
    for rel, text in {**(extra or {}), **(locked or {}), **(unlisted or {})}.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    guard.mkdir()
    files = guard_files(
        str(ws),
        ["lib.py", *(extra or {})],
        [*(locked or {}), "tests/test_lib.py"],
        box=str(box),
        box_owner=os.geteuid(),
    )
    if not tags:  # as on an interpreter whose dicts keep no version tag
        text = files["sitecustomize.py"].decode()
        assert "tag_view = _dict_tags()" in text
        text = text.replace("tag_view = _dict_tags()", "tag_view = None")
        files["sitecustomize.py"] = text.encode()
    for rel, data in files.items():
        (guard / rel).write_bytes(data)
    env = {"PATH": os.environ["PATH"], **guard_env(str(guard), nonce)}
    if not armed:
        del env["HARNESS_STREAM"]
    if home is not None:
        env["HOME"] = str(home)
    argv = [sys.executable, "-m", "pytest", "-q", "--junitxml=reports/junit.xml", *argv_extra]
    if late:  # output read once pytest has exited: whatever it takes back off a pipe is gone
        proc = subprocess.Popen([*argv, "tests"], cwd=ws, env=env, stdout=PIPE, stderr=PIPE)
        proc.wait(timeout=120)
        out, err = proc.communicate()
        done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    elif slow_reader:  # the pipes fill: every write waits for room, beside the others
        proc = subprocess.Popen([*argv, "tests"], cwd=ws, env=env, stdout=PIPE, stderr=PIPE)
        got: dict[int, list[bytes]] = {1: [], 2: []}

        def drain(pipe, into):
            while chunk := pipe.read1(1024):
                into.append(chunk)
                time.sleep(0.0005)

        readers = [
            threading.Thread(target=drain, args=(proc.stdout, got[1])),
            threading.Thread(target=drain, args=(proc.stderr, got[2])),
        ]
        for t in readers:
            t.start()
        proc.wait(timeout=300)
        for t in readers:
            t.join(timeout=60)
        proc.stdout.close()
        proc.stderr.close()
        out, err = b"".join(got[1]), b"".join(got[2])
        done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    else:
        done = subprocess.run([*argv, "tests"], cwd=ws, env=env, capture_output=True, check=False)
    junit = (ws / "reports" / "junit.xml").read_bytes() if (ws / "reports").exists() else None
    found = read_host_box(box, owner=os.geteuid(), max_files=64, max_bytes=64)
    keys, odd = read_keys(found.files)
    stream = parse_stream(done.stderr, keys)
    path = str(ws / "reports" / "junit.xml")
    guarded = stream.ran_tests(path)
    problems = [*found.odd, *odd, *check_reports(stream, {path: junit}, nonce, pytest_command=True)]
    return done, junit, guarded, problems


@pytest.mark.parametrize("x", [1, 2])
def test_an_honest_run_keeps_its_exit_status_and_loses_the_canary(tmp_path, x):
    done, junit, guarded, problems = _run(tmp_path, f"X = {x}\n")
    assert done.returncode == (0 if x == 2 else 1), done.stdout
    assert guarded
    assert problems == [], problems
    stripped, problem = check_canary(junit, "n0nce", guarded=guarded)
    assert problem is None
    assert stripped is not None
    report = parse_junit(stripped)
    assert report.tests == 2 and report.failures == (0 if x == 2 else 1)


# Records wait for the next few before they are written (a write woke the harness's reader
# each time): each write stays one a pipe keeps whole, whatever else writes to it at once.
NOISY_TESTS = (
    "import os\nimport threading\n\nimport pytest\n\n"
    "def _noise():\n"
    "    line = b'n' * 2000 + b'\\n'\n"
    "    while True:\n"
    "        os.write(2, line)\n\n\n"
    "threading.Thread(target=_noise, daemon=True).start()\n\n\n"
    "@pytest.mark.parametrize('i', range(1000))\n"
    "def test_many(i):\n    assert i >= 0\n"
)


def test_records_stay_whole_while_the_tests_flood_the_same_stderr(tmp_path):
    done, junit, guarded, problems = _run(
        tmp_path, "X = 2\n", locked={"tests/test_noisy.py": NOISY_TESTS}, slow_reader=True
    )
    assert done.returncode == 0 and guarded, done.stdout[-2000:]
    assert problems == [], problems
    report = parse_junit(check_canary(junit, "n0nce", guarded=guarded)[0])
    assert report.tests == 1002 and report.failures == 0


# unittest's subTest: pytest 9 reports each subtest as one more call report of its test
# (an honest suite was called tampering, "a second call report"); a failing one fails it.
SUBTESTS = (
    "import unittest\n\nfrom lib import X\n\n\nclass T(unittest.TestCase):\n"
    "    def test_each(self):\n"
    "        for i in range(3):\n"
    "            with self.subTest(i=i):\n"
    "                self.assertEqual(X + i, 2 + i)\n\n"
    "    def test_skip_one(self):\n"
    "        for i in range(2):\n"
    "            with self.subTest(i=i):\n"
    "                if i:\n                    self.skipTest('not this one')\n"
)


@pytest.mark.parametrize("x", [2, 3])
def test_subtests_are_reported_and_a_failing_one_fails_its_test(tmp_path, x):
    done, junit, guarded, problems = _run(
        tmp_path, f"X = {x}\n", locked={"tests/test_sub.py": SUBTESTS}
    )
    assert guarded and problems == [], problems
    report = parse_junit(check_canary(junit, "n0nce", guarded=guarded)[0])
    failed = {c.id for c in report.cases if c.status == "failed"}
    if x == 2:
        assert done.returncode == 0 and failed == set(), done.stdout
    else:  # each subtest fails, and so its test; the lib test too
        assert done.returncode == 1 and "tests.test_sub.T::test_each" in failed, failed


SKIPPED_TESTS = (
    "import unittest\n\nfrom lib import X\n\n\nclass T(unittest.TestCase):\n"
    "    @unittest.skipIf(True, 'not here')\n    def test_skipped(self):\n        assert X\n\n"
    "    @unittest.expectedFailure\n    def test_expected(self):\n        assert X == 3\n"
)


def test_tests_wrapped_by_unittest_decorators_run_their_own_code(tmp_path):
    # functools.wraps copies the test's __module__ onto unittest's wrapper: the wrapper is
    # judged by the module its globals are, not by the name it carries.
    done, _, guarded, problems = _run(
        tmp_path, "X = 2\n", locked={"tests/test_skip.py": SKIPPED_TESTS}
    )
    assert done.returncode == 0, done.stdout
    assert guarded and problems == [], problems


BASE_TESTS = (
    "from lib import X\n\n\nclass TestBase:\n    def test_x(self):\n        assert X == 2\n"
)
CHILD_TESTS = "from test_base import TestBase\n\n\nclass TestChild(TestBase):\n    pass\n"


def test_a_test_class_may_inherit_tests_from_another_locked_test_module(tmp_path):
    locked = {"tests/test_base.py": BASE_TESTS, "tests/test_child.py": CHILD_TESTS}
    done, _, guarded, problems = _run(tmp_path, "X = 2\n", locked=locked)
    assert done.returncode == 0, done.stdout
    assert guarded and problems == [], problems


def test_tests_inherited_from_a_module_the_candidate_wrote_are_tampering(tmp_path):
    _, _, _, problems = _run(
        tmp_path,
        "X = 2\n",
        {"tests/test_base.py": BASE_TESTS},
        locked={"tests/test_child.py": CHILD_TESTS},
    )
    assert any("test_child.py::TestChild::test_x does not run its own" in p for p in problems)


def test_a_collection_error_is_judged_not_called_tampering(tmp_path):
    done, junit, guarded, problems = _run(tmp_path, "X = (\n")
    assert done.returncode == 2, done.stdout
    assert not guarded and problems == [], problems
    assert junit is not None and parse_junit(junit).errors == 1


def test_an_import_time_patch_of_the_runner_is_caught(tmp_path):
    done, junit, guarded, problems = _run(tmp_path, "X = 1\n" + PATCH_OUTCOMES)
    assert done.returncode == 0  # the patch fooled pytest itself
    _, problem = check_canary(junit, "n0nce", guarded=guarded)
    assert problem is not None and "reported passed" in problem
    assert any(
        "runner attribute _pytest.reports.TestReport.__init__ replaced" in p for p in problems
    )


def test_a_workspace_pytest_package_does_not_stand_in_for_pytest(tmp_path):
    fake = "import sys\nprint('FAKE')\nsys.exit(0)\n"
    done, junit, _, _ = _run(
        tmp_path, "X = 1\n", {"pytest/__init__.py": "", "pytest/__main__.py": fake}
    )
    assert b"FAKE" not in done.stdout
    assert done.returncode == 1 and junit is not None


DECORATED = """\
import functools
from unittest import mock

from hypothesis import given, settings, strategies as st

from lib import X


@settings(max_examples=3, database=None)
@given(st.integers())
def test_given(n):
    assert n - n + X == 2


@mock.patch("lib.X", 5)
def test_patched():
    import lib
    assert lib.X == 5
"""


def test_tests_under_library_decorators_are_their_modules_own(tmp_path):
    """hypothesis's generated wrapper and mock's ``functools.wraps`` wrapper are not tampering."""
    locked = {"tests/test_deco.py": DECORATED}
    done, _, guarded, problems = _run(tmp_path, "X = 2\n", locked=locked)
    assert done.returncode == 0, done.stdout
    assert guarded and problems == [], problems


def test_the_streams_secret_is_nowhere_the_test_process_can_read(tmp_path):
    """Not in the environment, not in the process's initial environment block, not in the
    guard's modules: code under test that looks for it finds nothing (it is ``n0nce``)."""
    probe = (
        "import os, subprocess, sys\n\n"
        "def test_look():\n"
        "    env = subprocess.run(['cat', '/proc/%d/environ' % os.getpid()],\n"
        "                         capture_output=True).stdout\n"
        "    mods = repr([vars(m) for n, m in sys.modules.items()\n"
        "                 if n in ('harness_canary', 'sitecustomize')])\n"
        "    assert b'n0nce' not in env and 'n0nce' not in repr(os.environ)\n"
        "    assert 'n0nce' not in mods\n"
    )
    done, _, guarded, problems = _run(tmp_path, "X = 2\n", locked={"tests/test_probe.py": probe})
    assert done.returncode == 0, done.stdout
    assert guarded and problems == [], problems


def _memory_holds(pid: int, needles: list[bytes]) -> list[bytes]:
    """Which needles a readable mapping of process ``pid`` holds (read as root, from outside)."""
    found: set[bytes] = set()
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
            span, perms = line.split()[:2]
            if "r" not in perms:
                continue
            lo, hi = (int(x, 16) for x in span.split("-"))
            try:
                mem.seek(lo)
                data = mem.read(hi - lo)
            except (OSError, OverflowError, ValueError):
                continue
            found.update(n for n in needles if n in data)
    return sorted(found)


@pytest.mark.skipif(os.geteuid() != 0, reason="reads another process's memory: needs root")
def test_the_streams_key_is_not_in_the_test_processs_memory(tmp_path):
    """An outside red team read the marker out of ``/proc/self/mem`` and forged the stream.

    Looked for from outside, while a test runs (after the guard wrote its first records):
    the guard's key (which the harness reads back from its drop box) does not sit in the
    process's memory, raw or as hex, for code under test to scan for.
    """
    ws, box = tmp_path / "ws", tmp_path / "box"
    probe = (
        "import os, pathlib, time\n\n"
        "def test_wait():\n"
        "    pathlib.Path('ready').write_text(str(os.getpid()))\n"
        "    end = time.monotonic() + 60\n"
        "    while not pathlib.Path('go').exists() and time.monotonic() < end:\n"
        "        time.sleep(0.02)\n"
    )
    seen: list[list[bytes]] = []

    def look() -> None:
        end = time.monotonic() + 60
        while not (ws / "ready").exists() and time.monotonic() < end:
            time.sleep(0.02)
        try:
            pid = int((ws / "ready").read_text())
            (key,) = read_keys(read_host_box(box, owner=0, max_files=4, max_bytes=64).files)[0]
            seen.append(_memory_holds(pid, [key, key.hex().encode()]))
        finally:
            (ws / "go").write_text("")

    watcher = threading.Thread(target=look)
    watcher.start()
    done, _, guarded, problems = _run(tmp_path, "X = 2\n", locked={"tests/test_probe.py": probe})
    watcher.join()
    assert done.returncode == 0, done.stdout
    assert guarded and problems == [], problems
    assert seen == [[]], seen


def test_candidate_code_replacing_the_test_process_is_tampering(tmp_path):
    """An outside red team's route: ``os.execv`` from candidate code during collection, to
    start a pytest of its own; the program that replaces the process is never the runner."""
    lib = "import os\nX = 2\nos.execv('/bin/sh', ['sh', '-c', 'exit 0'])\n"
    done, _, _, problems = _run(tmp_path, lib)
    assert done.returncode == 0  # the replacing program's exit status
    assert any("audit: os.exec" in p for p in problems), problems


def test_a_pytest_not_asked_for_a_stream_writes_no_records(tmp_path):
    """A pytest that a test starts inherits the guard but not the request for a stream
    (the guard took it out of the environment): it makes no key and writes no record."""
    done = _run(tmp_path, "X = 2\n", armed=False)[0]
    assert done.returncode == 0, done.stdout
    assert b"@@harness:" not in done.stderr, done.stderr[-500:]


def test_a_dropped_canary_counts_only_when_it_was_armed() -> None:
    junit = b'<testsuite><testcase classname="t" name="a"/></testsuite>'
    assert check_canary(junit, "n", guarded=False) == (junit, None)
    assert check_canary(junit, "n", guarded=True)[1] is not None
    assert check_canary(None, "n", guarded=True) == (None, None)


HOOK = """\
import pytest

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.sections.append(("note", "seen"))
"""

BORROWED_NAME = '''\
import json
SRC = """
import sys, pytest
def _mk(item, call):
    outcome = yield
    rep = outcome.get_result()
    rep.outcome, rep.longrepr = "passed", None
class _F:
    pytest_runtest_makereport = staticmethod(pytest.hookimpl(hookwrapper=True)(_mk))
sys.modules["harness_canary"]._CONFIG[0].pluginmanager.register(_F())
"""
exec(compile(SRC, json.__file__, "exec"), {"__name__": "json"})
X = 1
'''


def test_hooks_are_trusted_only_from_locked_files_with_their_own_code(tmp_path):
    # an honest conftest among the locked files: its hook is the file's own code
    done, _, _, problems = _run(tmp_path / "a", "X = 2\n", locked={"tests/conftest.py": HOOK})
    assert done.returncode == 0, done.stdout
    assert problems == [], problems
    # the same conftest, not locked (the run could have written it): not trusted
    done, _, _, problems = _run(tmp_path / "b", "X = 2\n", extra={"tests/conftest.py": HOOK})
    assert any("pytest_runtest_makereport" in p for p in problems), problems
    # candidate code compiled under a standard-library file name: not that file's code
    done, _, _, problems = _run(tmp_path / "c", BORROWED_NAME)
    assert done.returncode == 0, done.stdout  # the borrowed hook fooled pytest itself
    assert any("json/__init__.py" in p for p in problems), problems


# Candidate code that drives the guard plugin's and pytest's own hooks with reports it made
# up (an outside red team's win): a collection record, every test passed, the canary failed
# as it should, the session finished, then out before pytest runs a single test.
DRIVE_HOOKS = """
def _drive():
    import os, sys
    g = sys.modules.get("harness_" + "canary")
    if g is None:
        return
    cfg = g._CONFIG[0]
    pm = cfg.pluginmanager
    sess = pm.get_plugin("session")
    from _pytest.reports import TestReport
    ids = [("tests/test_lib.py::test_x", "test_x"), ("tests/test_lib.py::test_y", "test_y")]

    class S:
        pass
    fake = S()
    fake.config, fake.items = cfg, [object() for _ in range(len(ids) + 1)]
    g.pytest_collection_finish(fake)
    log = pm.hook.pytest_runtest_logreport
    for nodeid, name in ids + [("::" + g._NAME, g._NAME)]:
        for when in ("setup", "call", "teardown"):
            bad = name == g._NAME and when == "call"
            log(report=TestReport(nodeid, ("tests/test_lib.py", 0, name), {},
                                  "failed" if bad else "passed", "x" if bad else None,
                                  when, [], 0.001))
    sess.testsfailed, sess.testscollected = 1, len(ids) + 1
    pm.hook.pytest_sessionfinish(session=sess, exitstatus=1)
    sys.stdout.flush()
    os._exit(0)


_drive()
"""


@pytest.mark.parametrize("how", ["module", "thread"])
def test_reports_made_up_by_candidate_code_driving_the_hooks_are_refused(tmp_path, how):
    body = DRIVE_HOOKS
    if how == "thread":  # no candidate frame beneath the records: outside pytest's session
        body = body.replace(
            "\n_drive()\n",
            "\nimport threading\nt = threading.Thread(target=_drive)\nt.start()\nt.join()\n",
        )
    done, junit, _, problems = _run(tmp_path, "X = 1\n" + body)
    assert done.returncode == 0  # the forger exited 0 with a JUnit file of passes
    assert junit is not None and b'name="test_x"' in junit and b'failures="1"' in junit
    assert any("beneath it" in p or "outside pytest's session" in p for p in problems), problems


# An outside red team's two PASSes without a fix (both backends): candidate code reached the
# guard's record writer (``out``) and put its own encoder into ``out``'s closure, so every
# failed test was signed as passed. One found ``out`` with ``gc.get_objects`` run by a thread
# (the audited call's frame was the standard library's); the other with a timer signal whose
# handler was handed the guard's own frame, no audited call at all.
SWAP_ENCODER = """
def _swap(out):
    cells = dict(zip(out.__code__.co_freevars, out.__closure__))
    real = cells["encode"].cell_contents
    def enc(value, depth=0):
        canary = "harness_canary_" in str(value.get("node")) if type(value) is dict else True
        if depth == 0 and not canary and value.get("o") == "failed":
            value = dict(value, o="passed")
        return real(value, depth)
    cells["encode"].cell_contents = enc
"""
GC_FROM_A_THREAD = (
    SWAP_ENCODER
    + """
import collections, gc, threading
_found = []
_t = threading.Thread(target=collections.deque,
                      args=(map(_found.append, map(gc.get_objects, [None])), 0))
_t.start(); _t.join()
for _o in _found[0] if _found else ():
    _c = getattr(_o, "__code__", None)
    if _c is not None and _c.co_name == "out" and _c.co_filename.endswith("sitecustomize.py"):
        _swap(_o)
X = 1
"""
)
FRAME_FROM_A_SIGNAL = (
    SWAP_ENCODER
    + """
import signal, time
_got = []
def _handler(signum, frame):
    while frame is not None and not _got:
        if frame.f_code.co_filename.endswith("sitecustomize.py") and "out" in frame.f_locals:
            _got.append(frame.f_locals["out"])
        frame = frame.f_back
try:
    signal.signal(signal.SIGALRM, _handler)
    REFUSED = None
except OSError as exc:
    REFUSED = exc.errno
else:
    signal.setitimer(signal.ITIMER_REAL, 0.0002, 0.0002)
    _t0 = time.monotonic()
    while not _got and time.monotonic() - _t0 < 5:
        open("/dev/null").close()
    signal.setitimer(signal.ITIMER_REAL, 0, 0)
    if _got:
        _swap(_got[0])
X = 1
"""
)


def test_the_record_writer_found_through_the_heap_from_a_thread_is_tampering(tmp_path):
    done, _, _, problems = _run(tmp_path, GC_FROM_A_THREAD)
    assert done.returncode == 1, done.stdout  # the test still fails ...
    assert any("gc.get_objects" in p for p in problems), problems  # ... and it is noted


# Found while profiling the record path (not by a red team): the records go out on a pipe,
# and the test process can open that pipe again for reading through /proc/self/fd and take
# a record back off it before the harness reads it. Here the process wins that race every
# time (the harness reads after it exits); through the harness it won some of the time.
TAKE_RECORDS_BACK = """
import fcntl, gc, os
X = 2
_ends = {}
for _name in os.listdir("/proc/self/fd"):
    try:
        _fd = int(_name)
        if os.readlink("/proc/self/fd/" + _name).startswith("pipe:") and (
            fcntl.fcntl(_fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY
        ):
            _ends.setdefault(os.fstat(_fd).st_ino, _fd)
    except OSError:
        pass
_readers = {w: os.open("/proc/self/fd/%d" % w, os.O_RDONLY | os.O_NONBLOCK) for w in _ends.values()}
gc.get_objects()  # the guard notes this walk at once
for _w, _r in _readers.items():
    try:
        _data = os.read(_r, 1 << 16)
    except BlockingIOError:
        continue
    os.write(_w, b"\\n".join(l for l in _data.split(b"\\n") if b"gc.get_objects" not in l))
"""


def test_a_record_taken_back_off_the_stream_is_tampering(tmp_path):
    done, _, _, problems = _run(tmp_path, TAKE_RECORDS_BACK, late=True)
    assert done.returncode == 0, done.stdout + done.stderr  # the tests pass ...
    assert b"gc.get_objects" not in done.stderr  # ... the walk's record was taken back ...
    assert any("taken off" in p for p in problems), problems  # ... and that is seen


# Red team round nineteen's PASS without a fix (both backends, the whole bundled gate):
# the payload is compiled under the installed pytest's own file name through a standard
# library trampoline, so the frame that installs the tracer looked like pytest's, and the
# tracer jumps over the line of pytest that calls the test: no test body runs, every
# report is pytest's own "passed".
TRACER_UNDER_A_BORROWED_NAME = '''
X = 1


def _settle():
    import code, importlib, sys
    host = importlib.import_module("_pytest.python").__file__
    src = """
def _arm(sys, host):
    import linecache
    def lt(frame, event, arg):
        if event == "line" and "result = testfunction(" in linecache.getline(host, frame.f_lineno):
            item = frame.f_locals.get("pyfuncitem")
            if item is not None and item.nodeid.startswith("tests/"):
                n = frame.f_lineno
                while "return True" not in linecache.getline(host, n):
                    n += 1
                frame.f_lineno = n
        return lt
    def gt(frame, event, arg):
        co = frame.f_code
        if event == "call" and co.co_name == "pytest_pyfunc_call" and co.co_filename == host:
            return lt
        return None
    sys.settrace(gt)
"""
    ns = {}
    code.InteractiveInterpreter(ns).runsource(src, host, "exec")
    ns["_arm"](sys, host)


_settle()
'''


def test_a_tracer_installed_by_code_under_a_borrowed_file_name_is_tampering(tmp_path):
    done, _, _, problems = _run(tmp_path, TRACER_UNDER_A_BORROWED_NAME)
    assert done.returncode == 0, done.stdout  # test_x's body never ran: "passed" ...
    assert any("audit: sys.settrace" in p for p in problems), problems  # ... and it is seen


CTYPES_UNDER_A_BORROWED_NAME = """
X = 2
import code, importlib, sys
_host = importlib.import_module("_pytest.python").__file__
code.InteractiveInterpreter({}).runsource(
    "import ctypes, sys\\nctypes.c_char.from_address(id(sys))\\n", _host, "exec"
)
"""


def test_ctypes_from_code_under_a_borrowed_file_name_is_tampering(tmp_path):
    done, _, _, problems = _run(tmp_path, CTYPES_UNDER_A_BORROWED_NAME)
    assert done.returncode == 0, done.stdout
    assert any("audit: ctypes.cdata" in p for p in problems), problems


# Red team round twenty (both backends, PASS without a fix): the candidate's code, called
# by a test, rebound the hidden test module's helper to a builtin (``tuple``: the exhaustive
# loop ran zero times) and its ``datetime`` alias to a namespace whose ``date`` formats the
# wrong answer; both passed as "not code the candidate wrote".
REBIND_TEST_NAMES = """
import sys, types
X = 2


def weaken():
    mod = sys.modules["test_lib"]
    mod.{name} = {value}
"""
TESTS_WITH_HELPERS = (
    "import datetime as dt\nfrom lib import X, weaken\n\n"
    "def _values():\n    return [1, 2, 3]\n\n"
    "def test_x():\n    weaken()\n    assert X == 2\n\n"
    "def test_y():\n    assert all(v > 5 for v in _values())\n\n"
    "def test_z():\n    assert dt.date(2024, 2, 29) == '2024-02-29'\n"
)


@pytest.mark.parametrize(
    ("name", "value"),
    [("_values", "tuple"), ("dt", "types.SimpleNamespace(date='{:04d}-{:02d}-{:02d}'.format)")],
)
def test_a_test_modules_helper_or_alias_rebound_to_a_builtin_is_tampering(tmp_path, name, value):
    lib = REBIND_TEST_NAMES.format(name=name, value=value)
    done, _, _, problems = _run(tmp_path, lib, locked={"tests/test_lib.py": TESTS_WITH_HELPERS})
    assert any(f"{name} rebound" in p for p in problems), (problems, done.stdout[-800:])


def test_a_test_module_may_still_set_its_own_data_as_it_runs(tmp_path):
    tests = (
        "from lib import X\nSTATE = None\nCOUNT = 0\nCACHE = {}\n\n"
        "def test_x():\n    global STATE, COUNT, CACHE\n    STATE = {'a': [1]}\n"
        "    COUNT += 1\n    CACHE = {'b': 2}\n    assert X == 2\n\n"
        "def test_y():\n    assert STATE == {'a': [1]} and COUNT == 1 and CACHE == {'b': 2}\n"
    )
    done, _, _, problems = _run(tmp_path, "X = 2\n", locked={"tests/test_lib.py": tests})
    assert done.returncode == 0 and problems == [], (problems, done.stdout[-800:])


def test_no_signal_handler_can_be_installed_in_the_test_process(tmp_path):
    probe = (
        "import errno, signal, subprocess, sys\nfrom lib import REFUSED\n\n"
        "def test_sealed():\n    assert REFUSED == errno.EPERM\n"
        "    assert signal.getsignal(signal.SIGALRM) == signal.SIG_DFL\n"
        "    child = [sys.executable, '-c', 'import signal; print(signal.SIGTERM)']\n"
        "    assert subprocess.run(child, capture_output=True).returncode == 0\n"
        "\n\ndef test_no_process_reaches_anothers_memory():\n"
        "    # refused before the kernel looks for the process (no such pid: ESRCH otherwise)\n"
        "    code = ('import ctypes, os; l = ctypes.CDLL(None, use_errno=True); '\n"
        "            'r = [l.syscall(n, 16, 0x3FFFFFFF, 0, 0) for n in %r]; '\n"
        "            'print(r, ctypes.get_errno())' % (NUMBERS,))\n"
        "    done = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True)\n"
        "    assert done.stdout.strip() == '[-1, -1, -1] %d' % errno.EPERM, done\n"
        "\n\ndef test_a_nested_pytest_runs(tmp_path):\n"
        "    (tmp_path / 'test_in.py').write_text('def test_in():\\n    pass\\n')\n"
        "    argv = [sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider']\n"
        "    done = subprocess.run([*argv, str(tmp_path)], capture_output=True)\n"
        "    assert done.returncode == 0, done.stdout + done.stderr\n"
    )
    # ptrace (PTRACE_ATTACH is 16), process_vm_readv, pidfd_getfd
    numbers = {"x86_64": (101, 310, 438), "aarch64": (117, 270, 438)}[os.uname().machine]
    probe = probe.replace(
        "from lib import REFUSED\n", f"from lib import REFUSED\nNUMBERS = {numbers}\n"
    )
    done, junit, _, problems = _run(
        tmp_path, FRAME_FROM_A_SIGNAL, locked={"tests/test_sealed.py": probe}
    )
    assert b"test_sealed" in (junit or b"") and b'name="test_sealed"' in junit
    assert done.returncode == 1, done.stdout  # test_x fails honestly; the probe passes
    assert b"1 failed, 4 passed" in done.stdout, done.stdout
    assert problems == [], problems


# An outside red team's five PASSes without a fix (round nine, both backends), through
# pytest's own objects and the guard plugin's namespace, none raising an audited event:
# a report-flipping hookwrapper registered during a test and unregistered before the end;
# an instance ``gethookproxy`` on the session; the plugin's reporter replaced by a no-op
# at import; a test's function swapped with the plugin's item record rewritten to match.
_PM = "import sys\n_pm = sys.modules['_pytest.debugging'].pytestPDB._pluginmanager\n"
_FLIP = (
    "def _flip(rep):\n"
    "    if rep is not None and rep.failed and 'canary' not in rep.nodeid:\n"
    "        rep.outcome, rep.longrepr = 'passed', None\n"
    "    return rep\n"
)
LATE_HOOKWRAPPER = (
    "X = 1\n" + _FLIP + "def arm():\n" + "    " + _PM.replace("\n", "\n    ") + "import pytest\n"
    "    class P:\n"
    "        @staticmethod\n"
    "        @pytest.hookimpl(hookwrapper=True)\n"
    "        def pytest_runtest_makereport(item, call):\n"
    "            outcome = yield\n"
    "            _flip(outcome.get_result())\n"
    "        @staticmethod\n"
    "        @pytest.hookimpl(hookwrapper=True, tryfirst=True)\n"
    "        def pytest_sessionfinish(session, exitstatus):\n"
    "            _pm.unregister(name='late')\n"
    "            yield\n"
    "    _pm.register(P(), name='late')\n"
)
HOOKPROXY = (
    "X = 1\n"
    + _FLIP
    + "def arm():\n"
    + "    "
    + _PM.replace("\n", "\n    ")
    + "sess = _pm.getplugin('session')\n"
    "    real = sess.gethookproxy\n"
    "    class Proxy:\n"
    "        def __init__(self, hooks):\n"
    "            self.hooks = hooks\n"
    "        def __getattr__(self, name):\n"
    "            hook = getattr(self.hooks, name)\n"
    "            if name != 'pytest_runtest_makereport':\n"
    "                return hook\n"
    "            return lambda **kw: _flip(hook(**kw))\n"
    "    sess.gethookproxy = lambda path: Proxy(real(path))\n"
)
SILENCED_REPORTER = (
    "X = 1\n" + _FLIP + _PM + "import pytest\n"
    "setattr(sys.modules['harness_canary'], '_x', lambda what: None)\n"
    "class P:\n"
    "    @staticmethod\n"
    "    @pytest.hookimpl(hookwrapper=True)\n"
    "    def pytest_runtest_makereport(item, call):\n"
    "        outcome = yield\n"
    "        _flip(outcome.get_result())\n"
    "_pm.register(P(), name='quiet')\n"
    "def arm():\n    pass\n"
)
STUB_WITH_CACHE = (
    "X = 1\n"
    + "def arm():\n"
    + "    "
    + _PM.replace("\n", "\n    ")
    + "g = vars(sys.modules['harness_canary'])\n"
    "    items = dict(g['_ITEMS'])\n"
    "    def stub(*a, **k):\n"
    "        return None\n"
    "    for item in _pm.getplugin('session').items:\n"
    "        if item.name == 'test_x':\n"
    "            item.obj = stub\n"
    "            items[id(item)] = (item, type(item), stub, stub.__code__)\n"
    "            g['_TESTS_OK'][id(stub)] = (stub, True)\n"
    "    g['_ITEMS'] = items\n"
)
ARM = "from lib import arm\n\n\ndef test_arm():\n    arm()\n"


@pytest.mark.parametrize(
    "lib",
    [LATE_HOOKWRAPPER, HOOKPROXY, SILENCED_REPORTER, STUB_WITH_CACHE],
    ids=["late_hookwrapper", "hookproxy", "silenced_reporter", "stub_with_cache"],
)
def test_pytests_objects_and_the_plugins_namespace_are_checked_before_every_report(tmp_path, lib):
    done, junit, _, problems = _run(tmp_path, lib, locked={"tests/test_arm.py": ARM})
    assert b"test_x" in (junit or b""), done.stdout + done.stderr[-2000:]
    assert problems, done.stdout  # the flipped or stubbed test_x is noted as tampering
    if lib is HOOKPROXY:  # read again although the session was last found clean
        assert any("gethookproxy set over its method" in p for p in problems), problems


# An outside red team's PASS without a fix (round ten): candidate code pointed
# ``sys.pycache_prefix`` at a folder of its own holding pytest's cached rewrite of a hidden
# test module, with the header of the real source and bytecode of stub tests.
PYCACHE_PREFIX = """
import importlib.util, marshal, os, sys
_src = os.path.abspath("tests/test_lib.py")
_code = compile("def test_x():\\n    pass\\n\\ndef test_y():\\n    pass\\n", _src, "exec")
_st = os.stat(_src)
_dir = "/tmp/pc-%d" % os.getpid() + os.path.dirname(_src)
os.makedirs(_dir, exist_ok=True)
import pytest
_tag = "%s-pytest-%s" % (sys.implementation.cache_tag, pytest.__version__)
with open(os.path.join(_dir, "test_lib.%s.pyc" % _tag), "wb") as _f:
    _f.write(importlib.util.MAGIC_NUMBER + b"\\0\\0\\0\\0"
             + (int(_st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
             + (_st.st_size & 0xFFFFFFFF).to_bytes(4, "little") + marshal.dumps(_code))
sys.pycache_prefix = "/tmp/pc-%d" % os.getpid()
sys.modules.pop("tests.test_lib", None)
X = 1
"""


def test_a_planted_cached_rewrite_of_a_test_module_is_never_read(tmp_path):
    # the candidate is imported first by a locked test that sorts before the real one
    done, _, _, problems = _run(
        tmp_path,
        PYCACHE_PREFIX,
        locked={"tests/test_a.py": "import lib\n\ndef test_a():\n    pass\n"},
    )
    assert b"1 failed" in done.stdout, done.stdout  # test_x still fails on X = 1 ...
    assert any("pycache_prefix" in p for p in problems), problems  # ... and the move is noted


def test_nothing_left_under_home_runs_before_the_guard(tmp_path):
    """A ``.pth`` one pytest's candidate code leaves in the user site (``$HOME`` is the
    sandbox's shared /tmp) would run in the next pytest of the same verifier command before
    its guard's plugin loads: the verifier's interpreters have no user site."""
    home = tmp_path / "home"
    site = home / ".local" / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    (site / "site-packages").mkdir(parents=True)
    marker = tmp_path / "ran"
    (site / "site-packages" / "early.pth").write_text(f"import os; open({str(marker)!r}, 'w')\n")
    done, _, guarded, problems = _run(tmp_path / "run", "X = 2\n", home=home)
    assert done.returncode == 0 and guarded and problems == [], (done.stdout, problems)
    assert not marker.exists()


REACH = """\
import os, sys
out = []
for name in ("mem", "environ"):
    try:  # the kernel checks access when opening (reading mem at 0 is EIO: unmapped)
        with open("/proc/%s/%s" % (sys.argv[1], name), "rb") as f:
            if name == "environ":
                f.read(1)
    except PermissionError:
        out.append(name)
print(",".join(out) or "none")  # a crash prints nothing: never taken for "reachable"
"""


def test_no_process_of_the_run_reaches_a_process_outside_it(tmp_path):
    """An outside red team (round twelve) started ``python3 -I -S`` (no guard) from candidate
    code, opened the wrapper shell's ``/proc/<ppid>/mem`` and rewrote the shell's next
    command: PASS without a fix. The test run and every process it starts are now in a
    Landlock domain of their own: the shell (here, the process that started pytest), the
    sandbox's init and a later pytest are out of their reach, read or write."""
    probe = (
        "import os, subprocess, sys\n\n"
        "def _reach(pid):\n"
        "    argv = [sys.executable, '-I', '-S', 'tests/reach.py', str(pid)]\n"
        "    return subprocess.run(argv, capture_output=True, text=True).stdout.strip()\n\n"
        "def test_outside_is_out_of_reach():\n"
        "    # (the sandbox's uid is refused both; root here still reads an environ)\n"
        "    assert 'mem' in _reach(os.getppid()).split(',')\n\n"
        "def test_inside_is_not():\n"
        "    child = subprocess.Popen(['sleep', '60'])\n"
        "    try:\n"
        "        assert _reach(child.pid) == 'none'\n"
        "    finally:\n"
        "        child.kill()\n"
    )
    locked = {"tests/test_reach.py": probe, "tests/reach.py": REACH}
    done, _, _, problems = _run(tmp_path, "X = 2\n", locked=locked)
    assert done.returncode == 0, done.stdout
    assert b"4 passed" in done.stdout, done.stdout
    assert problems == [], problems


def test_a_runner_config_or_test_module_written_during_the_run_is_tampering(tmp_path):
    """An outside red team (round thirteen): code imported by a verifier's first pytest wrote
    ``tests/pytest.ini`` (rootdir moved, the real test files ignored) and gutted copies of
    the tests under ``tests/tests/``; the second pytest of the same command took them, every
    record genuine: PASS without a fix on both backends. A file that is in neither the
    locked nor the candidate's list of the tree the verifier was given was written during
    the run."""
    unlisted = {
        "tests/pytest.ini": "[pytest]\n",
        "tests/sub/test_gutted.py": "def test_x():\n    pass\n",
    }
    done, _, guarded, problems = _run(tmp_path, "X = 2\n", unlisted=unlisted)
    assert done.returncode == 0 and guarded, done.stdout
    found = " ".join(problems)
    assert "tests/pytest.ini was written during the test run" in found, problems
    assert "tests/sub/test_gutted.py was written during the test run" in found, problems
    # a locked runner config is the verifier's own
    done, _, _, problems = _run(
        tmp_path / "ok", "X = 2\n", locked={"tests/pytest.ini": "[pytest]\n"}
    )
    assert done.returncode == 0 and problems == [], (done.stdout, problems)


# Red team round twenty-one's PASS without a fix (both backends, the whole bundled gate): a
# garbage-collector callback, run at an allocation inside pytest, gets frames through a
# standard-library function (inspect.currentframe: the frame that asks is inspect's), walks
# up to pytest's CallInfo of a failed test call and drops its exception. pytest then makes
# its own "passed" report: stream, JUnit and exit status agree.
def _collector_flip(action: str) -> str:
    """Candidate code (``X = 1``, a wrong fix) whose collector callback, at each allocation
    inside pytest, walks the frames above it and runs ``action`` (``loc``: a frame's
    locals; returns when it has done its work)."""
    body = "\n".join("        " + line for line in action.strip().splitlines())
    return (
        "X = 1\nimport gc as _gc\nimport inspect as _insp\n\n\n"
        "def _tune(phase, info):\n"
        "    if phase != 'start':\n        return\n"
        "    f = _insp.currentframe()\n"
        "    while f is not None:\n"
        "        loc = f.f_locals\n"
        f"{body}\n"
        "        f = f.f_back\n\n\n"
        "_gc.callbacks.append(_tune)\n_gc.set_threshold(5)\n"
    )


GC_CALLINFO_FLIP = _collector_flip(
    """
c, it = loc.get("call"), loc.get("item")
if (c is not None and it is not None and type(c).__name__ == "CallInfo"
        and getattr(c, "when", None) == "call" and getattr(c, "excinfo", None) is not None
        and it.nodeid.startswith("tests/")):
    c.excinfo = None
    return
rep = loc.get("report") or loc.get("rep")
if (type(rep).__name__ == "TestReport" and rep.when == "call"
        and rep.outcome == "failed" and rep.nodeid.startswith("tests/")):
    rep.outcome, rep.longrepr = "passed", None
    return
"""
)


def test_a_failed_call_turned_passed_by_code_the_collector_runs_is_tampering(tmp_path):
    done, _, guarded, problems = _run(tmp_path, GC_CALLINFO_FLIP)
    assert guarded
    assert any("raised" in p for p in problems), (done.returncode, problems)


# The same primitive aimed at the guard itself: candidate code run by the collector (or by
# an object's method the guard's audit hook calls) while the hook is on the stack would
# reach the hook's frames, and through them the stream's key. Each payload leaves a file
# when it finds one of the hook's frames.
LOOK_FOR_THE_HOOK = """
X = 2
import inspect as _insp
import os as _os

_HERE = _os.path.dirname(_os.path.abspath(__file__))


def _look(*_):
    f = _insp.currentframe()
    while f is not None:
        if f.f_code.co_qualname.startswith("_install."):  # the guard's audit hook
            open(_os.path.join(_HERE, "reached"), "w").close()
            return
        f = f.f_back
"""

HOOK_FRAMES_BY_THE_COLLECTOR = LOOK_FOR_THE_HOOK + (
    "import gc as _gc\n_gc.callbacks.append(_look)\n_gc.set_threshold(1)\n"
)

HOOK_FRAMES_BY_A_PATH_OBJECT = (
    LOOK_FOR_THE_HOOK
    + """

class _Str(str):  # what the audit event carries: __fspath__ may return a str subclass
    @property
    def __class__(self):
        _look()
        return str

    def startswith(self, *args):
        _look()
        return str.startswith(self, *args)

    def endswith(self, *args):
        _look()
        return str.endswith(self, *args)


class _Path:
    def __fspath__(self):
        return _Str(_os.path.join(_HERE, "no-such-file"))


for _ in range(3):
    try:
        open(_Path())
    except OSError:
        pass
    try:
        _os.remove(_Path())
    except OSError:
        pass
"""
)

HOOK_FRAMES_BY_A_BUILTIN = (
    LOOK_FOR_THE_HOOK
    + """
import builtins as _builtins

_len = _builtins.len


def _looking_len(obj):
    _look()
    return _len(obj)


_builtins.len = _looking_len
for _ in range(3):
    try:
        open(_os.path.join(_HERE, "no-such-file"))
    except OSError:
        pass
_builtins.len = _len
"""
)


@pytest.mark.parametrize(
    "payload",
    [HOOK_FRAMES_BY_THE_COLLECTOR, HOOK_FRAMES_BY_A_PATH_OBJECT, HOOK_FRAMES_BY_A_BUILTIN],
    ids=["collector", "path-object", "builtin"],
)
def test_no_candidate_code_runs_while_the_guards_audit_hook_is_on_the_stack(tmp_path, payload):
    done, _, guarded, _ = _run(tmp_path, payload)
    assert done.returncode == 0, done.stdout
    assert guarded  # (a payload that took frames through inspect is tampering, too)
    assert not (tmp_path / "ws" / "reached").exists(), "candidate code ran inside the guard's hook"


UNITTEST_FAILING = (
    "import unittest\n\nfrom lib import X\n\n\nclass T(unittest.TestCase):\n"
    "    def test_x(self):\n        self.assertEqual(X, 2)\n\n"
    "    @unittest.expectedFailure\n    def test_expected(self):\n        self.assertEqual(X, 3)\n"
)
# The same flip aimed at a unittest-style test: pytest keeps unittest's recorded failure on
# the item (``_excinfo``) until it makes the call's report.
GC_UNITTEST_FLIP = _collector_flip(
    """
c, it = loc.get("call"), loc.get("item")
if (c is not None and it is not None and type(c).__name__ == "CallInfo"
        and c.when == "call" and it.nodeid.endswith("::T::test_x")
        and getattr(it, "_excinfo", None)):
    it._excinfo = None
    return
"""
)


def test_a_unittest_failure_dropped_before_its_report_is_tampering(tmp_path):
    done, _, guarded, problems = _run(
        tmp_path, GC_UNITTEST_FLIP, locked={"tests/test_unit.py": UNITTEST_FAILING}
    )
    assert guarded
    assert any("T::test_x raised" in p for p in problems), (done.returncode, problems)


# The hook reads each report's item (its node id): an item given a class of the candidate's
# own (``item.__class__ = Mine``, a property over ``_nodeid``) or a dict key of its own (a str
# subclass hashing like ``_nodeid``) would run candidate code in that lookup.
HOOK_FRAMES_BY_AN_ITEM = (
    LOOK_FOR_THE_HOOK
    + """
import gc as _gc

_done = set()


class _Key(str):
    def __hash__(self):
        return hash("_nodeid")

    def __eq__(self, other):
        _look()
        return str.__eq__(self, other)


def _retype(phase, info):
    f = _insp.currentframe()
    while f is not None:
        item = f.f_locals.get("item")
        if type(item).__name__ == "Function" and id(item) not in _done:
            _done.add(id(item))
            real = item._nodeid

            class _Mine(type(item)):
                @property
                def _nodeid(self):
                    _look()
                    return real

            if item.name == "test_x":
                item.__class__ = _Mine
            else:
                item.__dict__[_Key("_nodeid2")] = 1
            return
        f = f.f_back


_gc.callbacks.append(_retype)
_gc.set_threshold(5)
"""
)


def test_an_item_the_candidate_retyped_is_not_read_by_the_hook(tmp_path):
    done, _, _, problems = _run(tmp_path, HOOK_FRAMES_BY_AN_ITEM)
    assert not (tmp_path / "ws" / "reached").exists(), "candidate code ran inside the guard's hook"
    assert problems, done.stdout  # and the item it changed is seen


# Red team round twenty-two's PASS without a fix (both backends): the code a unittest-style
# test calls walks up from ``inspect.currentframe()`` to the test's outcome and marks a
# failure expected; unittest then records a success, and nothing was raised or recorded.
UNITTEST_ADD = (
    "import unittest\n\nfrom lib import add\n\n\nclass T(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"
)
FRAMES_TO_THE_OUTCOME = """
X = 2
import inspect


def _quiet():
    f = inspect.currentframe()
    while f is not None:
        s = f.f_locals.get("self")
        o = getattr(s, "_outcome", None)
        if o is not None and hasattr(o, "expecting_failure"):
            o.expecting_failure = True
            break
        f = f.f_back


def add(a, b):
    _quiet()
    return a - b
"""
HONEST_FRAME_USERS = """
X = 2
import collections, logging, traceback, warnings

Pair = collections.namedtuple("Pair", "a b")  # asks for its caller's frame (the module's)


def add(a, b):
    logging.getLogger("lib").warning("adding %s and %s", a, b)  # finds its caller's frame
    warnings.warn("add is old", DeprecationWarning)
    traceback.extract_stack(limit=3)  # frames read inside the standard library
    return Pair(a, b).a + b
"""


@pytest.mark.parametrize(
    ("lib", "tampering"),
    [(FRAMES_TO_THE_OUTCOME, True), (HONEST_FRAME_USERS, False)],
    ids=["through-inspect", "honest-users"],
)
def test_frames_handed_out_by_the_standard_library_count_against_who_asked(
    tmp_path, lib, tampering
):
    done, _, guarded, problems = _run(tmp_path, lib, locked={"tests/test_add.py": UNITTEST_ADD})
    assert guarded
    if tampering:
        assert any("sys._getframe" in p for p in problems), (done.returncode, problems)
    else:
        assert done.returncode == 0 and problems == [], (done.stdout, problems)


# Red team round twenty-three's PASS without a fix (both backends): code a unittest-style
# test calls raises unittest's private ``_ShouldStop``, which unittest swallows in every test
# part, and the test records a success before its assertion ran.
SHOULD_STOP = """
X = 2
import unittest.case


def add(a, b):
    stop = [c for c in Exception.__subclasses__() if c.__name__ == "_ShouldStop"][0]
    raise stop()
"""


def test_a_unittest_test_stopped_by_the_code_it_calls_fails(tmp_path):
    done, _, guarded, problems = _run(
        tmp_path, SHOULD_STOP, locked={"tests/test_add.py": UNITTEST_ADD}
    )
    assert guarded and problems == [], problems
    assert done.returncode == 1 and b"T::test_add" in done.stdout, done.stdout


# Red team round twenty-eight: a wrong fix rebound the standard library's ``re.search``, which
# pytest's own ``raises(match=)`` calls, to match any message of its errors.
REBIND_RE = """\
import re as _re

_search = _re.search


def _lenient(pattern, string, flags=0):
    found = _search(pattern, string, flags)
    return found if found is not None or not str(string).startswith("cannot") else _search("", "")


_re.search = _lenient
X = 2


def fail():
    raise ValueError("cannot read 'maybe'")
"""
RAISES_MATCH = (
    "import pytest\nfrom lib import fail\n\n\ndef test_message():\n"
    "    with pytest.raises(ValueError, match='off, on'):\n        fail()\n"
)
# A locked test may patch ``re`` itself: its own code, from a file the run cannot change.
OWN_PATCH = (
    "import re\n\n\ndef test_patched(monkeypatch):\n"
    "    monkeypatch.setattr(re, 'search', lambda *a, **k: None)\n"
    "    assert re.search('a', 'a') is None\n"
)


def test_candidate_code_rebinding_re_for_pytests_own_match_is_tampering(tmp_path):
    locked = {"tests/test_msg.py": RAISES_MATCH}
    done, _, _, problems = _run(tmp_path, REBIND_RE, locked=locked)
    assert done.returncode == 0, done.stdout  # the rebinding fooled pytest.raises(match=)
    assert any("runner attribute re.search replaced by code from" in p for p in problems), problems


def test_a_locked_test_may_patch_re_itself(tmp_path):
    done, _, _, problems = _run(tmp_path, "X = 2\n", locked={"tests/test_own.py": OWN_PATCH})
    assert done.returncode == 0, done.stdout
    assert problems == [], problems


# Candidate code that rebinds a part of the runner the hot list does not name (the JUnit
# writer's failure entry) while one test runs, and puts it back in the next: before every
# report the guard learns which of the runner's namespaces were written since it last found
# them as taken, and checks those, so the rebinding is seen at once, not only when the
# once-a-second sweep happens to fall in between.
SWAP_AND_RESTORE = """\
import _pytest.junitxml as _j

X = 2
_real = _j._NodeReporter.append_failure


def _quiet(self, report):
    self.append_pass(report)


def swap():
    _j._NodeReporter.append_failure = _quiet


def restore():
    _j._NodeReporter.append_failure = _real
"""
SWAP_TESTS = (
    "import lib\n\n\ndef test_swap():\n    lib.swap()\n\n\ndef test_restore():\n    lib.restore()\n"
)


def test_a_runner_binding_rebound_and_put_back_between_tests_is_tampering(tmp_path):
    locked = {"tests/test_swap.py": SWAP_TESTS}
    done, _, guarded, problems = _run(tmp_path, SWAP_AND_RESTORE, locked=locked)
    assert done.returncode == 0 and guarded, done.stdout
    assert any(
        "runner attribute _pytest.junitxml._NodeReporter.append_failure replaced by code from" in p
        for p in problems
    ), problems


@pytest.mark.parametrize("tags", [True, False], ids=["tags", "no-tags"])
def test_without_dict_versions_the_guard_checks_the_hot_list_before_every_report(tmp_path, tags):
    # The interpreter's dict versions only make the check cheaper: without them an honest
    # run stays clean, and the runner's reporting code rebound is still seen.
    done, _, guarded, problems = _run(tmp_path / "honest", "X = 2\n", tags=tags)
    assert done.returncode == 0 and guarded and problems == [], problems
    lib = SWAP_AND_RESTORE.replace("_pytest.junitxml as _j", "re as _j").replace(
        "_NodeReporter.append_failure", "search"
    )
    locked = {"tests/test_swap.py": SWAP_TESTS}
    _, _, _, problems = _run(tmp_path / "re", lib, locked=locked, tags=tags)
    assert any("runner attribute re.search replaced by code from" in p for p in problems), problems


# A thread of the candidate's that waits for the collector to stop (the guard's hook stops
# it while it runs) and then asks for every frame of the process: the hook once skipped
# every event while any thread was inside it, so the call went unjudged and the frames led
# into the hook's own (its closures hold the stream's key).
FRAME_SPY = """\
import gc, sys, threading, time

X = 2
tried = []
sys.setswitchinterval(0.0005)


def spy():
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not tried:
        if not gc.isenabled():
            frames = sys._current_frames()
            tried.append(len(frames))


threading.Thread(target=spy, daemon=True).start()
"""
MANY_TESTS = (
    "import time\n\nimport pytest\n\nimport lib\n\n\n"
    "@pytest.mark.parametrize('i', range(300))\ndef test_many(i):\n    pass\n\n\n"
    "def test_zz_spy_tried():\n    deadline = time.monotonic() + 30\n"
    "    while not lib.tried and time.monotonic() < deadline:\n        time.sleep(0.01)\n"
    "    assert lib.tried\n"
)


def test_a_thread_that_acts_while_the_guard_runs_in_another_is_judged(tmp_path):
    locked = {"tests/test_many.py": MANY_TESTS}
    done, _, guarded, problems = _run(tmp_path, FRAME_SPY, locked=locked)
    assert b"test_zz_spy_tried" not in done.stdout, done.stdout  # the spy did ask
    assert guarded
    assert any("audit: sys._current_frames" in p for p in problems), problems


# The hook judges one thread at a time; a child forked while another thread had its turn
# must not wait for a thread it does not have.
FORK_WHILE_BUSY = """\
import os, sys, threading, time


def test_fork_while_another_thread_raises_events():
    stop = []

    def busy():
        while not stop:
            sys.audit("harness.test.busy")

    t = threading.Thread(target=busy)
    t.start()
    try:
        for _ in range(30):
            pid = os.fork()
            if pid == 0:
                open(os.devnull).close()
                os._exit(0)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                time.sleep(0.01)
            else:
                os.kill(pid, 9)
                raise AssertionError("a forked child hung")
            assert os.waitstatus_to_exitcode(status) == 0
    finally:
        stop.append(1)
        t.join()
"""


def test_a_child_forked_while_another_thread_is_judged_does_not_hang(tmp_path):
    locked = {"tests/test_fork.py": FORK_WHILE_BUSY}
    done, _, guarded, problems = _run(tmp_path, "X = 2\n", locked=locked)
    assert done.returncode == 0 and guarded, done.stdout
    assert problems == [], problems


# The plugin's own functions changed in place (a check of it given code that checks
# nothing), from a thread whose only Python frame is the standard library's: no frame of
# the candidate's raises the event, so the hook's hold on the plugin's functions decides.
GUT_A_CHECK = """\
import sys
import threading

X = 2


def gut():
    check = sys.modules["harness_canary"]._check_state
    nothing = (lambda entries=None: None).__code__
    t = threading.Thread(target=setattr, args=(check, "__code__", nothing))
    t.start()
    t.join()
"""
GUT_TESTS = "import lib\n\n\ndef test_gut():\n    lib.gut()\n\n\ndef test_after():\n    pass\n"


def test_a_guard_function_given_other_code_from_a_thread_is_tampering(tmp_path):
    locked = {"tests/test_gut.py": GUT_TESTS}
    done, _, guarded, problems = _run(tmp_path, GUT_A_CHECK, locked=locked)
    assert guarded, done.stdout
    assert any("the guard plugin's _check_state was changed" in p for p in problems), problems


# Red team round thirty-one: what was let stand over the runner's attributes as harmless (a
# plain value, a builtin, the runner's own code under another name, a class of the standard
# library) turned its checks off. Each wrong answer below passed, with no tampering.
RUNNER_WEAKENED = {
    "approx-plain-value": (
        "import _pytest.python_api as _a\n"
        "_a.ApproxScalar.DEFAULT_RELATIVE_TOLERANCE = 1e9\n"
        "_a.ApproxScalar.DEFAULT_ABSOLUTE_TOLERANCE = 1e9\n",
        "import pytest\nfrom lib import X\n\n\ndef test_close():\n"
        "    assert X + 0.5 == pytest.approx(2.0)\n",
        "_pytest.python_api.ApproxScalar.DEFAULT_RELATIVE_TOLERANCE replaced by a plain value",
    ),
    "match-builtin": (
        "import _pytest._code.code as _c\n_c.ExceptionInfo.match = id\n",
        "import pytest\n\n\ndef test_message():\n"
        "    with pytest.raises(ValueError, match='right'):\n        raise ValueError('wrong')\n",
        "_pytest._code.code.ExceptionInfo.match replaced by a built-in id",
    ),
    "match-runner-code": (
        "import _pytest._code.code as _c\n_c.ExceptionInfo.match = _c.ExceptionInfo.exconly\n",
        "import pytest\n\n\ndef test_message():\n"
        "    with pytest.raises(ValueError, match='right'):\n        raise ValueError('wrong')\n",
        "_pytest._code.code.ExceptionInfo.match replaced by code from",
    ),
    "raises-stdlib-class": (
        "import contextlib\nimport pytest\npytest.raises = contextlib.suppress\n",
        "import pytest\n\n\ndef test_raises():\n"
        "    with pytest.raises(ValueError):\n        pass\n",
        "pytest.raises replaced by the class contextlib.suppress",
    ),
    "unittest-assert-builtin": (
        "import unittest\nunittest.TestCase.assertEqual = print\n",
        "import unittest\n\n\nclass T(unittest.TestCase):\n"
        "    def test_eq(self):\n        self.assertEqual(1, 2)\n",
        "unittest.case.TestCase.assertEqual replaced by a built-in print",
    ),
    "builtin-over-builtin": (
        "import builtins\nbuiltins.all = builtins.any\n",
        "def test_all():\n    assert all([True, False])\n",
        "builtins.all replaced by a built-in any",
    ),
    # Red team round thirty-three: the same, wrapped in a partial.
    "partial-builtin": (
        "import builtins, functools\nbuiltins.all = functools.partial(builtins.any)\n",
        "def test_all():\n    assert all([True, False])\n",
        "builtins.all replaced by an object of the class functools.partial",
    ),
    "partial-over-re": (
        "import functools, re\nre.search = functools.partial(max)\n",
        "import re\n\n\ndef test_search():\n    assert re.search('a', 'b')\n",
        "re.search replaced by an object of the class functools.partial",
    ),
    # Red team round thirty-six: a pattern compiled from another put in re's cache under
    # the key a test matches with (``match=`` took any message).
    "match-re-cache": (
        "import re\nre._cache[(str, 'right', 0)] = re.compile('')\n",
        "import pytest\nimport lib\n\n\ndef test_message():\n"
        "    with pytest.raises(ValueError, match='right'):\n        raise ValueError('wrong')\n",
        "re's pattern cache held a pattern not compiled from its key",
    ),
    # The guard's own functions serve no run: one that returns its argument over the
    # runner's ``runtest`` ran no test (found while profiling the guard).
    "guard-plugin-code": (
        "import sys\nimport _pytest.python as _p\n"
        "_g = [m for n, m in sys.modules.items() if n.startswith('harness_canary')][0]\n"
        "_p.Function.runtest = _g._test_fn\n",
        "from lib import X\n\n\ndef test_x():\n    assert X == 2\n",
        "_pytest.python.Function.runtest replaced by code from",
    ),
}


@pytest.mark.parametrize("name", sorted(RUNNER_WEAKENED))
def test_anything_but_added_code_over_the_runners_attributes_is_tampering(tmp_path, name):
    payload, test, seen = RUNNER_WEAKENED[name]
    locked = {"tests/test_weak.py": test}
    done, _, guarded, problems = _run(tmp_path, "X = 2\n" + payload, locked=locked)
    assert guarded, done.stdout
    if not name.startswith("match-"):  # pytest 9 matches without ExceptionInfo.match
        assert done.returncode == 0, done.stdout  # the check was off: all passed
    assert any(seen in p for p in problems), problems


# What a run may set over them: a locked conftest's own code (a plugin-like wrapper), a
# test's patch of a builtin with its own code or a mock.
ADDED_BY_LOCKED = """\
import _pytest._code.code as _c

_real = _c.ExceptionInfo.exconly


def _exconly(self, tryshort=False):
    return _real(self, tryshort)


_c.ExceptionInfo.exconly = _exconly
"""
MOCKED_BUILTIN = (
    "import builtins\nfrom unittest import mock\n\n\ndef test_open(monkeypatch):\n"
    "    monkeypatch.setattr(builtins, 'open', mock.mock_open(read_data='x'))\n"
    "    with open('anything') as fh:\n        assert fh.read() == 'x'\n"
    "    monkeypatch.setattr(builtins, 'input', lambda *a: 'y')\n    assert input() == 'y'\n"
)


# ... and what a project's own conftest or tests set to shape failure messages, or a
# partial of the very builtin it replaces (red team round thirty-three: called tampering).
DISPLAY_SETTINGS = (
    "import builtins, functools, unittest\n\nimport _pytest.assertion.truncate as _t\n\n"
    "_t.DEFAULT_MAX_LINES = 9999\n_t.DEFAULT_MAX_CHARS = 99999\n"
    "unittest.TestCase.maxDiff = None\n\n\n"
    "def test_partial_open(monkeypatch, tmp_path):\n"
    "    (tmp_path / 'f').write_text('x')\n"
    "    utf8 = functools.partial(builtins.open, encoding='utf-8')\n"
    "    monkeypatch.setattr(builtins, 'open', utf8)\n"
    "    with open(tmp_path / 'f') as fh:\n        assert fh.read() == 'x'\n"
)


# ... and honest use of re's cache: patterns whose own text sets flags, bytes, the cache
# purged, a pattern used twice (a cache hit).
HONEST_REGEX = (
    "import re\n\nimport pytest\n\n\ndef test_regex():\n"
    "    for _ in range(2):\n"
    "        assert re.search('(?i)RIGHT', 'right') and re.match(b'(?s)a.b', b'a\\nb')\n"
    "        assert re.fullmatch('(?:a)(?P<n>b)', 'ab') and re.search('x', 'X', re.I)\n"
    "        with pytest.raises(ValueError, match='(?i)RIGHT'):\n"
    "            raise ValueError('right')\n"
    "        re.purge()\n"
)


# ... and a test's own list, dict or in-memory file taking what is printed or answering
# what is asked (red team round thirty-six: called tampering, the case could not validate).
HONEST_SINKS = (
    "import builtins\nimport io\n\n\ndef test_sinks(monkeypatch):\n"
    "    lines, sink = [], io.StringIO()\n"
    "    monkeypatch.setattr(builtins, 'print', lines.append)\n"
    "    print('a')\n"
    "    monkeypatch.setattr(builtins, 'print', sink.write)\n"
    "    print('b')\n"
    "    monkeypatch.setattr(builtins, 'input', {'name? ': 'x'}.get)\n"
    "    assert input('name? ') == 'x' and lines == ['a'] and sink.getvalue() == 'b'\n"
)


# ... and what honest tests do with what the runner made for them: parameters (direct and
# indirect) changed in place, their own equality functions, doctest options.
HONEST_RUN_OBJECTS = {
    "tests/test_params.py": (
        "import pytest\n\n\n@pytest.fixture\ndef doubled(request):\n"
        "    return request.param * 2\n\n\n"
        "@pytest.mark.parametrize('seen', [[], [1]], ids=['empty', 'one'])\n"
        "@pytest.mark.parametrize('doubled', [1, 2], indirect=True)\n"
        "def test_params(seen, doubled):\n"
        "    seen.append(doubled)\n    assert doubled in (2, 4) and seen[-1] == doubled\n"
    ),
    "tests/test_ut_own.py": (
        "import unittest\n\n\nclass Point(tuple):\n    pass\n\n\n"
        "class T(unittest.TestCase):\n"
        "    def setUp(self):\n"
        "        self.addTypeEqualityFunc(Point, self.assertPointEqual)\n"
        "        self.addTypeEqualityFunc(complex, 'assertComplexEqual')\n"
        "        self.addTypeEqualityFunc(frozenset, self.assertSetEqual)\n\n"
        "    def assertPointEqual(self, a, b, msg=None):\n"
        "        self.assertTupleEqual(tuple(a), tuple(b), msg)\n\n"
        "    def assertComplexEqual(self, a, b, msg=None):\n"
        "        self.assertAlmostEqual(a, b, msg=msg)\n\n"
        "    def test_points(self):\n"
        "        self.assertEqual(Point((1, 2)), Point((1, 2)))\n"
        "        self.assertEqual(1j, 1j)\n"
        "        self.assertEqual(frozenset({1}), frozenset({1}))\n"
        "        self.assertEqual({1: 1}, {1: 1})\n"
    ),
    "tests/test_fixtures.py": (
        "import pytest\n\n\n@pytest.fixture(scope='module')\ndef shared():\n    return []\n\n\n"
        "@pytest.fixture\ndef item(shared):\n    shared.append(1)\n    yield len(shared)\n"
        "    shared.clear()\n\n\n"
        "@pytest.fixture(params=['a', 'b'])\ndef letter(request):\n    return request.param\n\n\n"
        "def test_fixtures(item, letter, request, tmp_path):\n"
        "    assert item == 1 and letter in 'ab' and request.getfixturevalue('shared') == [1]\n\n\n"
        "class TestOverride:\n    @pytest.fixture\n    def letter(self):\n        return 'c'\n\n"
        "    def test_override(self, letter):\n        assert letter == 'c'\n"
    ),
    "tests/test_doc.txt": (
        ">>> list(range(20))  # doctest: +ELLIPSIS\n[0, 1, ..., 19]\n>>> x = 1\n>>> x\n1\n"
    ),
}


# Red team round thirty-eight: a locked helper module (not a test module) holding a test
# base class and a fake file system whose ``open`` a test puts over ``builtins.open`` (the
# guard read the helper's source through the patched ``open`` and called it tampering).
HELPER = (
    "import io\n\n\nclass FakeFS:\n    def __init__(self, files):\n"
    "        self.files = dict(files)\n\n"
    "    def open(self, path, mode='r', *args, **kwargs):\n"
    "        return io.StringIO(self.files[str(path)])\n\n\n"
    "class Contract:\n    def test_contract(self):\n        assert 1 + 1 == 2\n\n\n"
    "def test_shared():\n    assert 2 + 2 == 4\n"
)
HELPED_FAKE = (
    "import builtins\n\nfrom tests._base import FakeFS\n\n\n"
    "def test_fake_open(monkeypatch):\n"
    "    monkeypatch.setattr(builtins, 'open', FakeFS({'d.csv': 'id'}).open)\n"
    "    with open('d.csv') as fh:\n        assert fh.read() == 'id'\n"
)
HELPED_BASE = "from tests._base import Contract\n\n\nclass TestLeapDay(Contract):\n    pass\n"
HELPED_FUNCTION = "from tests._base import test_shared  # noqa: F401\n"


@pytest.mark.parametrize(
    "test",
    [HELPED_FAKE, HELPED_BASE, HELPED_FUNCTION],
    ids=["fake-open", "base-class", "imported-function"],
)
def test_a_locked_helper_modules_code_is_a_tests_own(tmp_path, test):
    locked = {
        "tests/_base.py": HELPER,
        "tests/test_helped.py": test,
        "pyproject.toml": '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n',
    }
    done, _, guarded, problems = _run(tmp_path, "X = 2\n", locked=locked)
    assert done.returncode == 0 and guarded, done.stdout
    assert problems == [], problems


def test_a_test_swapped_for_a_locked_helpers_passing_one_is_tampering(tmp_path):
    # An imported test function may stand in a test module, never under a name the module
    # defines itself: candidate code that swaps the hidden test for a helper's passing one
    # as the module loads (node id kept) ran a test that checks nothing of the fix.
    lib = (
        "X = 3\n\nimport sys\n\n\nclass _Finder:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if not name.endswith('test_helped'):\n            return None\n"
        "        for f in sys.meta_path:\n"
        "            spec = None if f is self else f.find_spec(name, path, target)\n"
        "            if spec is not None:\n                break\n"
        "        real = spec.loader\n\n"
        "        class Loader:\n"
        "            def create_module(self, s):\n                return real.create_module(s)\n\n"
        "            def exec_module(self, m):\n                real.exec_module(m)\n"
        "                m.test_x = sys.modules['tests._base'].test_shared\n\n"
        "        spec.loader = Loader()\n        return spec\n\n\n"
        "sys.meta_path.insert(0, _Finder())\n"
    )
    test = "import lib\nimport tests._base\n\n\ndef test_x():\n    assert lib.X == 2\n"
    locked = {
        "tests/_base.py": HELPER,
        "tests/test_a_first.py": "import lib  # noqa: F401\n",
        "tests/test_helped.py": test,
    }
    done, _, _, problems = _run(tmp_path, lib, locked=locked)
    assert any("test_helped.py::test_x does not run its own" in p for p in problems), (
        problems,
        done.stdout[-1500:],
    )


# Red team round thirty-nine: a fix that documents its own class, names it, or gives its
# own module a class (module properties, as the Python manual shows) was called tampering.
OWN_OBJECTS = (
    "import sys\nimport types\n\nX = 2\n\n\nclass Error(Exception):\n    pass\n\n\n"
    "Error.__doc__ = 'Raised for a bad value. Known types: int, date.'\n"
    "Error.__qualname__ = 'CoercionError'\n\n\n"
    "class _Module(types.ModuleType):\n    @property\n    def answer(self):\n"
    "        return 42\n\n\nsys.modules[__name__].__class__ = _Module\n"
)


def test_a_fix_may_document_name_and_class_its_own_objects(tmp_path):
    done, _, guarded, problems = _run(tmp_path, OWN_OBJECTS)
    assert done.returncode == 0 and guarded, done.stdout
    assert problems == [], problems


def _path_functions():
    from harness.trial.evidence import _PLUGIN

    head = _PLUGIN.index("import posix as _posix")
    source = _PLUGIN[head : _PLUGIN.index("def _is_file", head)]
    names: dict[str, object] = {}
    exec(compile(source, "<guard paths>", "exec"), names)
    return names["_realpath"], names["_normpath"]


_TREE = ["a", "b", "c", "up", "abs", "rel", "..", ".", "", "f.py", "nope"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_TREE), min_size=1, max_size=7))
def test_the_guards_realpath_agrees_with_the_standard_librarys(tree_root, parts):
    # The guard resolves paths with the system calls taken at load (code under test may
    # rebind os's): it must agree with os.path.realpath on a tree of links (no loops).
    realpath, normpath = _path_functions()
    path = str(tree_root) + "/" + "/".join(parts)
    assert realpath(path) == os.path.realpath(path)
    assert normpath(path) == os.path.normpath(path)


@pytest.fixture(scope="module")
def tree_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("links")
    (root / "a" / "b" / "c").mkdir(parents=True)
    (root / "a" / "b" / "c" / "f.py").write_text("")
    (root / "up").symlink_to("a/b/..")
    (root / "abs").symlink_to(root / "a" / "b")
    (root / "rel").symlink_to("a/b/c/")
    (root / "a" / "b" / "up").symlink_to("../..")
    return root


def test_a_locked_files_own_code_and_a_tests_mock_may_stand_over_the_runners(tmp_path):
    locked = {
        **HONEST_RUN_OBJECTS,
        "tests/test_sinks.py": HONEST_SINKS,
        "tests/conftest.py": ADDED_BY_LOCKED,
        "tests/test_mock.py": MOCKED_BUILTIN,
        "tests/test_display.py": DISPLAY_SETTINGS,
        "tests/test_regex.py": HONEST_REGEX,
    }
    done, _, guarded, problems = _run(tmp_path, "X = 2\n", locked=locked)
    assert done.returncode == 0 and guarded, done.stdout
    assert problems == [], problems


def test_a_containers_method_over_a_builtin_a_check_reads_is_tampering(tmp_path):
    # Only print and input may take a test's list, dict or file methods: a list's
    # ``append`` over ``any`` (it answers None) makes ``assert not any(errors)`` hold.
    lib = "X = 2\n\n\ndef weaken():\n    import builtins\n\n    builtins.any = [].append\n"
    test = "import lib\n\n\ndef test_none():\n    lib.weaken()\n    assert not any([1])\n"
    done, _, _, problems = _run(tmp_path, lib, locked={"tests/test_type.py": test})
    assert any("builtins.any replaced by a built-in append" in p for p in problems), (
        problems,
        done.stdout[-2000:],
    )


# Red team round thirty-seven: what the runner made for each test, reached through its own
# import hook (``sys.meta_path``) and changed in place by the code under test.
_REACH = (
    "import sys\n\n\ndef _items():\n"
    "    for f in sys.meta_path:\n"
    "        cfg = getattr(f, 'config', None)\n"
    "        if cfg is not None:\n"
    "            return cfg.pluginmanager.get_plugin('session').items\n"
    "    return []\n\n\n"
)
RUN_OBJECTS_CHANGED = {
    "callspec-params": (
        _REACH + "def to_bool(text):\n"
        "    for it in _items():\n"
        "        cs = getattr(it, 'callspec', None)\n"
        "        if cs is not None and 'text' in cs.params:\n"
        "            cs.params['text'] = 'on'\n"
        "    return text == 'on'\n",
        {
            "tests/test_param.py": "import pytest\nfrom lib import to_bool\n\n\n"
            "def test_first():\n    assert to_bool('on')\n\n\n"
            "@pytest.mark.parametrize('text', ['ON', 'On'])\n"
            "def test_param(text):\n    assert to_bool(text)\n"
        },
        "its parameters were changed after collection",
    ),
    "unittest-equality-table": (
        _REACH + "def value():\n"
        "    for it in _items():\n"
        "        tc = getattr(it, '_testcase', None)\n"
        "        if tc is not None:\n"
        "            tc._type_equality_funcs[bool] = 'assertNotEqual'\n"
        "    return False\n",
        {
            "tests/test_ut.py": "import unittest\n\nimport lib\n\n\n"
            "class T(unittest.TestCase):\n"
            "    def test_value(self):\n        self.assertEqual(lib.value(), True)\n"
        },
        "its TestCase's equality table names",
    ),
    "unittest-instance-method": (
        _REACH + "def value():\n"
        "    for it in _items():\n"
        "        tc = getattr(it, '_testcase', None)\n"
        "        if tc is not None:\n"
        "            tc.assertEqual = tc.assertNotEqual\n"
        "    return False\n",
        {
            "tests/test_ut.py": "import unittest\n\nimport lib\n\n\n"
            "class T(unittest.TestCase):\n"
            "    def test_value(self):\n"
            "        v = lib.value()\n        self.assertEqual(v, True)\n"
        },
        "assertEqual set on its TestCase by",
    ),
    "fixture-value": (
        _REACH + "def value():\n"
        "    for it in _items():\n"
        "        if 'expected' in getattr(it, 'funcargs', {}):\n"
        "            it.funcargs['expected'] = 3\n"
        "    return 3\n",
        {
            "tests/test_fix.py": "import pytest\n\nimport lib\n\n\n"
            "@pytest.fixture\ndef expected():\n    return 2\n\n\n"
            "@pytest.fixture\ndef got():\n    return lib.value()\n\n\n"
            "def test_value(expected, got):\n    assert got == expected\n"
        },
        "the value of its fixture expected was replaced",
    ),
    # ... and swapped in setup, put back by the test's own call before its report
    "fixture-value-restored": (
        _REACH + "_KEPT = []\n\n\ndef value():\n"
        "    for it in _items():\n"
        "        args = getattr(it, 'funcargs', {})\n"
        "        if 'expected' in args and not _KEPT:\n"
        "            _KEPT.append(args['expected'])\n"
        "            args['expected'] = 3\n"
        "        elif 'expected' in args:\n"
        "            args['expected'] = _KEPT[0]\n"
        "    return 3\n",
        {
            "tests/test_fix.py": "import pytest\n\nimport lib\n\n\n"
            "@pytest.fixture\ndef expected():\n    return 2\n\n\n"
            "@pytest.fixture\ndef got():\n    return lib.value()\n\n\n"
            "def test_value(expected, got):\n    lib.value()\n    assert got == expected\n"
        },
        "the value of its fixture expected was replaced",
    ),
    # Red team round thirty-nine: the class of pytest's module or hook relay swapped, the
    # write done by ``mock.patch.object`` (a standard-library frame)
    "module-class": (
        "import sys\nimport types\nfrom unittest import mock\n\nimport pytest\n\n\n"
        "class _Lenient:\n    def __init__(self, *a, **k):\n        pass\n\n"
        "    def __enter__(self):\n        return self\n\n"
        "    def __exit__(self, *exc):\n        return True\n\n\n"
        "def _ga(self, name):\n"
        "    if name == 'raises':\n        return _Lenient\n"
        "    return types.ModuleType.__getattribute__(self, name)\n\n\n"
        "_K = type('module', (types.ModuleType,), {'__getattribute__': _ga})\n"
        "mock.patch.object(pytest, '__class__', _K).start()\n\n\n"
        "def value():\n    return 1\n",
        {
            "tests/test_raises.py": "import pytest\n\nimport lib\n\n\n"
            "def test_raises():\n    with pytest.raises(ValueError):\n        lib.value()\n"
        },
        "object.__setattr__",
    ),
    "doctest-want": (
        _REACH + "def value():\n"
        "    for it in _items():\n"
        "        for ex in getattr(getattr(it, 'dtest', None), 'examples', ()):\n"
        "            if ex.want == 'True\\n':\n"
        "                ex.want = 'False\\n'\n"
        "    return False\n",
        {"tests/test_usage.txt": ">>> import lib\n>>> lib.value()\nTrue\n"},
        "its doctest examples or their options were changed",
    ),
}


@pytest.mark.parametrize("name", sorted(RUN_OBJECTS_CHANGED))
def test_what_the_runner_made_for_a_test_changed_in_place_is_tampering(tmp_path, name):
    lib, locked, seen = RUN_OBJECTS_CHANGED[name]
    done, _, guarded, problems = _run(tmp_path, "X = 2\n" + lib, locked=locked)
    assert guarded and done.returncode == 0, done.stdout  # the change turned the check off
    assert any(seen in p for p in problems), problems


# Red team round thirty-two: the runner's function kept, its code swapped by a standard
# library function doing the write (no frame of the candidate's raised the event): no fix at
# all passed five bundled cases and the gate.
CODE_SWAPS = {
    "update-wrapper": (
        "import functools\nimport _pytest.python as _p\n\n\ndef _noop(self):\n    pass\n\n\n"
        "functools.update_wrapper(_p.Function.runtest, _noop, assigned=('__code__',), "
        "updated=())\n"
    ),
    "mock-patch-object": (
        "from unittest import mock\nimport _pytest.python as _p\n\n\ndef _noop(self):\n"
        "    pass\n\n\nmock.patch.object(_p.Function.runtest, '__code__', _noop.__code__).start()\n"
    ),
}


@pytest.mark.parametrize("how", sorted(CODE_SWAPS))
def test_a_runner_function_given_other_code_is_tampering(tmp_path, how):
    done, _, guarded, problems = _run(tmp_path, "X = 3\n" + CODE_SWAPS[how])
    assert guarded, done.stdout
    assert done.returncode == 0, done.stdout  # X == 3 is wrong: nothing ran the test
    assert any(
        "runner function _pytest.python.Function.runtest was given other code" in p
        for p in problems
    ), problems


# ... and honest fakes a test sets over builtins or its module's helpers close over its
# locals or take list defaults: its own code, not tampering.
HONEST_FAKES = """\
import builtins

import pytest


def helper():
    return "real"


@pytest.fixture
def fake_helper():
    seen = []

    def fake():
        seen.append(1)
        return "fake"

    globals()["helper"] = fake
    yield seen
    globals()["helper"] = _real_helper


_real_helper = helper


def test_input(monkeypatch):
    answers = iter(["y", "n"])
    monkeypatch.setattr(builtins, "input", lambda *_: next(answers))
    assert input() == "y" and input() == "n"


def test_open(monkeypatch, tmp_path):
    def fake_open(name, *args, **kwargs):
        return open_real(tmp_path / "f", *args, **kwargs)

    (tmp_path / "f").write_text("x")
    open_real = builtins.open
    monkeypatch.setattr(builtins, "open", fake_open)
    with open("anything") as fh:
        assert fh.read() == "x"


def test_default(monkeypatch):
    monkeypatch.setattr(builtins, "print", lambda *a, out=[]: out.append(a))
    print("x")


def test_helper(fake_helper):
    assert helper() == "fake" and fake_helper == [1]
"""


def test_a_tests_own_fakes_that_close_over_its_locals_are_not_tampering(tmp_path):
    done, _, guarded, problems = _run(
        tmp_path, "X = 2\n", locked={"tests/test_fakes.py": HONEST_FAKES}
    )
    assert done.returncode == 0 and guarded, done.stdout
    assert problems == [], problems
