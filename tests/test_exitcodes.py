"""The one table from exceptions to exit codes, and the CLI's catch-all."""

from __future__ import annotations

import errno
import inspect

import pytest
from click.testing import CliRunner

import harness.errors as errors
from harness import cli
from harness.exitcodes import EXCEPTION_TABLE, ExitCode, exit_for_exception


def _harness_errors() -> list[type[BaseException]]:
    return [
        obj
        for _, obj in inspect.getmembers(errors, inspect.isclass)
        if issubclass(obj, errors.HarnessError)
    ]


@pytest.mark.parametrize("kind", _harness_errors(), ids=lambda k: k.__name__)
def test_every_harness_error_has_a_row_of_its_own_or_a_base_row(kind):
    code, _ = exit_for_exception(kind.__new__(kind))
    assert code is not ExitCode.INTERNAL


def test_a_subclass_row_precedes_the_row_of_its_base():
    kinds = [row[0] for row in EXCEPTION_TABLE]
    for i, kind in enumerate(kinds):
        for base in kinds[:i]:
            assert not issubclass(kind, base), f"{kind.__name__} is shadowed by {base.__name__}"


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (errors.ConfigError("bad", field="k"), ExitCode.USAGE),
        (errors.LockMismatchError("changed"), ExitCode.USAGE),
        (errors.SandboxUnavailableError("no bwrap"), ExitCode.BLOCKED),
        (errors.InvalidRunError("system changed"), ExitCode.BLOCKED),
        (errors.StoreIntegrityError("edited"), ExitCode.BLOCKED),
        (errors.StoreError("no run 'x'"), ExitCode.USAGE),
        (OSError(errno.ENOSPC, "No space left on device"), ExitCode.BLOCKED),
        (OSError(errno.EROFS, "Read-only file system"), ExitCode.BLOCKED),
        (RuntimeError("a bug"), ExitCode.INTERNAL),
        (KeyError("a bug"), ExitCode.INTERNAL),
        (OSError(errno.ENOENT, "a bug, not the machine"), ExitCode.INTERNAL),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(v),
)
def test_exit_for_exception(exc, code):
    assert exit_for_exception(exc)[0] is code


def test_a_store_error_caused_by_a_full_disk_blocks():
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as inner:
            raise errors.StoreError("cannot write record") from inner
    except errors.StoreError as exc:
        assert exit_for_exception(exc)[0] is ExitCode.BLOCKED


def test_an_internal_error_exits_5_with_a_request_to_report_and_no_traceback(monkeypatch, tmp_path):
    def boom(*_a, **_k):
        raise RuntimeError("injected")

    monkeypatch.setattr("harness.project.load_project", boom)
    result = CliRunner().invoke(cli.main, ["run", "--release", "x", "--project", str(tmp_path)])
    assert result.exit_code == ExitCode.INTERNAL
    assert "please report" in result.output
    assert "injected" in result.output
    assert "Traceback" not in result.output


def test_an_interrupt_says_how_to_resume(monkeypatch, tmp_path):
    def interrupt(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr("harness.project.load_project", interrupt)
    result = CliRunner().invoke(cli.main, ["run", "--release", "x", "--project", str(tmp_path)])
    assert result.exit_code == 130
    assert "resume" in result.output
