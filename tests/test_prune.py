"""Leased cache entries (exported agent environments): swept once no live process holds them."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from harness.sandbox.owner import lease, prune_leased


def _entry(root: Path, key: str) -> None:
    (root / key / "bin").mkdir(parents=True)
    (root / key / "bin" / "python").write_text("")
    (root / f"{key}.json").write_text("{}")


def test_only_entries_without_a_live_lease_go(tmp_path: Path, live_pid: int, dead_pid: int) -> None:
    used, stale, never = "a" * 12, "b" * 12, "c" * 12
    for key in (used, stale, never):
        _entry(tmp_path, key)
    (tmp_path / f".lease-{used}-p{live_pid}").touch()
    (tmp_path / f".lease-{used}-p{dead_pid}").touch()
    (tmp_path / f".lease-{stale}-p{dead_pid}").touch()
    (tmp_path / f".export-p{dead_pid}-x1y2z3w4").mkdir()  # an export killed halfway
    (tmp_path / f".export-p{live_pid}-x1y2z3w4").mkdir()  # an export in progress
    (tmp_path / "notes.txt").write_text("not ours")

    removed = prune_leased(tmp_path)

    assert sorted(p.name for p in removed) == sorted(
        [stale, f"{stale}.json", never, f"{never}.json", f".export-p{dead_pid}-x1y2z3w4"]
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [
            ".lock",
            f".lease-{used}-p{live_pid}",
            f".export-p{live_pid}-x1y2z3w4",
            used,
            f"{used}.json",
            "notes.txt",
        ]
    )


def test_a_reused_pid_holds_no_lease(tmp_path: Path) -> None:
    key = "d" * 12
    _entry(tmp_path, key)
    proc = subprocess.Popen(["sleep", "600"])
    try:
        lease_file = tmp_path / f".lease-{key}-p{proc.pid}"
        lease_file.touch()
        hour_ago = time.time() - 3600  # written before this process started: not its lease
        os.utime(lease_file, (hour_ago, hour_ago))
        assert {p.name for p in prune_leased(tmp_path)} == {key, f"{key}.json"}
    finally:
        proc.kill()
        proc.wait()


def test_this_process_lease_keeps_the_entry_and_a_held_lock_skips_the_sweep(
    tmp_path: Path,
) -> None:
    key = "e" * 12
    with lease(tmp_path, key):
        _entry(tmp_path, key)
        assert prune_leased(tmp_path) == []  # busy: an export may be in progress
        (tmp_path / ("f" * 12)).mkdir()
        assert prune_leased(tmp_path) == []
    assert [p.name for p in prune_leased(tmp_path)] == ["f" * 12]
    assert (tmp_path / key).is_dir()


def test_missing_root_is_nothing_to_do(tmp_path: Path) -> None:
    assert prune_leased(tmp_path / "absent") == []
