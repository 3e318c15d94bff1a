import pytest

from fieldkit.config import ConfigError, parse_config


def test_sections_and_comments():
    text = "name = fk  # trailing\n# full line\n[paths]\nroot = /srv\n"
    assert parse_config(text) == {"": {"name": "fk"}, "paths": {"root": "/srv"}}


def test_reference_same_section_and_global():
    text = "base = /srv\n[paths]\nroot = ${base}/app\ndata = ${root}/data\n"
    assert parse_config(text)["paths"] == {"root": "/srv/app", "data": "/srv/app/data"}


def test_malformed_line():
    with pytest.raises(ConfigError, match="line 2"):
        parse_config("a = 1\nnot a pair\n")


def test_duplicate_key():
    with pytest.raises(ConfigError, match="set twice"):
        parse_config("a = 1\na = 2\n")


def test_cycle():
    with pytest.raises(ConfigError, match="cycle: a -> b -> a"):
        parse_config("a = ${b}\nb = ${a}\n")
