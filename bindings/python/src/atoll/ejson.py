"""Python values <-> MongoDB Extended JSON v2, relaxed form (the JSON that libatoll speaks).

=====================  =====================================================================
Python                 Extended JSON
=====================  =====================================================================
None, bool, int, str   null, true/false, number, string
float                  number; NaN / Infinity / -Infinity as {"$numberDouble": "NaN"} etc.
list, tuple            array (decoded as list)
set, frozenset         array: a set property's value (decoded as list, in the stored order)
dict (str keys)        object (non-str keys raise TypeError rather than being stringified)
atoll.Link             {"$ref": "Dog", "$id": <primary key>}: a link held in a mixed value
datetime.datetime      {"$date": "2024-05-01T12:00:00.123Z"} -- see below
uuid.UUID              {"$uuid": "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"}
bytes, bytearray       {"$binary": {"base64": "...", "subType": "00"}}
decimal.Decimal        {"$numberDecimal": "1.25"}
atoll.ObjectId         {"$oid": "24 hex digits"}
=====================  =====================================================================

Dates: a ``datetime`` must be timezone-aware; a naive one raises ``TypeError``, because
guessing its zone (local time? UTC?) silently shifts stored instants. It is converted to UTC
and truncated to milliseconds (the precision of $date). Dates before 1970 are written as
{"$date": {"$numberLong": "<ms>"}}, as the relaxed form asks. Decoded dates are always
aware, in UTC.

Sets: a set property reads back as a list, its elements distinct and in the order they were
first given. A Python ``set`` has no order of its own (strings even change order between runs),
so give a list, or ``dict.fromkeys(items)``, when the order matters.

Links: an ordinary link property holds (and reads back as) the target's primary key; a link
*in a mixed value* (``"mixed"``, ``"mixed[]"``, ``"mixed{}"``) and in the change log is a
:class:`Link`, written ``{"$ref": class, "$id": primary key}``. For a class without a primary
key, ``primary_key`` is the object's ``_atoll_key``.

On input these forms are accepted as well: {"$date": <int ms>}, {"$date": {"$numberLong":
"..."}}, {"$binary": {"base64": ..., "subType": "04"}} (a UUID), {"$numberDouble": "..."},
{"$numberFloat": "..."} (how ``atoll export`` writes a float held in a mixed value),
{"$numberLong": "..."}, {"$numberInt": "..."}. A wrapper is recognised only when it is the
object's only key (a link: when "$ref" and "$id" are its only two).
"""

from __future__ import annotations

import base64
import datetime as _dt
import decimal
import enum
import json
import math
import re
import uuid
from dataclasses import dataclass
from typing import Any, Dict

from .objectid import ObjectId

__all__ = ["dumps", "loads", "encode", "decode", "Link"]


@dataclass(frozen=True)
class Link:
    """A link to an object, as a mixed value holds it: its class and primary key.

    >>> realm.create("Bag", {"_id": 1, "anything": atoll.Link("Dog", 5)})["anything"]
    Link(class_name='Dog', primary_key=5)

    Written ``{"$ref": "Dog", "$id": 5}`` in Extended JSON (MongoDB's DBRef form). For a class
    without a primary key, ``primary_key`` is the object's ``_atoll_key``. Frozen, so it can be
    a set element or a dict key; two links are equal when class and key are.
    """

    class_name: str
    primary_key: Any

    def __post_init__(self) -> None:
        if not isinstance(self.class_name, str):
            raise TypeError(f"Link.class_name must be a str, not {type(self.class_name).__name__}")

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)

_ISO_RE = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?"
    r"(Z|[+-]\d{2}(?::?\d{2})?)$"
)


# MARK: - Encoding

def _date_to_ejson(value: _dt.datetime) -> Dict[str, Any]:
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        raise TypeError(
            f"naive datetime {value.isoformat()} has no timezone; atoll stores instants, so "
            "give an aware datetime, e.g. datetime.now(timezone.utc) or "
            "dt.replace(tzinfo=timezone.utc)"
        )
    delta = value - _EPOCH
    ms = (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000
    if value.astimezone(_dt.timezone.utc).year < 1970:
        return {"$date": {"$numberLong": str(ms)}}
    utc = _EPOCH + _dt.timedelta(milliseconds=ms)
    return {"$date": utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"}


def _default(value: Any) -> Any:
    """json.dumps ``default=``: the types JSON has no native form for."""
    if isinstance(value, _dt.datetime):
        return _date_to_ejson(value)
    if isinstance(value, uuid.UUID):
        return {"$uuid": str(value)}
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$binary": {"base64": base64.b64encode(bytes(value)).decode("ascii"),
                            "subType": "00"}}
    if isinstance(value, decimal.Decimal):
        return {"$numberDecimal": str(value)}
    if isinstance(value, ObjectId):
        return {"$oid": str(value)}
    if isinstance(value, Link):
        return {"$ref": value.class_name, "$id": value.primary_key}
    if isinstance(value, (set, frozenset)):
        return list(value)
    if isinstance(value, enum.Enum):
        # Realm stores enums as their raw values; map them back with MyEnum(value).
        return value.value
    if isinstance(value, _dt.date):
        raise TypeError(
            f"date {value.isoformat()} is not a datetime; atoll dates are instants: pass "
            "datetime(y, m, d, tzinfo=timezone.utc)"
        )
    raise TypeError(f"a value of type {type(value).__name__} cannot be stored in atoll: {value!r}")


def _prepare(value: Any) -> Any:
    """Walks containers: special floats become {"$numberDouble": ...}; dict keys must be str.

    (json's ``default=`` is never called for floats or for dict keys, hence this pass.)
    """
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        if math.isnan(value):
            return {"$numberDouble": "NaN"}
        return {"$numberDouble": "Infinity" if value > 0 else "-Infinity"}
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"object keys must be str, not {type(k).__name__} ({k!r})")
            out[k] = _prepare(v)
        return out
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_prepare(v) for v in value]
    return value


def encode(value: Any) -> Any:
    """The Extended JSON form of ``value`` as plain Python (dicts, lists, str, numbers)."""
    return json.loads(dumps(value))


def _needs_prepare(value: Any) -> bool:
    """Checks dict keys (TypeError for a non-str key) and tells whether ``value`` holds a
    non-finite float, without copying: most values go to json.dumps as they are."""
    kind = type(value)
    if kind is dict:
        for k in value:
            if not isinstance(k, str):
                raise TypeError(f"object keys must be str, not {type(k).__name__} ({k!r})")
        items = value.values()
    elif kind is list or kind is tuple or kind is set or kind is frozenset:
        items = value
    elif isinstance(value, (dict, list, tuple, set, frozenset)):  # subclasses: the careful path
        return True
    else:
        return isinstance(value, float) and not math.isfinite(value)  # float subclasses too
    found = False
    for v in items:
        t = type(v)
        if t is float:
            found = found or not math.isfinite(v)
        elif t is not str and t is not int:
            found = _needs_prepare(v) or found
    return found


def dumps(value: Any) -> str:
    """Extended JSON (relaxed) text for a Python value. Raises TypeError for what it can't hold."""
    if _needs_prepare(value):
        value = _prepare(value)
    return json.dumps(value, default=_default, allow_nan=False,
                      ensure_ascii=False, separators=(",", ":"))


# MARK: - Decoding

def _parse_iso(text: str) -> _dt.datetime:
    m = _ISO_RE.match(text)
    if not m:
        raise ValueError(f"not an ISO-8601 date: {text!r}")
    y, mo, d, h, mi, s, frac, zone = m.groups()
    micro = int((frac or "0")[:6].ljust(6, "0"))
    if zone == "Z":
        tz = _dt.timezone.utc
    else:
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        hours, minutes = int(digits[:2]), int(digits[2:4] or "0")
        tz = _dt.timezone(sign * _dt.timedelta(hours=hours, minutes=minutes))
    local = _dt.datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), micro, tzinfo=tz)
    return local.astimezone(_dt.timezone.utc)


def _date_from_ejson(raw: Any) -> _dt.datetime:
    if isinstance(raw, str):
        return _parse_iso(raw)
    if isinstance(raw, dict) and set(raw) == {"$numberLong"}:
        return _EPOCH + _dt.timedelta(milliseconds=int(raw["$numberLong"]))
    if isinstance(raw, int) and not isinstance(raw, bool):
        return _EPOCH + _dt.timedelta(milliseconds=raw)
    raise ValueError(f"not an Extended JSON date: {raw!r}")


def _double_from_ejson(raw: str) -> float:
    if raw in ("NaN", "Infinity", "-Infinity"):
        return float(raw.replace("Infinity", "inf"))
    return float(raw)


def _object_hook(obj: Dict[str, Any]) -> Any:
    if len(obj) != 1:
        if len(obj) == 2 and "$ref" in obj and "$id" in obj and isinstance(obj["$ref"], str):
            return Link(obj["$ref"], obj["$id"])
        return obj
    (key, raw), = obj.items()
    if not key.startswith("$"):
        return obj
    if key == "$date":
        return _date_from_ejson(raw)
    if key == "$oid" and isinstance(raw, str):
        return ObjectId(raw)
    if key == "$uuid" and isinstance(raw, str):
        return uuid.UUID(raw)
    if key == "$numberDecimal" and isinstance(raw, str):
        return decimal.Decimal(raw)
    if key in ("$numberDouble", "$numberFloat") and isinstance(raw, str):
        return _double_from_ejson(raw)
    if key in ("$numberLong", "$numberInt") and isinstance(raw, str):
        return int(raw)
    if key == "$binary" and isinstance(raw, dict) and set(raw) == {"base64", "subType"}:
        data = base64.b64decode(raw["base64"])
        if str(raw["subType"]).lower() in ("04", "4"):
            return uuid.UUID(bytes=data)
        return data
    return obj


def _bad_constant(name: str) -> Any:
    raise ValueError(f"JSON from the library holds the non-standard constant {name}")


_decoder = json.JSONDecoder(object_hook=_object_hook, parse_constant=_bad_constant)


def loads(text: str) -> Any:
    """Python values from Extended JSON text."""
    return _decoder.decode(text)


def decode(value: Any) -> Any:
    """Python values from an Extended JSON structure already parsed by ``json``."""
    return loads(json.dumps(value))
