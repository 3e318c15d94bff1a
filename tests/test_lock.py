"""Task-set lock: pin digests, refuse rewrites beneath scores, name changed files."""

from __future__ import annotations

import pytest

from harness.cases.load import load_cases
from harness.cases.lock import check_lock, lock_cases, read_lock, task_set_digest, write_lock
from harness.errors import LockMismatchError


def test_lock_then_check_clean(make_case, tmp_path):
    d = make_case()
    cases = load_cases(d.parent)
    lock, added = lock_cases(cases, read_lock(tmp_path / "l.yaml", "golden"))
    assert added == ["tiny v1"]
    write_lock(tmp_path / "l.yaml", lock)
    assert check_lock(load_cases(d.parent), read_lock(tmp_path / "l.yaml", "golden")) == []


def test_rewritten_case_is_named_with_its_files(make_case, tmp_path):
    d = make_case()
    lock, _ = lock_cases(load_cases(d.parent), read_lock(tmp_path / "l.yaml", "golden"))
    write_lock(tmp_path / "l.yaml", lock)
    (d / "hidden" / "test_hidden.py").write_text("easier\n")
    [m] = check_lock(load_cases(d.parent), read_lock(tmp_path / "l.yaml", "golden"))
    assert m.kind == "changed" and m.changed_files == ("hidden/test_hidden.py",)
    assert "tiny v1" in m.describe() and "bump `version`" in m.describe()
    with pytest.raises(LockMismatchError, match=r"hidden/test_hidden\.py"):
        lock_cases(load_cases(d.parent), read_lock(tmp_path / "l.yaml", "golden"))


def test_new_version_is_added_and_old_kept(make_case, tmp_path):
    d = make_case()
    lock, _ = lock_cases(load_cases(d.parent), read_lock(tmp_path / "l.yaml", "golden"))
    text = (d / "case.yaml").read_text().replace("version: 1", "version: 2")
    (d / "case.yaml").write_text(text)
    lock2, added = lock_cases(load_cases(d.parent), lock)
    assert added == ["tiny v2"] and set(lock2.cases["tiny"]) == {1, 2}


def test_task_set_digest_depends_on_case_content(make_case):
    d = make_case()
    before = task_set_digest("golden", load_cases(d.parent))
    (d / "repo" / "pkg" / "mod.py").write_text("def answer():\n    return 0\n")
    assert task_set_digest("golden", load_cases(d.parent)) != before
