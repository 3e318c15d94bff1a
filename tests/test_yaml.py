"""The one YAML loader: limits on size, depth and alias expansion, and its error contract."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from harness._yaml import DEFAULT_LIMITS, YamlLimits, load_yaml
from harness.errors import CaseError, ConfigError

HARNESS_PACKAGE = Path(__file__).resolve().parent.parent / "harness"
SMALL = YamlLimits(max_bytes=4096, max_depth=12, max_nodes=1000)
FEW_NODES = YamlLimits(max_nodes=1000)


def _file(tmp_path_factory: pytest.TempPathFactory, text: str | bytes) -> Path:
    path = tmp_path_factory.mktemp("y") / "f.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def bomb(width: int, levels: int) -> str:
    """``levels`` anchors, each a list of ``width`` aliases of the previous: width**levels."""
    lines = [f"l0: &a0 [{', '.join(['x'] * width)}]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


def expanded_size(width: int, levels: int) -> int:
    """Values in :func:`bomb` once expanded: the root mapping, keys, lists and scalars."""
    sizes = [1 + width]  # a list of width scalars
    for _ in range(1, levels):
        sizes.append(1 + width * sizes[-1])
    return 1 + levels + sum(sizes)


@given(width=st.integers(1, 12), levels=st.integers(1, 12))
@settings(max_examples=80, deadline=None)
def test_alias_expansion_is_bounded_exactly_and_fast(tmp_path_factory, width, levels):
    path = _file(tmp_path_factory, bomb(width, levels))
    start = time.monotonic()
    if expanded_size(width, levels) <= FEW_NODES.max_nodes:
        data, _ = load_yaml(path, limits=FEW_NODES)
        assert len(data) == levels
    else:
        with pytest.raises(ConfigError, match="aliases are expanded") as info:
            load_yaml(path, limits=FEW_NODES)
        assert info.value.file == str(path)
        assert info.value.field is not None and info.value.field.startswith("l")
        assert info.value.line is not None
    assert time.monotonic() - start < 1.0


def test_billion_laughs_is_refused_in_milliseconds_with_the_default_limits(tmp_path_factory):
    path = _file(tmp_path_factory, bomb(9, 10))  # 9**10 ≈ 3.5e9 values
    start = time.monotonic()
    with pytest.raises(ConfigError, match="alias bomb") as info:
        load_yaml(path, CaseError)
    assert time.monotonic() - start < 1.0
    assert isinstance(info.value, CaseError)
    assert str(path) in str(info.value)


@given(depth=st.integers(1, 40), flow=st.booleans())
@settings(max_examples=60, deadline=None)
def test_nesting_is_bounded_exactly(tmp_path_factory, depth, flow):
    if flow:
        text = "[" * depth + "]" * depth
    else:  # block mappings, each level one key deeper
        text = "".join(f"{'  ' * i}k{i}:\n" for i in range(depth - 1)) + "  " * (depth - 1) + "v"
    path = _file(tmp_path_factory, text + "\n")
    if depth <= SMALL.max_depth:
        load_yaml(path, limits=SMALL)
    else:
        with pytest.raises(ConfigError, match="nests deeper than 12"):
            load_yaml(path, limits=SMALL)


def test_deep_nesting_through_aliases_counts_the_expanded_depth(tmp_path_factory):
    # Each anchor nests the previous one 5 levels down: raw depth 7, expanded depth 5 * 4.
    lines = ["a0: &a0 x"]
    for i in range(1, 5):
        lines.append(f"a{i}: &a{i} [[[[[*a{i - 1}]]]]]")
    path = _file(tmp_path_factory, "\n".join(lines) + "\n")
    with pytest.raises(ConfigError, match="nests deeper"):
        load_yaml(path, limits=SMALL)
    load_yaml(path)  # 22 levels are fine under the default limits


@given(extra=st.integers(-3, 3))
@settings(max_examples=20, deadline=None)
def test_file_size_is_bounded_exactly(tmp_path_factory, extra):
    size = SMALL.max_bytes + extra
    path = _file(tmp_path_factory, "a: " + "x" * (size - 4) + "\n")
    assert path.stat().st_size == size
    if size <= SMALL.max_bytes:
        assert load_yaml(path, limits=SMALL)[0]["a"].startswith("x")
    else:
        with pytest.raises(ConfigError, match="larger than 4,096 bytes"):
            load_yaml(path, limits=SMALL)


@pytest.mark.parametrize(
    "text",
    ["a: &a [1, *a]\n", "a: &a {b: *a}\n", "a: &a {b: [c, {d: *a}]}\n"],
    ids=["list", "mapping", "nested"],
)
def test_recursive_alias_is_refused(tmp_path_factory, text):
    path = _file(tmp_path_factory, text)
    with pytest.raises(ConfigError, match=r"alias \*a refers to a node that contains it"):
        load_yaml(path)


shared = st.dictionaries(st.text("abcdef", min_size=1, max_size=4), st.integers(), max_size=4)


@given(block=shared, uses=st.integers(1, 5))
@settings(max_examples=40, deadline=None)
def test_shared_values_round_trip_through_anchors(tmp_path_factory, block, uses):
    # safe_dump writes one anchor and an alias per further use of the same object.
    doc = {f"r{i}": block for i in range(uses)}
    text = yaml.safe_dump(doc)
    path = _file(tmp_path_factory, text)
    assert load_yaml(path)[0] == doc


def test_merge_keys_share_settings(tmp_path_factory):
    text = "base: &b {model: m, tools: [a]}\nrelease: {<<: *b, model: n}\n"
    data, _ = load_yaml(_file(tmp_path_factory, text))
    assert data["release"] == {"model": "n", "tools": ["a"]}


def test_a_duplicate_key_beside_a_merge_is_still_an_error(tmp_path_factory):
    text = "base: &b {x: 1}\nrelease: {<<: *b, y: 1, y: 2}\n"
    with pytest.raises(ConfigError, match="duplicate key 'y'"):
        load_yaml(_file(tmp_path_factory, text))


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    path = tmp_path / "case.yaml"
    os.mkfifo(path)
    start = time.monotonic()
    with pytest.raises(ConfigError, match="not a regular file"):
        load_yaml(path)
    assert time.monotonic() - start < 1.0


def test_a_folder_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="is a folder"):
        load_yaml(tmp_path)


def test_the_error_names_the_key_path_and_line_of_the_bomb(tmp_path_factory):
    text = "ok: 1\nother: [1, 2]\n" + bomb(9, 9)
    with pytest.raises(ConfigError) as info:
        load_yaml(_file(tmp_path_factory, text))
    assert info.value.field is not None and re.fullmatch(r"l\d\.\d", info.value.field)
    assert info.value.line is not None and info.value.line > 2


yaml_chars = st.sampled_from(list("ab:-[]{},&*!|>'\"#?\n\t %@`.0123456789<"))


@given(st.text(yaml_chars, max_size=300))
@settings(max_examples=300, deadline=None)
def test_any_text_loads_or_raises_config_error_quickly(tmp_path_factory, text):
    path = _file(tmp_path_factory, text)
    start = time.monotonic()
    try:
        load_yaml(path, limits=SMALL)
    except ConfigError as exc:
        assert exc.file == str(path)
    assert time.monotonic() - start < 1.0


def test_default_limits_hold_a_large_real_lock_file(tmp_path_factory):
    # ~1,000 cases x 25 files: the largest input the harness reads must stay well inside.
    cases = {
        f"case-{c:04d}": {
            "1": {
                "digest": "sha256:" + "0" * 64,
                "files": {f"repo/f{f}.py": "-:sha256:" + "1" * 64 for f in range(25)},
            }
        }
        for c in range(1000)
    }
    text = yaml.safe_dump({"schema_version": 1, "task_set": "golden", "cases": cases})
    assert len(text.encode()) < DEFAULT_LIMITS.max_bytes
    path = _file(tmp_path_factory, text)
    start = time.monotonic()
    data, _ = load_yaml(path)
    assert len(data["cases"]) == 1000
    assert time.monotonic() - start < 30  # seconds, on a busy 2-core machine


def test_every_yaml_read_goes_through_the_one_loader():
    readers = re.compile(r"yaml\.(load|safe_load|full_load|unsafe_load|compose|parse)\b")
    offenders = [
        str(p.relative_to(HARNESS_PACKAGE))
        for p in HARNESS_PACKAGE.rglob("*.py")
        if p.name != "_yaml.py" and readers.search(p.read_text(encoding="utf-8"))
    ]
    assert offenders == []
