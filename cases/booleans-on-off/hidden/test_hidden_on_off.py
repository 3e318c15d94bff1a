import pytest

from fieldkit.coerce import CoercionError, coerce
from fieldkit.schema import Schema


@pytest.mark.parametrize(("text", "value"), [("on", True), ("ON", True), (" On ", True),
                                              ("off", False), ("Off", False)])
def test_on_off(text, value):
    assert coerce(text, "bool") is value


def test_existing_spellings_still_work():
    for text in ("1", "t", "true", "y", "yes"):
        assert coerce(text, "bool") is True
    for text in ("0", "f", "false", "n", "no"):
        assert coerce(text, "bool") is False


def test_error_lists_new_spellings():
    with pytest.raises(CoercionError, match="off, on"):
        coerce("maybe", "bool")


def test_schema_bool_on_off():
    assert Schema.parse("flag:bool").apply([["on"], ["off"]]) == [{"flag": True}, {"flag": False}]
