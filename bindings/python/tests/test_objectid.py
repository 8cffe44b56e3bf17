from __future__ import annotations

import datetime as dt
import pickle
import time

import pytest

from atoll import ObjectId


def test_new_object_ids_are_unique_and_timestamped():
    before = int(time.time())
    ids = [ObjectId() for _ in range(1000)]
    after = int(time.time())
    assert len(set(ids)) == 1000
    for oid in ids[:5]:
        assert before <= oid.generation_time.timestamp() <= after
        assert oid.generation_time.tzinfo == dt.timezone.utc
    # same process: the 5 random bytes are shared, the counter increments
    assert ids[0].binary[4:9] == ids[1].binary[4:9]
    c0 = int.from_bytes(ids[0].binary[9:], "big")
    c1 = int.from_bytes(ids[1].binary[9:], "big")
    assert (c0 + 1) & 0xFFFFFF == c1


def test_from_hex_and_bytes_equality_hash_repr():
    a = ObjectId("65f0a1b2c3d4e5f60718293a")
    b = ObjectId(bytes.fromhex("65f0a1b2c3d4e5f60718293a"))
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != ObjectId("65f0a1b2c3d4e5f60718293b")
    assert a < ObjectId("65f0a1b2c3d4e5f60718293b")
    assert str(a) == "65f0a1b2c3d4e5f60718293a"
    assert repr(a) == "ObjectId('65f0a1b2c3d4e5f60718293a')"
    assert ObjectId(a) == a
    assert a != "65f0a1b2c3d4e5f60718293a"
    assert pickle.loads(pickle.dumps(a)) == a
    assert ObjectId("65F0A1B2C3D4E5F60718293A") == a


@pytest.mark.parametrize("bad, exc", [
    ("xyz", ValueError), ("65f0a1b2c3d4e5f60718293", ValueError),
    ("zzf0a1b2c3d4e5f60718293a", ValueError), (b"short", ValueError), (12, TypeError),
    (12.5, TypeError),
])
def test_invalid(bad, exc):
    with pytest.raises(exc):
        ObjectId(bad)
    assert not ObjectId.is_valid(bad)
