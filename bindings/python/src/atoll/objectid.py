"""ObjectId: the 12-byte identifier of BSON and Realm ({"$oid": "..."} in Extended JSON)."""

from __future__ import annotations

import binascii
import datetime as _dt
import os
import random
import struct
import threading
import time
from typing import Optional, Union

__all__ = ["ObjectId"]


class ObjectId:
    """A 12-byte identifier: 4 bytes of seconds since the epoch (big-endian), 5 random bytes
    chosen once per process, and a 3-byte counter that starts at a random value.

    >>> oid = ObjectId()                               # a new one
    >>> ObjectId(str(oid)) == oid                      # from 24 hex digits
    True
    >>> ObjectId(oid.binary) == oid                    # from 12 bytes
    True
    """

    __slots__ = ("_bytes",)

    _lock = threading.Lock()
    _pid: Optional[int] = None
    _random: bytes = b""
    _counter: int = 0

    def __init__(self, oid: Union[None, str, bytes, "ObjectId"] = None) -> None:
        if oid is None:
            self._bytes = ObjectId._generate()
        elif isinstance(oid, ObjectId):
            self._bytes = oid._bytes
        elif isinstance(oid, str):
            if len(oid) != 24:
                raise ValueError(f"an ObjectId is 24 hex digits, not {oid!r}")
            try:
                self._bytes = binascii.unhexlify(oid)
            except (binascii.Error, ValueError):
                raise ValueError(f"an ObjectId is 24 hex digits, not {oid!r}") from None
        elif isinstance(oid, (bytes, bytearray, memoryview)):
            raw = bytes(oid)
            if len(raw) != 12:
                raise ValueError(f"an ObjectId is 12 bytes, not {len(raw)}")
            self._bytes = raw
        else:
            raise TypeError(
                f"ObjectId() takes None, 24 hex digits or 12 bytes, not {type(oid).__name__}"
            )

    @classmethod
    def _generate(cls) -> bytes:
        with cls._lock:
            pid = os.getpid()
            if cls._pid != pid:  # new process (or fork): new random part, new counter start
                cls._pid = pid
                cls._random = os.urandom(5)
                cls._counter = random.SystemRandom().randrange(0, 0xFFFFFF + 1)
            cls._counter = (cls._counter + 1) & 0xFFFFFF
            counter = cls._counter
            rnd = cls._random
        return struct.pack(">I", int(time.time()) & 0xFFFFFFFF) + rnd + counter.to_bytes(3, "big")

    @classmethod
    def is_valid(cls, oid: object) -> bool:
        """Whether ``ObjectId(oid)`` would succeed (None excepted)."""
        if oid is None:
            return False
        try:
            cls(oid)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return False
        return True

    @property
    def binary(self) -> bytes:
        """The 12 bytes."""
        return self._bytes

    @property
    def generation_time(self) -> _dt.datetime:
        """The timestamp part, as an aware UTC datetime (whole seconds)."""
        seconds = struct.unpack(">I", self._bytes[:4])[0]
        return _dt.datetime.fromtimestamp(seconds, tz=_dt.timezone.utc)

    def __str__(self) -> str:
        return self._bytes.hex()

    def __repr__(self) -> str:
        return f"ObjectId('{self._bytes.hex()}')"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ObjectId):
            return self._bytes == other._bytes
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        if isinstance(other, ObjectId):
            return self._bytes != other._bytes
        return NotImplemented

    def __lt__(self, other: "ObjectId") -> bool:
        if isinstance(other, ObjectId):
            return self._bytes < other._bytes
        return NotImplemented

    def __le__(self, other: "ObjectId") -> bool:
        if isinstance(other, ObjectId):
            return self._bytes <= other._bytes
        return NotImplemented

    def __gt__(self, other: "ObjectId") -> bool:
        if isinstance(other, ObjectId):
            return self._bytes > other._bytes
        return NotImplemented

    def __ge__(self, other: "ObjectId") -> bool:
        if isinstance(other, ObjectId):
            return self._bytes >= other._bytes
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._bytes)

    def __reduce__(self):
        return (ObjectId, (self._bytes,))
