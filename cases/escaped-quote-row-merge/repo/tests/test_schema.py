import pytest

from fieldkit.schema import Field, Schema, SchemaError


def test_field_spec():
    assert Field.parse("score:float?") == Field("score", "float", True)
    assert Field.parse("name") == Field("name", "str", False)


def test_unknown_type():
    with pytest.raises(SchemaError, match="unknown type 'money'"):
        Field.parse("x:money")


def test_apply():
    schema = Schema.parse("id:int, name, score:float?")
    assert schema.apply([["1", "Ada", ""], ["2", "Bo", "3.5"]]) == [
        {"id": 1, "name": "Ada", "score": None},
        {"id": 2, "name": "Bo", "score": 3.5},
    ]


def test_apply_names_row_and_field():
    schema = Schema.parse("id:int")
    with pytest.raises(SchemaError, match="row 3: field 'id'"):
        schema.apply([["1"], ["x"]], first_line=2)


def test_duplicate_names():
    with pytest.raises(SchemaError, match="duplicate"):
        Schema.parse("a,b,a")


def test_json_schema():
    js = Schema.parse("id:int,when:date?").to_json_schema("order")
    assert js["title"] == "order"
    assert js["properties"]["id"] == {"type": "integer"}
    assert js["properties"]["when"] == {"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}]}
    assert js["required"] == ["id", "when"]
