"""``records.key_hits`` builds Hits without the dataclass ``__init__`` (hybrid's hot path): it must
stay equal to the constructor, field by field, whenever Hit gains or changes a field."""

import dataclasses

import pytest

from oracle_rag.engines.records import Hit, key_hits


def test_key_hits_equal_the_constructor_for_every_field() -> None:
    rows = [(7, "task", "42", 0.125, 3, (None, 9), 2), (8, "doc", "x", 1.5, None, (None, None), 0)]
    built = key_hits(rows)
    expected = [Hit(c, t, s, "", score, owner, indexed, no) for c, t, s, score, owner, indexed, no in rows]
    assert built == expected
    names = {f.name for f in dataclasses.fields(Hit)}
    for hit in built:
        assert set(vars(hit)) == names, "key_hits must fill exactly Hit's fields"
        assert hit.facets == {} and hit.content == ""
    assert built[0].facets is not built[1].facets, "each hit needs its own facets dict"


def test_key_hits_stay_frozen() -> None:
    hit = key_hits([(1, "task", "1", 0.5, None, (None, None), 0)])[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        hit.score = 0.0  # type: ignore[misc]
