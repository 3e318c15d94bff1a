"""harness._safefs: bounded, non-blocking primitives for what the agent wrote.

The tar extraction is exercised as it runs on Debian 12's Python 3.11.2, where
``extractall(filter=...)`` and ``tarfile.data_filter`` do not exist: the interpreter's
filter support is removed for these tests, and one test runs the module under
``/usr/bin/python3`` itself when that is an older 3.11.
"""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import tarfile
import textwrap
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness import _safefs
from harness._safefs import (
    MAX_MTIME,
    UnreadableEntry,
    UnsafeArchive,
    copy_tree,
    loads_json,
    read_regular,
    rmtree,
    safe_extract,
    storable,
    tree_too_deep,
)
from harness.trial.workspace import extract_tree, pack_tree


@pytest.fixture(autouse=True)
def no_filter_support(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Make this interpreter's tarfile look like 3.11.2's: no extraction filters."""
    for name in ("data_filter", "tar_filter", "fully_trusted_filter"):
        monkeypatch.delattr(tarfile, name, raising=False)
    original = tarfile.TarFile.extractall

    def extractall(self: tarfile.TarFile, *args: object, **kwargs: object) -> None:
        if "filter" in kwargs:
            raise TypeError("extractall() got an unexpected keyword argument 'filter'")
        original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(tarfile.TarFile, "extractall", extractall)
    yield


def _tar(*members: tuple[tarfile.TarInfo, bytes | None]) -> tarfile.TarFile:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return tarfile.open(fileobj=io.BytesIO(buf.getvalue()))


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, link, 0o6777
    return info


def test_a_plain_tree_round_trips_without_filter_support(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "a.py").write_text("x = 1\n")
    (src / "run.sh").write_text("echo hi\n")
    (src / "run.sh").chmod(0o755)
    (src / "link").symlink_to("pkg/a.py")
    (src / "away").symlink_to("/etc/passwd")  # kept inert: the verifier tree leaves it out
    out = tmp_path / "out"
    extract_tree(pack_tree(src), out)
    assert (out / "pkg" / "a.py").read_text() == "x = 1\n"
    assert os.access(out / "run.sh", os.X_OK)
    assert os.readlink(out / "link") == "pkg/a.py"
    assert os.readlink(out / "away") == "/etc/passwd"


@pytest.mark.parametrize(
    ("member", "why"),
    [
        (_member("/etc/evil"), "absolute"),
        (_member("a/../../evil"), "'..'"),
        (_member("dev", tarfile.CHRTYPE), "device"),
        (_member("fifo", tarfile.FIFOTYPE), "device, FIFO"),
        (_member("hard", tarfile.LNKTYPE, "/etc/passwd"), "not in the tree"),
        (_member("up", tarfile.SYMTYPE, "../../x"), "leaves the tree"),
        (_member("abs", tarfile.SYMTYPE, "/etc"), "leaves the tree"),
    ],
)
def test_unsafe_members_are_refused(tmp_path: Path, member: tarfile.TarInfo, why: str) -> None:
    data = b"x" if member.isreg() else None
    with _tar((member, data)) as tar, pytest.raises(UnsafeArchive, match=why):
        safe_extract(tar, tmp_path / "out")
    assert not (tmp_path / "evil").exists()


def test_nothing_is_written_through_a_link_even_an_inner_one(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    members = [
        (_member("d", tarfile.SYMTYPE, str(outside)), None),
        (_member("d/pwned"), b"x"),
    ]
    with _tar(*members) as tar, pytest.raises(UnsafeArchive, match="through"):
        safe_extract(tar, tmp_path / "out", outside_links="keep")
    assert list(outside.iterdir()) == []


def test_modes_keep_permission_bits_only_and_hard_links_inside_work(tmp_path: Path) -> None:
    members = [(_member("f"), b"data"), (_member("g", tarfile.LNKTYPE, "f"), None)]
    with _tar(*members) as tar:
        safe_extract(tar, tmp_path / "out")
    assert (tmp_path / "out" / "f").stat().st_mode & 0o7777 == 0o755
    assert (tmp_path / "out" / "g").read_bytes() == b"data"


@pytest.mark.parametrize("target", ["f", "/etc/passwd"], ids=["inside", "outside"])
def test_a_hard_link_to_a_symlink_links_the_link_never_its_target(
    tmp_path: Path, target: str
) -> None:
    """What an agent leaves with ``os.link`` on a symlink: extracted as it is, inert."""
    members = [
        (_member("f"), b"data"),
        (_member("s", tarfile.SYMTYPE, target), None),
        (_member("h", tarfile.LNKTYPE, "s"), None),
    ]
    with _tar(*members) as tar:
        safe_extract(tar, tmp_path / "out", outside_links="keep")
    h, s = tmp_path / "out" / "h", tmp_path / "out" / "s"
    assert h.is_symlink() and os.readlink(h) == target
    assert os.lstat(h).st_ino == os.lstat(s).st_ino


def test_archive_repos_extract_on_3_11_2_style_tarfile(tmp_path: Path) -> None:
    from harness.cases.load import load_case
    from harness.trial.workspace import materialize

    case = tmp_path / "arch"
    (case / "src").mkdir(parents=True)
    (case / "src" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    with tarfile.open(case / "repo.tar.gz", "w:gz") as tar:
        tar.add(case / "src" / "calc.py", arcname="calc.py")
    import hashlib

    sha = hashlib.sha256((case / "repo.tar.gz").read_bytes()).hexdigest()
    (case / "case.yaml").write_text(
        textwrap.dedent(
            f"""\
            id: arch
            version: 1
            request: Fix add.
            repo: {{kind: archive, path: repo.tar.gz, sha256: {sha}}}
            verifier: {{command: [python3, -c, "pass"]}}
            lane: judgment
            """
        )
    )
    materialize(load_case(case), tmp_path / "ws")
    assert (tmp_path / "ws" / "calc.py").read_text().startswith("def add")


def test_the_docker_unpack_runs_without_filter_support(tmp_path: Path) -> None:
    from harness.sandbox._docker_io import first_file, unpack_tree

    members = [
        (_member("workspace", tarfile.DIRTYPE), None),
        (_member("workspace/a.txt"), b"hello"),
        (_member("workspace/b.txt", tarfile.LNKTYPE, "workspace/a.txt"), None),
        (_member("workspace/out", tarfile.SYMTYPE, "/etc/passwd"), None),
    ]
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    unpack_tree(buf.getvalue(), tmp_path / "ws")
    assert (tmp_path / "ws" / "b.txt").read_bytes() == b"hello"
    assert os.readlink(tmp_path / "ws" / "out") == "/etc/passwd"
    one = io.BytesIO()
    with tarfile.open(fileobj=one, mode="w") as tar:
        info = tarfile.TarInfo("result.json")
        info.size = 1 << 20
        tar.addfile(info, io.BytesIO(b"{" + b" " * ((1 << 20) - 1)))
    chunks = [one.getvalue()[i : i + 4096] for i in range(0, len(one.getvalue()), 4096)]
    assert first_file(iter(chunks), 10) == b"{" + b" " * 9


def _archive(*members: tuple[tarfile.TarInfo, bytes | None]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def test_the_docker_unpack_drops_a_hard_link_to_a_fifo_with_the_fifo(tmp_path: Path) -> None:
    from harness.sandbox._docker_io import unpack_tree

    data = _archive(
        (_member("workspace", tarfile.DIRTYPE), None),
        (_member("workspace/a.fifo", tarfile.FIFOTYPE), None),
        (_member("workspace/b.fifo", tarfile.LNKTYPE, "workspace/a.fifo"), None),
        (_member("workspace/c.fifo", tarfile.LNKTYPE, "workspace/b.fifo"), None),
        (_member("workspace/kept.txt"), b"kept"),
    )
    unpack_tree(data, tmp_path / "ws")
    assert sorted(os.listdir(tmp_path / "ws")) == ["kept.txt"]
    # A hard link to a member that was never in the archive is still refused.
    lost = _archive(
        (_member("workspace", tarfile.DIRTYPE), None),
        (_member("workspace/b.txt", tarfile.LNKTYPE, "workspace/nowhere"), None),
    )
    with pytest.raises(UnsafeArchive, match="not in the tree"):
        unpack_tree(lost, tmp_path / "ws2")


def test_a_path_over_the_bound_stops_both_backends_before_a_copy(tmp_path: Path) -> None:
    from harness.errors import CandidateTooLarge
    from harness.sandbox._docker_io import unpack_tree
    from harness.sandbox._treebound import check_host_tree

    name = "n" * 250
    long_dir = "/".join([name] * 4)  # 1,003 bytes: under the bound
    data = _archive(
        (_member("workspace", tarfile.DIRTYPE), None),
        (_member(f"workspace/{long_dir}/{'f' * 15}"), b"x"),
    )
    unpack_tree(data, tmp_path / "ok")
    assert (tmp_path / "ok" / long_dir / ("f" * 15)).read_bytes() == b"x"
    over = _archive(
        (_member("workspace", tarfile.DIRTYPE), None),
        (_member(f"workspace/{long_dir}/{name}"), b"x"),
    )
    with pytest.raises(CandidateTooLarge, match="longer than 1024 bytes") as caught:
        unpack_tree(over, tmp_path / "over")
    assert caught.value.kind == "path" and caught.value.observed == 1254
    assert not (tmp_path / "over").exists()  # refused before anything was extracted
    check_host_tree(str(tmp_path / "ok"), None, None)
    (tmp_path / "ok" / long_dir / name).write_text("x")
    with pytest.raises(CandidateTooLarge, match="longer than 1024 bytes") as caught:
        check_host_tree(str(tmp_path / "ok"), None, None)
    assert caught.value.kind == "path" and caught.value.observed == 1254
    assert str(tmp_path) not in str(caught.value)


def test_every_hard_link_counts_its_file_size_on_both_backends(tmp_path: Path) -> None:
    from harness.errors import CandidateTooLarge
    from harness.sandbox._docker_io import unpack_tree
    from harness.sandbox._treebound import TreeCounter, check_host_tree

    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "big.bin").write_bytes(b"x" * 1000)
    for i in range(9):  # 10 paths of 1,000 bytes: 10,000 bytes to read, hash and copy
        os.link(tree / "big.bin", tree / "sub" / f"link{i}.bin")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:  # hard links as the engine sends them
        tar.add(tree, arcname="workspace")
    data = buf.getvalue()
    with tarfile.open(fileobj=io.BytesIO(data)) as sent:
        assert sum(m.islnk() for m in sent) == 9
    with pytest.raises(CandidateTooLarge) as in_docker:
        unpack_tree(data, tmp_path / "over", TreeCounter(None, 9_999))
    with pytest.raises(CandidateTooLarge) as on_host:
        check_host_tree(str(tree), None, 9_999)
    assert in_docker.value.kind == on_host.value.kind == "disk"
    assert str(in_docker.value) == str(on_host.value)
    assert not (tmp_path / "over").exists()  # refused before anything was extracted
    counted = TreeCounter(None, 10_000)  # exactly at the bound: both take it
    unpack_tree(data, tmp_path / "all", counted)
    check_host_tree(str(tree), None, 10_000)
    assert (counted.files, counted.bytes) == (11, 10_000)  # ten paths and the folder
    assert os.stat(tmp_path / "all" / "sub" / "link8.bin").st_size == 1000


def test_the_docker_pack_sends_a_hard_link_as_a_copy_of_its_file(tmp_path: Path) -> None:
    from harness.sandbox._docker_io import pack_tree as docker_pack

    (tmp_path / "a.py").write_text("x = 1\n")
    os.link(tmp_path / "a.py", tmp_path / "b.py")
    data = docker_pack(tmp_path, PurePosixPath("."), 1000, 1000, locked={"b.py": 0o644})
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        files = {m.name: m for m in tar.getmembers() if not m.isdir()}
        assert sorted(files) == ["a.py", "b.py"]  # the link is kept, never dropped
        assert all(m.isreg() for m in files.values()), files
        assert files["b.py"].uid == 0 and files["a.py"].uid == 1000  # no shared owner
        for m in files.values():
            fh = tar.extractfile(m)
            assert fh is not None and fh.read() == b"x = 1\n"


@pytest.mark.skipif(
    not Path("/usr/bin/python3").exists(), reason="no system interpreter at /usr/bin/python3"
)
def test_safe_extract_runs_on_the_system_interpreter(tmp_path: Path) -> None:
    """Debian 12's own python3 (3.11.2 here): the module needs nothing newer."""
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "d" / "f.txt").write_text("ok")
    (src / "l").symlink_to("d/f.txt")
    (tmp_path / "cand.tar").write_bytes(pack_tree(src))
    script = textwrap.dedent(
        f"""\
        import importlib.util, json, sys, tarfile
        spec = importlib.util.spec_from_file_location("safefs", {_safefs.__file__!r})
        m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
        with tarfile.open({str(tmp_path / "cand.tar")!r}) as tar:
            m.safe_extract(tar, __import__("pathlib").Path({str(tmp_path / "out")!r}))
        print(json.dumps([sys.version_info[:3], hasattr(tarfile, "data_filter")]))
        """
    )
    done = subprocess.run(
        ["/usr/bin/python3", "-I", "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    version, _has_filter = json.loads(done.stdout)
    assert version[:2] == [3, 11], version
    assert (tmp_path / "out" / "d" / "f.txt").read_text() == "ok"
    assert os.readlink(tmp_path / "out" / "l") == "d/f.txt"


def test_read_regular_refuses_fifos_sockets_links_and_bounds_the_read(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert read_regular(fifo, 100) is None  # returns at once: never opened blocking
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock"))
    try:
        assert read_regular(tmp_path / "sock", 100) is None
    finally:
        sock.close()
    (tmp_path / "real").write_text("secret")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert read_regular(tmp_path / "link", 100) is None
    assert read_regular(tmp_path / "missing", 100) is None
    assert read_regular("/dev/zero", 100) is None
    sparse = tmp_path / "sparse"
    with sparse.open("wb") as fh:
        fh.truncate(1 << 30)
    assert read_regular(sparse, 1 << 20) == b"\0" * (1 << 20)


def _deep(top: Path, n: int) -> None:
    here = os.getcwd()
    os.chdir(top)
    try:
        for _ in range(n):
            os.mkdir("d")
            os.chdir("d")
        Path("f").write_text("x")
    finally:
        os.chdir(here)


def test_rmtree_and_depth_check_handle_a_1200_deep_folder(tmp_path: Path) -> None:
    top = tmp_path / "deep"
    top.mkdir()
    _deep(top, 1200)
    (top / "d" / "away").symlink_to(tmp_path)  # a link is removed, never followed
    assert tree_too_deep(top) == _safefs.MAX_TREE_DEPTH + 1
    rmtree(top)
    assert not top.exists() and tmp_path.exists()


def test_rmtree_removes_a_path_longer_than_path_max(tmp_path: Path) -> None:
    # 20 folders of 250-byte names: about 5,000 bytes, no call can name the bottom whole.
    top = tmp_path / "long"
    top.mkdir()
    here = os.getcwd()
    os.chdir(top)
    try:
        for i in range(20):
            name = f"{i:02d}" + "n" * 248
            os.mkdir(name)
            os.chdir(name)
        Path("f").write_text("x")
        os.symlink(tmp_path, "away")  # a link down there is removed, never followed
    finally:
        os.chdir(here)
    rmtree(top)
    assert not top.exists() and tmp_path.exists()


def test_loads_json_refuses_deep_nesting_with_a_value_error() -> None:
    with pytest.raises(ValueError, match="deeper"):
        loads_json("[" * 100_000)
    with pytest.raises(ValueError, match="deeper"):
        loads_json(b'{"a": ' * 5_000 + b"1" + b"}" * 5_000)
    assert loads_json('["[[[[", {"k": "]]]"}]') == ["[[[[", {"k": "]]]"}]
    assert loads_json(json.dumps([[[1]]])) == [[[1]]]
    assert sys.getrecursionlimit() > _safefs.MAX_JSON_DEPTH


def test_lone_surrogates_parse_as_u_fffd_and_pairs_stay_whole() -> None:
    text = (
        b'{"c": "a\\ud800", "u": {"\xed\xa0\x80": 1}, "ok": "\\ud83d\\ude00", "l": [["\\udcff"]]}'
    )
    doc = loads_json(text)
    assert doc == {"c": "a\ufffd", "u": {"\ufffd": 1}, "ok": "\U0001f600", "l": [["\ufffd"]]}
    json.dumps(doc, ensure_ascii=False).encode("utf-8")  # storable


def test_storable_walks_any_nesting_without_recursion() -> None:
    deep: list = []
    inner = deep
    for _ in range(5000):
        inner.append([])
        inner = inner[0]
    inner.append("odd\udcff")
    out = storable(deep)
    for _ in range(5000):
        out = out[0]
    assert out == ["odd\ufffd"]
    assert storable(("a\ud800", 1, None)) == ("a\ufffd", 1, None)


def test_copy_tree_copies_contents_links_and_modes_but_no_agent_metadata(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "d").mkdir(parents=True)
    (src / "d" / "f").write_text("x")
    (src / "run").write_text("#!/bin/sh\n")
    os.chmod(src / "run", 0o6755)
    os.symlink("/etc/passwd", src / "out")
    os.mkfifo(src / "fifo")
    os.utime(src / "d" / "f", (400_000_000_000, 400_000_000_000))
    os.utime(src / "run", (-70_000_000_000, -70_000_000_000))
    os.chmod(src / "d", 0o555)
    with_xattr = True
    try:
        os.setxattr(src / "d" / "f", "user.tag", b"A" * 64)
    except OSError:
        with_xattr = False
    (dst / "d").mkdir(parents=True)
    (dst / "d" / "f").symlink_to("/etc/hostname")  # merged: a link in the way is replaced
    copy_tree(src, dst)
    assert (dst / "d" / "f").read_text() == "x" and not (dst / "d" / "f").is_symlink()
    assert os.lstat(dst / "run").st_mode & 0o7777 == 0o755
    assert os.lstat(dst / "d").st_mode & 0o7777 == 0o555
    assert os.readlink(dst / "out") == "/etc/passwd"
    assert not (dst / "fifo").exists()
    assert 0 < os.lstat(dst / "d" / "f").st_mtime <= MAX_MTIME  # a host disk may clamp lower
    assert os.lstat(dst / "run").st_mtime == 0  # year -249 (ext4 keeps 1901): clamped to 1970
    if with_xattr:
        assert os.listxattr(dst / "d" / "f") == []
    os.chmod(src / "d", 0o755)
    os.chmod(dst / "d", 0o755)


def test_copy_tree_names_an_entry_it_cannot_read(tmp_path: Path, monkeypatch) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "secret").write_text("x")
    real_open = os.open

    def refuse(path, flags, *a, **kw):
        if str(path).endswith("secret") and not flags & os.O_WRONLY:
            raise PermissionError(13, "Permission denied")
        return real_open(path, flags, *a, **kw)

    monkeypatch.setattr(_safefs.os, "open", refuse)
    with pytest.raises(UnreadableEntry, match="cannot read 'secret': Permission denied") as exc:
        copy_tree(src, tmp_path / "dst")
    assert str(tmp_path) not in str(exc.value)


_json_texts = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(), kids, max_size=4),
    max_leaves=20,
)


@given(
    _json_texts,
    st.sampled_from(["ascii", "utf-8", "utf-16", "str"]),
    st.sampled_from(["", "\\ud800", "\\udcff", "\\ud83d\\ude00", "\ud800"]),
)
def test_loads_json_fast_path_agrees_with_the_walk(value: object, form: str, extra: str) -> None:
    """Skipping the surrogate walk never changes a result, whatever the text's form."""
    text = json.dumps([value, "x" + extra], ensure_ascii=form == "ascii").replace("\\\\u", "\\u")
    data: str | bytes = text
    if form != "str":
        try:
            data = text.encode("utf-8" if form == "ascii" else form, "surrogatepass")
        except UnicodeEncodeError:
            return
    try:
        expected = storable(json.loads(data))
    except ValueError:
        with pytest.raises(ValueError):
            loads_json(data)
        return
    assert loads_json(data) == expected
    json.dumps(loads_json(data), ensure_ascii=False).encode("utf-8")


def test_a_tree_is_listed_without_following_a_link(tmp_path: Path) -> None:
    """A link whose target is one 300-byte name (ENAMETOOLONG when followed) is listed as a
    link: ``Path.rglob`` of Debian's Python 3.11.2 raised on it, and the agent's link turned
    its trial into an infra error that blocked the gate (red team round twenty-five)."""
    from harness._safefs import tree_entries
    from harness.trial.workspace import pack_tree

    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n")
    (tmp_path / "pkg" / "sub" / "b.txt").write_text("b\n")
    (tmp_path / "pkg" / "notes").symlink_to("a" * 300)
    (tmp_path / "pkg" / "up").symlink_to("..")  # a link to a folder is not walked into
    rels = [p.relative_to(tmp_path).as_posix() for p in tree_entries(tmp_path)]
    assert rels == ["pkg", "pkg/a.py", "pkg/notes", "pkg/sub", "pkg/sub/b.txt", "pkg/up"]
    with tarfile.open(fileobj=io.BytesIO(pack_tree(tmp_path))) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert members["pkg/notes"].issym() and members["pkg/notes"].linkname == "a" * 300
    assert sorted(members) == rels
