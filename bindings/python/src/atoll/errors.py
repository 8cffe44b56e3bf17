"""Exceptions raised by atoll, one class per status code of ``atoll_status_e``.

The tree::

    AtollError
     ├── InvalidArgumentError        ATOLL_ERR_INVALID_ARGUMENT       1
     ├── InvalidJSONError            ATOLL_ERR_INVALID_JSON           2
     ├── SchemaError                 ATOLL_ERR_SCHEMA                 3
     │    └── SchemaMismatchError    ATOLL_ERR_SCHEMA_MISMATCH        4
     ├── NotFoundError               ATOLL_ERR_NOT_FOUND              5
     ├── DuplicatePrimaryKeyError    ATOLL_ERR_DUPLICATE_PRIMARY_KEY  6
     ├── QueryError
     │    ├── QuerySyntaxError       ATOLL_ERR_QUERY_SYNTAX           7
     │    └── QueryInvalidError      ATOLL_ERR_QUERY_INVALID          8
     ├── NotInWriteError             ATOLL_ERR_NOT_IN_WRITE           9
     ├── AlreadyInWriteError         ATOLL_ERR_ALREADY_IN_WRITE      10
     ├── FileError                   ATOLL_ERR_FILE                  11
     ├── ClosedError                 ATOLL_ERR_CLOSED                12
     ├── ReadOnlyError               ATOLL_ERR_READ_ONLY             13
     ├── BusyError                   ATOLL_ERR_BUSY                  14
     ├── NoSuchClassError            ATOLL_ERR_NO_SUCH_CLASS         15
     ├── NoSuchPropertyError         ATOLL_ERR_NO_SUCH_PROPERTY      16
     ├── TypeMismatchError           ATOLL_ERR_TYPE_MISMATCH         17
     ├── MissingValueError           ATOLL_ERR_MISSING_VALUE         18
     ├── InternalError               ATOLL_ERR_INTERNAL              19
     ├── MigrationError              ATOLL_ERR_MIGRATION             20
     └── SyncError                   ATOLL_ERR_SYNC                  26
          ├── AuthError              ATOLL_ERR_AUTH                  21
          ├── SyncTimeoutError       ATOLL_ERR_TIMEOUT               22  (also a builtins.TimeoutError)
          ├── NetworkError           ATOLL_ERR_NETWORK               23  (also a builtins.ConnectionError)
          ├── SubscriptionExistsError ATOLL_ERR_SUBSCRIPTION_EXISTS  24
          └── SubscriptionError      ATOLL_ERR_SUBSCRIPTION          25

``SyncError`` is both the code "any other sync error" and the parent of the sync codes, as
``SchemaError`` is of ``SchemaMismatchError``: ``except atoll.SyncError`` catches every sync
failure. ``SyncTimeoutError`` is not named ``TimeoutError`` so as not to shadow the builtin it
also derives from (``except TimeoutError`` catches it too).

A code this binding does not know (the header says new ones may be added) raises a plain
:class:`AtollError` carrying that code. Errors that Python itself can see before calling the
library (a class name that is not a ``str``, a value JSON cannot hold) are the usual
``TypeError`` / ``ValueError``.
"""

from __future__ import annotations

from typing import Dict, NoReturn, Optional, Type

from . import _ffi


class AtollError(Exception):
    """A failure reported by libatoll.

    Attributes:
        code: the ``atoll_status_e`` value (an ``int``).
        message: the library's message (``atoll_last_error()``), naming the problem.
    """

    #: the code this class stands for (None for AtollError and the QueryError group)
    status: Optional[int] = None
    #: the code's name as the header spells it
    status_name: Optional[str] = None

    def __init__(self, message: str, code: Optional[int] = None) -> None:
        if code is None:
            code = self.status if self.status is not None else -1
        super().__init__(message)
        self.code: int = code
        self.message: str = message

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code})"

    def __reduce__(self):  # picklable across processes
        return (type(self), (self.message, self.code))


def _status(code: int, name: str):
    def decorate(cls: Type[AtollError]) -> Type[AtollError]:
        cls.status = code
        cls.status_name = name
        return cls
    return decorate


@_status(1, "ATOLL_ERR_INVALID_ARGUMENT")
class InvalidArgumentError(AtollError):
    """A NULL or otherwise unusable argument, or a pointer that is not a handle."""


@_status(2, "ATOLL_ERR_INVALID_JSON")
class InvalidJSONError(AtollError):
    """Text that is not valid JSON or UTF-8, or JSON of the wrong shape for the call."""


@_status(3, "ATOLL_ERR_SCHEMA")
class SchemaError(AtollError):
    """A schema that is not valid."""


@_status(4, "ATOLL_ERR_SCHEMA_MISMATCH")
class SchemaMismatchError(SchemaError):
    """The file's schema differs from the configuration's in a way that needs a migration."""


@_status(5, "ATOLL_ERR_NOT_FOUND")
class NotFoundError(AtollError):
    """No object with that primary key (or link target) exists."""


@_status(6, "ATOLL_ERR_DUPLICATE_PRIMARY_KEY")
class DuplicatePrimaryKeyError(AtollError):
    """An object with that primary key exists and the update policy is "error"."""


class QueryError(AtollError):
    """A query that does not parse or cannot run."""


@_status(7, "ATOLL_ERR_QUERY_SYNTAX")
class QuerySyntaxError(QueryError):
    """A query that does not parse; the message gives the position."""


@_status(8, "ATOLL_ERR_QUERY_INVALID")
class QueryInvalidError(QueryError):
    """A query that parses but cannot run: unknown property, wrong argument type or count."""


@_status(9, "ATOLL_ERR_NOT_IN_WRITE")
class NotInWriteError(AtollError):
    """A write call outside a write transaction."""


@_status(10, "ATOLL_ERR_ALREADY_IN_WRITE")
class AlreadyInWriteError(AtollError):
    """begin_write() on a realm already in a write transaction."""


@_status(11, "ATOLL_ERR_FILE")
class FileError(AtollError):
    """The file could not be opened, created, read or written."""


@_status(12, "ATOLL_ERR_CLOSED")
class ClosedError(AtollError):
    """The handle (or the realm it belongs to) has been closed."""


@_status(13, "ATOLL_ERR_READ_ONLY")
class ReadOnlyError(AtollError):
    """A write on a realm opened read-only."""


@_status(14, "ATOLL_ERR_BUSY")
class BusyError(AtollError):
    """The write lock was not obtained within write_timeout_ms; or the files of a realm that
    is open (in this process or another) cannot be deleted."""


@_status(15, "ATOLL_ERR_NO_SUCH_CLASS")
class NoSuchClassError(AtollError):
    """A class name the realm's schema does not have."""


@_status(16, "ATOLL_ERR_NO_SUCH_PROPERTY")
class NoSuchPropertyError(AtollError):
    """A property name the class does not have."""


@_status(17, "ATOLL_ERR_TYPE_MISMATCH")
class TypeMismatchError(AtollError):
    """A value of the wrong type for its property (or primary key)."""


@_status(18, "ATOLL_ERR_MISSING_VALUE")
class MissingValueError(AtollError):
    """A required property, or the primary key, was missing or null."""


@_status(19, "ATOLL_ERR_INTERNAL")
class InternalError(AtollError):
    """An unexpected failure inside the library or SQLite."""


@_status(20, "ATOLL_ERR_MIGRATION")
class MigrationError(AtollError):
    """A migration failed: its callback failed (the message is the callback's last atoll
    error, if it had one). The file is left as it was.

    When the Python migration callable of :func:`atoll.open` raises, ``open`` raises that
    exception itself, with this error as its ``__context__``.
    """


@_status(26, "ATOLL_ERR_SYNC")
class SyncError(AtollError):
    """A sync failure: the parent of the sync errors below, and itself any other sync error
    (the message starts with the protocol's error code, e.g. ``"permissionDenied: ..."``;
    docs/protocol.md). What the server reports while syncing in the background arrives through
    :meth:`atoll.App.on_error` as a :class:`atoll.SyncErrorEvent` instead."""


@_status(21, "ATOLL_ERR_AUTH")
class AuthError(SyncError):
    """A login was refused (wrong password, email taken, unknown key), or the user is logged
    out. The message has the server's reason."""


@_status(22, "ATOLL_ERR_TIMEOUT")
class SyncTimeoutError(SyncError, TimeoutError):
    """A sync wait (download, upload, subscriptions, connecting, a download before open) did
    not end in time. Also a :class:`TimeoutError` (the builtin)."""


@_status(23, "ATOLL_ERR_NETWORK")
class NetworkError(SyncError, ConnectionError):
    """The server could not be reached. Also a :class:`ConnectionError` (the builtin)."""


@_status(24, "ATOLL_ERR_SUBSCRIPTION_EXISTS")
class SubscriptionExistsError(SyncError):
    """A subscription with that name exists already: update it instead of adding it."""


@_status(25, "ATOLL_ERR_SUBSCRIPTION")
class SubscriptionError(SyncError):
    """The server refused a subscription set (SORT / DISTINCT / LIMIT, a field that is not
    queryable, an unknown class); the message has its reason. The previous set stays in
    force."""


#: code -> exception class, for every code of atoll_status_e except ATOLL_OK.
ERRORS_BY_CODE: Dict[int, Type[AtollError]] = {
    cls.status: cls  # type: ignore[misc]
    for cls in (
        InvalidArgumentError, InvalidJSONError, SchemaError, SchemaMismatchError,
        NotFoundError, DuplicatePrimaryKeyError, QuerySyntaxError, QueryInvalidError,
        NotInWriteError, AlreadyInWriteError, FileError, ClosedError, ReadOnlyError,
        BusyError, NoSuchClassError, NoSuchPropertyError, TypeMismatchError,
        MissingValueError, InternalError, MigrationError, AuthError, SyncTimeoutError,
        NetworkError, SubscriptionExistsError, SubscriptionError, SyncError,
    )
}

#: "ATOLL_ERR_TIMEOUT" -> exception class (the async open reports its status by name).
ERRORS_BY_NAME: Dict[str, Type[AtollError]] = {
    cls.status_name: cls for cls in ERRORS_BY_CODE.values()  # type: ignore[misc]
}


def error_for(code: int, message: str) -> AtollError:
    """The exception for a status code; unknown codes give a plain AtollError."""
    cls = ERRORS_BY_CODE.get(code, AtollError)
    if cls is AtollError:
        name = _ffi.status_name(code)
        message = f"{message} (status {code}{', ' + name if name else ''})"
    return cls(message, code)


def last_error(function: str) -> AtollError:
    """The exception for this thread's ``atoll_last_error()``, not raised.

    Call it right after a libatoll call (on the same thread) that reported failure.
    ``function`` names that call, for the rare case where the library reported failure
    without recording an error (a library bug), so that the message still says where.
    """
    failed, code, message = _ffi.last_error()
    if not failed or code == _ffi.ATOLL_OK:
        return InternalError(
            f"{function}() reported failure but atoll_last_error() holds no error "
            f"(code {code}, message {message!r})",
            _ffi.ATOLL_ERR_INTERNAL,
        )
    return error_for(code, message or f"{function}() failed with no message")


def raise_last_error(function: str) -> NoReturn:
    """Raises :func:`last_error` (see there)."""
    raise last_error(function)


def closed_error(what: str = "realm") -> ClosedError:
    """The error this binding raises itself for a handle it has closed already."""
    return ClosedError(f"the {what} is closed", _ffi.ATOLL_ERR_CLOSED)
