"""The owning layer and public API: :class:`Realm` and :class:`Results`.

Ownership: a :class:`Realm` owns its ``atoll_realm_t *`` and the :class:`Results` made from
it; each :class:`Results` owns its ``atoll_results_t *``. ``close()`` is idempotent and also
runs from ``weakref.finalize`` when the object is collected (or at interpreter exit). Closing
a realm first frees its live Results. A closed object raises :class:`~atoll.errors.ClosedError`.

Threads: a Realm may be shared by threads (the library serializes calls on one handle). A
write transaction belongs to the handle, not to a thread, so this layer makes threads take
turns: :meth:`Realm.begin_write` (and ``with realm.write():``) waits while *another thread* of
this process has a transaction open on the same Realm, and lets the library wait for other
handles and processes. Note that while one thread's transaction is open, every thread using
that Realm reads (and may write into) it.

Snapshots: a Realm reads the data as of its last refresh (:meth:`Realm.refresh`,
:meth:`Realm.begin_write`, and each delivery of notifications), not what other handles and
processes committed since. Change notifications (``observe`` methods, async ``changes``
streams) live in :mod:`atoll.notifications`; a Realm invalidates its tokens when it closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import operator
import os
import re
import sys
import threading
import time
import weakref
from contextlib import contextmanager
from typing import (Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence,
                    Tuple, Union, overload)

from . import _ffi, ejson
from .errors import (AlreadyInWriteError, AtollError, BusyError, ClosedError,
                     InvalidArgumentError, NotFoundError, NotInWriteError, closed_error,
                     last_error, raise_last_error)
from .notifications import (ChangeStream, CollectionChange, DeliveryScope, NotificationToken,
                            ObjectChange, RealmChange, ResultsChange, check_callback,
                            decode_collection_change, decode_object_change, decode_realm_change,
                            decode_results_change, dumps_key_paths, open_stream, register)

__all__ = ["Realm", "Results", "FrozenResults", "Migration", "open", "file_exists",
           "delete_files", "UPDATE_POLICIES", "CONFIG_KEYS", "NOTIFICATION_MODES"]

lib = _ffi.lib

#: update= values and their atoll_update_policy_e.
UPDATE_POLICIES: Dict[str, int] = {
    "error": _ffi.ATOLL_UPDATE_ERROR,
    "modified": _ffi.ATOLL_UPDATE_MODIFIED,
    "all": _ffi.ATOLL_UPDATE_ALL,
}

PathLike = Union[str, "os.PathLike[str]"]
Object = Dict[str, Any]
#: should_compact_on_launch: called with (total_bytes, used_bytes); returns whether to compact.
ShouldCompact = Callable[[int, int], bool]
#: migration: called with a :class:`Migration`; raises to fail the migration (what it returns
#: is ignored).
MigrationCallback = Callable[["Migration"], Any]
#: notifications=: who calls a realm's change callbacks. "thread": a notifier thread of the
#: library (the default); "host": the thread that calls Realm.deliver_notifications() when
#: Realm.notification_fd() is readable (an event loop; async streams do it themselves).
NOTIFICATION_MODES = ("thread", "host")
#: What a commit survives (open()'s ``durability``).
DURABILITY_MODES = ("full", "normal")


# MARK: - Argument helpers

def _cstr(value: Any, what: str) -> bytes:
    """A str argument as UTF-8 for a ``const char *``; refuses what C would truncate."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    if "\x00" in value:
        raise ValueError(f"{what} must not contain NUL characters: {value!r}")
    return value.encode("utf-8")  # a lone surrogate raises UnicodeEncodeError (a ValueError)


def _json_arg(value: Any) -> bytes:
    # Integer keys are the common case: their JSON text is their decimal text.
    if type(value) is int:
        return b"%d" % value
    return ejson.dumps(value).encode("utf-8")


def _policy(update: Any) -> int:
    if not isinstance(update, str):
        raise TypeError(f"update must be one of {sorted(UPDATE_POLICIES)}, "
                        f"not {type(update).__name__}")
    try:
        return UPDATE_POLICIES[update]
    except KeyError:
        raise ValueError(f"update must be one of {sorted(UPDATE_POLICIES)}, not {update!r}") \
            from None


def _object_arg(values: Any, what: str = "values") -> Mapping[str, Any]:
    if not isinstance(values, Mapping):
        raise TypeError(f"{what} must be a mapping of property names to values, "
                        f"not {type(values).__name__}")
    return values


def _size(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{what} must be >= 0, not {value}")
    return value


def _index(value: Any, what: str) -> int:
    """A list index for a ``size_t`` argument: an int (or an object with ``__index__``, not a
    bool) from 0 on. Negative indexes raise IndexError here, because ctypes would silently
    turn them into huge ``size_t`` values; they do not count from the end. So do indexes
    beyond ``sys.maxsize``, which no list reaches (and which ctypes would wrap around)."""
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an int, not bool")
    try:
        index = operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an int, not {type(value).__name__}") from None
    if index < 0:
        raise IndexError(f"{what} must be >= 0, not {index} (element operations do not count "
                         "negative indexes from the end)")
    if index > sys.maxsize:
        raise IndexError(f"{what} {index} is out of range")
    return index


# MARK: - Configurations

#: The keys of a configuration mapping: open()'s keyword arguments that describe the file.
CONFIG_KEYS = ("path", "schema", "schema_version", "in_memory", "read_only", "write_timeout_ms",
               "delete_realm_if_migration_needed", "notifications", "durability", "change_log_values")


def _config(options: Mapping[str, Any]) -> Dict[str, Any]:
    """The configuration JSON object (as a dict) for open()'s arguments (a mapping of
    :data:`CONFIG_KEYS`; missing ones take open()'s defaults), checked."""
    path = options.get("path")
    schema = options.get("schema")
    schema_version = options.get("schema_version", 0)
    in_memory = options.get("in_memory", False)
    read_only = options.get("read_only", False)
    write_timeout_ms = options.get("write_timeout_ms", -1)
    delete_if_needed = options.get("delete_realm_if_migration_needed", False)
    notifications = options.get("notifications", "thread")
    durability = options.get("durability", "full")
    change_log_values = options.get("change_log_values", False)
    config: Dict[str, Any] = {}
    if path is not None:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or os.PathLike, not {type(path).__name__}")
        path = os.fspath(path)
        if not isinstance(path, str):
            raise TypeError("path must be text, not bytes")
        if "\x00" in path:
            raise ValueError(f"path must not contain NUL characters: {path!r}")
        config["path"] = path
    elif not in_memory:
        raise TypeError("a realm needs a path unless in_memory=True")
    if schema is not None:
        if isinstance(schema, (str, bytes, Mapping)) or not isinstance(schema, Iterable):
            raise TypeError("schema must be a list of object schemas (dicts), "
                            f"not {type(schema).__name__}")
        config["schema"] = list(schema)
    if isinstance(schema_version, bool) or not isinstance(schema_version, int):
        raise TypeError(f"schema_version must be an int, not {type(schema_version).__name__}")
    config["schemaVersion"] = schema_version
    for name, flag in (("in_memory", in_memory), ("read_only", read_only),
                       ("delete_realm_if_migration_needed", delete_if_needed),
                       ("change_log_values", change_log_values)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be a bool, not {type(flag).__name__}")
    config["inMemory"] = in_memory
    config["readOnly"] = read_only
    if delete_if_needed:
        config["deleteRealmIfMigrationNeeded"] = True
    if change_log_values:
        config["changeLogValues"] = True
    if isinstance(write_timeout_ms, bool) or not isinstance(write_timeout_ms, int):
        raise TypeError(
            f"write_timeout_ms must be an int, not {type(write_timeout_ms).__name__}")
    config["writeTimeoutMs"] = write_timeout_ms
    if not isinstance(notifications, str):
        raise TypeError(f"notifications must be one of {list(NOTIFICATION_MODES)}, "
                        f"not {type(notifications).__name__}")
    if notifications not in NOTIFICATION_MODES:
        raise ValueError(f"notifications must be one of {list(NOTIFICATION_MODES)}, "
                         f"not {notifications!r}")
    config["notifications"] = notifications
    if not isinstance(durability, str):
        raise TypeError(f"durability must be one of {list(DURABILITY_MODES)}, not {type(durability).__name__}")
    if durability not in DURABILITY_MODES:
        raise ValueError(f"durability must be one of {list(DURABILITY_MODES)}, not {durability!r}")
    config["durability"] = durability
    return config


def _config_json(config: Union[PathLike, Mapping[str, Any]]) -> bytes:
    """The configuration JSON text of a path, or of a mapping with :data:`CONFIG_KEYS`."""
    if isinstance(config, (str, os.PathLike)):
        return _json_arg(_config({"path": config}))
    if not isinstance(config, Mapping):
        raise TypeError("a configuration must be a path or a mapping of open()'s keyword "
                        f"arguments ({', '.join(CONFIG_KEYS)}), not {type(config).__name__}")
    unknown = sorted(str(k) for k in config if k not in CONFIG_KEYS)
    if unknown:
        raise TypeError(f"unknown configuration keys {unknown}; a configuration takes "
                        f"{', '.join(CONFIG_KEYS)}")
    return _json_arg(_config(config))


def _open_handle(config_json: bytes, should_compact: Optional[ShouldCompact],
                 migration: Optional[MigrationCallback] = None, path: Optional[str] = None) -> Any:
    """Opens a realm handle: atoll_realm_open, or atoll_realm_open_with and ctypes callbacks
    for ``should_compact`` and ``migration``.

    Exceptions cannot cross into C, so each callback catches what its Python callable raises:

    * ``should_compact``: the callback answers "do not compact", the realm is closed again,
      and the exception is raised here.
    * ``migration``: the callback answers false, so the library rolls the migration back and
      fails the open with ATOLL_ERR_MIGRATION; the callable's own exception is raised here,
      with that MigrationError as its ``__context__`` (unless it has a context of its own,
      which is kept).
    """
    if should_compact is None and migration is None:
        handle = lib.atoll_realm_open(config_json)
        if not handle:
            raise_last_error("atoll_realm_open")
        return handle

    compact_raised: List[BaseException] = []
    migration_raised: List[BaseException] = []

    def compact_trampoline(total: int, used: int, _userdata: Any) -> bool:
        try:
            return bool(should_compact(int(total), int(used)))  # type: ignore[misc]
        except BaseException as e:  # noqa: B902 -- it must not reach ctypes, which drops it
            compact_raised.append(e)
            return False

    def migration_trampoline(handle: Any, _userdata: Any) -> bool:
        try:
            m = Migration(handle, path)
        except BaseException as e:  # noqa: B902
            migration_raised.append(e)
            return False
        try:
            migration(m)  # type: ignore[misc]
            return True
        except BaseException as e:  # noqa: B902 -- it must not reach ctypes, which drops it
            migration_raised.append(e)
            return False
        finally:
            m._end()

    # The callbacks and options stay referenced until atoll_realm_open_with returns, the only
    # time it may call back.
    options = _ffi.atoll_open_options_t()
    options.size = ctypes.sizeof(_ffi.atoll_open_options_t)
    if should_compact is not None:
        compact_callback = _ffi.atoll_should_compact_fn(compact_trampoline)
        options.should_compact = compact_callback
    if migration is not None:
        migration_callback = _ffi.atoll_migration_fn(migration_trampoline)
        options.migration = migration_callback
    handle = lib.atoll_realm_open_with(config_json, ctypes.byref(options))
    if not handle:
        error = last_error("atoll_realm_open_with")
        if migration_raised:
            raised = migration_raised[0]
            if raised.__context__ is None:
                raised.__context__ = error
            raise raised
        raise error from (compact_raised[0] if compact_raised else None)
    raised_first = (migration_raised or compact_raised or [None])[0]
    if raised_first is not None:
        lib.atoll_realm_close(handle)
        raise raised_first
    return handle


# MARK: - Finalizers (module functions: they must not hold a reference to their owner)

def _close_realm_handle(handle: Any) -> None:
    lib.atoll_realm_close(handle)


def _free_results_handle(handle: Any) -> None:
    lib.atoll_results_free(handle)


def _deliver_from_reader(realm_ref: "weakref.ref[Realm]") -> None:
    """An event loop's reader on a host-delivery realm's notification descriptor (it holds
    the realm weakly, like the finalizers)."""
    realm = realm_ref()
    if realm is None or realm.closed:
        return
    try:
        realm.deliver_notifications()
    except ClosedError:
        pass  # closed meanwhile; its streams are ending


# MARK: - RQL text helpers

_SUFFIX_RE = re.compile(r"\b(SORT|DISTINCT|LIMIT)\s*\(", re.IGNORECASE)
_ARG_RE = re.compile(r"\$(\d+)")


def _code_spans(rql: str) -> List[Tuple[int, int]]:
    """The [start, end) spans of ``rql`` that are outside string literals."""
    spans: List[Tuple[int, int]] = []
    i, start, n = 0, 0, len(rql)
    while i < n:
        ch = rql[i]
        if ch in ("'", '"'):
            spans.append((start, i))
            quote, i = ch, i + 1
            while i < n and rql[i] != quote:
                i += 2 if rql[i] == "\\" else 1
            i += 1
            start = i
        else:
            i += 1
    spans.append((start, min(i, n)))
    return spans


def _split_suffix(rql: str) -> Tuple[str, str]:
    """Splits a query into (predicate, "SORT(...) DISTINCT(...) LIMIT(...)" suffix)."""
    for start, end in _code_spans(rql):
        m = _SUFFIX_RE.search(rql, start, end)
        if m:
            return rql[:m.start()].strip(), rql[m.start():].strip()
    return rql.strip(), ""


def _shift_args(rql: str, by: int) -> str:
    """Renumbers ``$n`` to ``$(n+by)`` outside string literals."""
    if by == 0:
        return rql
    out: List[str] = []
    last = 0
    for start, end in _code_spans(rql):
        out.append(rql[last:start])
        out.append(_ARG_RE.sub(lambda m: f"${int(m.group(1)) + by}", rql[start:end]))
        last = end
    out.append(rql[last:])
    return "".join(out)


# MARK: - Realm

class Realm:
    """An open realm (one connection to one database file, or an in-memory database).

    Use :func:`atoll.open` (or this constructor, which takes the same arguments)::

        with atoll.open("app.realm", schema=[...], schema_version=1) as realm:
            with realm.write():
                realm.create("Dog", {"_id": 1, "name": "Rex"})
    """

    def __init__(
        self,
        path: Optional[PathLike] = None,
        *,
        schema: Optional[Sequence[Mapping[str, Any]]] = None,
        schema_version: int = 0,
        in_memory: bool = False,
        read_only: bool = False,
        write_timeout_ms: int = -1,
        should_compact_on_launch: Optional[ShouldCompact] = None,
        migration: Optional[MigrationCallback] = None,
        delete_realm_if_migration_needed: bool = False,
        notifications: str = "thread",
        durability: str = "full",
        change_log_values: bool = False,
    ) -> None:
        self._handle: Any = None
        config = _config(dict(path=path, schema=schema, schema_version=schema_version,
                              in_memory=in_memory, read_only=read_only,
                              write_timeout_ms=write_timeout_ms,
                              delete_realm_if_migration_needed=delete_realm_if_migration_needed,
                              notifications=notifications, durability=durability,
                              change_log_values=change_log_values))
        if should_compact_on_launch is not None and not callable(should_compact_on_launch):
            raise TypeError("should_compact_on_launch must be a callable(total_bytes, used_bytes) "
                            f"-> bool, not {type(should_compact_on_launch).__name__}")
        if migration is not None and not callable(migration):
            raise TypeError("migration must be a callable(migration), "
                            f"not {type(migration).__name__}")

        self._config_json = _json_arg(config)
        self._prepare(config.get("path"), write_timeout_ms, notifications)
        handle = _open_handle(self._config_json, should_compact_on_launch, migration, self.path)
        self._handle = handle
        self._finalizer = weakref.finalize(self, _close_realm_handle, handle)

    @classmethod
    def _from_handle(cls, handle: Any, config: Mapping[str, Any], sync: Any = None) -> "Realm":
        """A Realm owning a handle opened elsewhere (a synced realm: :mod:`atoll.sync`).
        ``config`` is the configuration dict (:func:`_config`) it was opened with; ``sync``
        the synced realm's state (it is closed with the realm)."""
        realm = cls.__new__(cls)
        realm._handle = None
        realm._config_json = _json_arg(dict(config))
        realm._prepare(config.get("path"), config.get("writeTimeoutMs", -1),
                       config.get("notifications", "thread"))
        realm._sync = sync
        realm._handle = handle
        realm._finalizer = weakref.finalize(realm, _close_realm_handle, handle)
        return realm

    def _prepare(self, path: Optional[str], write_timeout_ms: int,
                 notifications: str = "thread") -> None:
        """The state every Realm has, before its handle is set."""
        self.path: Optional[str] = path
        self.write_timeout_ms: int = write_timeout_ms
        #: who calls this realm's change callbacks: "thread" or "host" (see open())
        self.notifications: str = notifications
        self._lock = threading.Lock()        # guards _results, _tokens, _streams, _handle
        self._results: "weakref.WeakSet[Results]" = weakref.WeakSet()
        self._tokens: "weakref.WeakSet[NotificationToken]" = weakref.WeakSet()
        self._streams: "weakref.WeakSet[Any]" = weakref.WeakSet()
        self._write_cond = threading.Condition()     # threads of this process take turns
        self._writer: Optional[int] = None           # thread ident holding the transaction
        self._reader_lock = threading.Lock()         # guards _readers
        self._reader_owner: Optional[int] = None     # the thread holding _reader_lock
        self._readers: Dict[Any, int] = {}           # event loop -> streams polling on it
        self._notification_fd: Optional[int] = None
        #: a synced realm's sync state (atoll.sync._SyncedRealmState), None for a local realm
        self._sync: Any = None

    # MARK: Lifetime

    def close(self) -> None:
        """Closes the realm (idempotent). Invalidates its notification tokens (ending its
        change streams) and frees its live Results first; a write transaction left open is
        cancelled, and nothing of it is kept. Frozen results stay readable."""
        if self._handle is None:
            return
        self._end_observers()        # while the handle is open: running callbacks may read
        with self._lock:
            if self._handle is None:
                return
            results = list(self._results)
            self._handle = None
        self._end_observers()        # any registered meanwhile
        for r in results:
            r.close()
        if self._sync is not None:
            self._sync.close()       # the sync session handle, before the realm's
        self._finalizer()
        with self._write_cond:
            self._writer = None
            self._write_cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._handle is None

    def __enter__(self) -> "Realm":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._handle is None else "open"
        where = repr(self.path) if self.path is not None else "in-memory"
        return f"<atoll.Realm {where} {state}>"

    def _h(self) -> Any:
        handle = self._handle
        if handle is None:
            raise closed_error("realm")
        return handle

    # MARK: Transactions

    def begin_write(self) -> None:
        """Begins a write transaction.

        Waits while another thread of this process has one open on this Realm, then while
        another handle or process holds the file's write lock (up to ``write_timeout_ms``;
        -1 waits as long as it takes). Raises AlreadyInWriteError when this thread already
        has one open, BusyError on timeout, ReadOnlyError, ClosedError.
        """
        me = threading.get_ident()
        reserved = False
        deadline = (time.monotonic() + self.write_timeout_ms / 1000.0
                    if self.write_timeout_ms >= 0 else None)
        with self._write_cond:
            while self._writer is not None and self._writer != me and self._handle is not None:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise BusyError(
                        f"another thread kept this realm's write transaction open for more "
                        f"than write_timeout_ms={self.write_timeout_ms}",
                        _ffi.ATOLL_ERR_BUSY)
                self._write_cond.wait(remaining)
            if self._writer is None:
                self._writer = me
                reserved = True
        try:
            if not lib.atoll_realm_begin_write(self._h()):
                raise_last_error("atoll_realm_begin_write")
        except BaseException:
            if reserved:
                self._release_writer()
            raise

    def _release_writer(self) -> None:
        with self._write_cond:
            self._writer = None
            self._write_cond.notify_all()

    def commit(self) -> None:
        """Commits the write transaction (NotInWriteError when there is none)."""
        self._end_write(lib.atoll_realm_commit, "atoll_realm_commit")

    def cancel_write(self) -> None:
        """Cancels the write transaction: nothing written since begin_write() is kept."""
        self._end_write(lib.atoll_realm_cancel_write, "atoll_realm_cancel_write")

    def _end_write(self, fn: Any, name: str) -> None:
        if fn(self._h()):
            self._release_writer()
            return
        try:
            raise_last_error(name)
        except NotInWriteError:
            raise  # there was no transaction; leave any other thread's reservation alone
        except AtollError:
            self._release_writer()  # closed, or rolled back (ATOLL_ERR_FILE): it has ended
            raise

    @contextmanager
    def write(self) -> Iterator["Realm"]:
        """``with realm.write():`` -- begins a transaction, commits it when the block ends,
        cancels it (and re-raises) when the block raises."""
        self.begin_write()
        try:
            yield self
        except BaseException:
            if self._handle is not None:
                try:
                    self.cancel_write()
                except Exception:
                    pass  # the block's exception is the one that matters
            else:
                self._release_writer()
            raise
        self.commit()

    @property
    def in_write(self) -> bool:
        """Whether this realm has a write transaction open."""
        out = ctypes.c_bool(False)
        if not lib.atoll_realm_is_in_write(self._h(), ctypes.byref(out)):
            raise_last_error("atoll_realm_is_in_write")
        return bool(out.value)

    # MARK: Metadata

    @property
    def schema(self) -> List[Dict[str, Any]]:
        """The realm's schema: a list of object schemas in the object form."""
        text = _ffi.take_string(lib.atoll_realm_schema(self._h()))
        if text is None:
            raise_last_error("atoll_realm_schema")
        return ejson.loads(text)

    @property
    def schema_version(self) -> int:
        """The schema version stored in the file."""
        out = ctypes.c_uint64(0)
        if not lib.atoll_realm_schema_version(self._h(), ctypes.byref(out)):
            raise_last_error("atoll_realm_schema_version")
        return int(out.value)

    @property
    def version(self) -> int:
        """The version of the newest change-log entry (0 for a realm never written to), as
        this realm's snapshot shows it (see :meth:`refresh`)."""
        out = ctypes.c_uint64(0)
        if not lib.atoll_realm_version(self._h(), ctypes.byref(out)):
            raise_last_error("atoll_realm_version")
        return int(out.value)

    def changes(self, after_version: int = 0, max_entries: int = 0) -> List[Dict[str, Any]]:
        """The change-log entries newer than ``after_version``, oldest first (at most
        ``max_entries``; 0 means all): ``[{"version", "timestamp", "instructions"}, ...]``.

        The log keeps values only from the first commit after the file was opened with
        ``change_log_values=True``; an entry recorded before raises
        :class:`~atoll.InvalidArgumentError` naming its version."""
        after = _size(after_version, "after_version")
        most = _size(max_entries, "max_entries")
        text = _ffi.take_string(lib.atoll_realm_changes(self._h(), after, most))
        if text is None:
            raise_last_error("atoll_realm_changes")
        return ejson.loads(text)

    # MARK: Objects

    def create(self, class_name: str, values: Mapping[str, Any], update: str = "error") -> Object:
        """Creates an object (or updates the one with its primary key, as ``update`` says:
        "error", "modified" or "all"), in a write transaction. Returns it as stored."""
        cls = _cstr(class_name, "class_name")
        policy = _policy(update)
        body = _json_arg(_object_arg(values))
        text = _ffi.take_string(lib.atoll_object_create(self._h(), cls, body, policy))
        if text is None:
            raise_last_error("atoll_object_create")
        return ejson.loads(text)

    def create_many(self, class_name: str, rows: Iterable[Mapping[str, Any]],
                    update: str = "error") -> int:
        """Creates or updates many objects, all or nothing. Returns how many were written."""
        cls = _cstr(class_name, "class_name")
        policy = _policy(update)
        if isinstance(rows, (str, bytes, Mapping)) or not isinstance(rows, Iterable):
            raise TypeError(f"rows must be an iterable of mappings, not {type(rows).__name__}")
        items = [_object_arg(r, f"rows[{i}]") for i, r in enumerate(rows)]
        count = ctypes.c_size_t(0)
        if not lib.atoll_objects_create_many(self._h(), cls, _json_arg(items), policy,
                                             ctypes.byref(count)):
            raise_last_error("atoll_objects_create_many")
        return int(count.value)

    def get(self, class_name: str, primary_key: Any) -> Optional[Object]:
        """The object with that primary key, or None when there is none."""
        cls = _cstr(class_name, "class_name")
        text = _ffi.take_string(lib.atoll_object_get(self._h(), cls, _json_arg(primary_key)))
        if text is None:
            try:
                raise_last_error("atoll_object_get")
            except NotFoundError:
                return None
        return ejson.loads(text)  # type: ignore[arg-type]

    def delete(self, class_name: str, primary_key: Any) -> None:
        """Deletes the object with that primary key (NotFoundError when there is none)."""
        cls = _cstr(class_name, "class_name")
        if not lib.atoll_object_delete(self._h(), cls, _json_arg(primary_key)):
            raise_last_error("atoll_object_delete")

    def objects(self, class_name: str) -> "Results":
        """All objects of a class; narrow with :meth:`Results.filter`."""
        return Results(self, class_name, None, ())

    # MARK: Collection elements

    # One element of a list, set or dictionary property of one object, each call one atomic
    # change (one instruction in the change log), so that observers see which element
    # changed. Names follow the C ABI (atoll_list_insert -> list_insert, ...), so the header's
    # documentation applies as it is.

    def _target(self, class_name: str, primary_key: Any, property: str
                ) -> Tuple[Any, bytes, bytes, bytes]:
        cls = _cstr(class_name, "class_name")
        pk = _json_arg(primary_key)
        prop = _cstr(property, "property")
        return self._h(), cls, pk, prop

    def add_integer(self, class_name: str, primary_key: Any, property: str, delta: int) -> None:
        """Adds ``delta`` to an int property (a counter): sync adds concurrent increments up
        instead of keeping the last write. Needs a write transaction. Errors:
        InvalidArgumentError (not an int property, a null one, an overflow), NotInWriteError,
        NoSuchClassError, NoSuchPropertyError, NotFoundError, TypeMismatchError, ClosedError."""
        if not isinstance(delta, int) or isinstance(delta, bool) or not -(2 ** 63) <= delta < 2 ** 63:
            raise TypeError("delta must be an int that fits in 64 bits")
        realm, cls, pk, prop = self._target(class_name, primary_key, property)
        if not lib.atoll_object_add_integer(realm, cls, pk, prop, delta):
            raise_last_error("atoll_object_add_integer")

    def list_insert(self, class_name: str, primary_key: Any, property: str, index: int,
                    value: Any) -> None:
        """Inserts ``value`` into a list property at ``index`` (0 to len, both included): the
        elements from ``index`` on move up (``list.insert``, without its clamping).

        The object is named by class and primary key (its ``_atoll_key`` for a class without
        one). Values are written as :meth:`create` writes them: a link as the target's
        primary key, or as the whole target object, which is then created
        (DuplicatePrimaryKeyError when it exists); an embedded object as a dict (it belongs to
        the list); in a mixed list, any mixed value (an :class:`~atoll.Link`, a list, a dict).

        Indexes are ints from 0: a negative index raises IndexError before reaching the
        library (it does not count from the end), one past the end InvalidArgumentError.
        Needs a write transaction (NotInWriteError). Errors, each leaving the realm as it was:
        InvalidArgumentError (not a list, index out of range), NoSuchClassError,
        NoSuchPropertyError, NotFoundError (no such object, or no linked object with that
        key), TypeMismatchError, MissingValueError (None in a list that cannot hold it),
        DuplicatePrimaryKeyError, InvalidJSONError, ClosedError."""
        at = _index(index, "index")
        realm, cls, pk, prop = self._target(class_name, primary_key, property)
        if not lib.atoll_list_insert(realm, cls, pk, prop, at, _json_arg(value)):
            raise_last_error("atoll_list_insert")

    def list_set(self, class_name: str, primary_key: Any, property: str, index: int,
                 value: Any) -> None:
        """Replaces the list element at ``index`` (0 to len - 1) with ``value``. A replaced
        embedded object is deleted. Observers see a modification at ``index``. Values,
        indexes (negative ones raise IndexError) and errors as for :meth:`list_insert`."""
        at = _index(index, "index")
        realm, cls, pk, prop = self._target(class_name, primary_key, property)
        if not lib.atoll_list_set(realm, cls, pk, prop, at, _json_arg(value)):
            raise_last_error("atoll_list_set")

    def list_erase(self, class_name: str, primary_key: Any, property: str, index: int) -> None:
        """Removes the list element at ``index`` (0 to len - 1): the elements after it move
        down. An erased embedded object is deleted; an erased link leaves its target alone.
        Indexes (negative ones raise IndexError) and errors as for :meth:`list_insert`."""
        at = _index(index, "index")
        realm, cls, pk, prop = self._target(class_name, primary_key, property)
        if not lib.atoll_list_erase(realm, cls, pk, prop, at):
            raise_last_error("atoll_list_erase")

    def list_move(self, class_name: str, primary_key: Any, property: str, from_index: int,
                  to_index: int) -> None:
        """Moves the list element at ``from_index`` to ``to_index`` (both 0 to len - 1), as
        ``lst.insert(to_index, lst.pop(from_index))`` would. Observers see a move. Indexes
        (negative ones raise IndexError) and errors as for :meth:`list_insert`."""
        source = _index(from_index, "from_index")
        dest = _index(to_index, "to_index")
        realm, cls, pk, prop = self._target(class_name, primary_key, property)
        if not lib.atoll_list_move(realm, cls, pk, prop, source, dest):
            raise_last_error("atoll_list_move")

    def set_insert(self, class_name: str, primary_key: Any, property: str, value: Any) -> bool:
        """Adds ``value`` to a set property unless an equal element is in it (``set.add``);
        returns whether it was added. Values and errors as for :meth:`list_insert`
        (InvalidArgumentError when the property is not a set)."""
        out = ctypes.c_bool(False)
        realm, cls, pk, prop = self._target(class_name, primary_key, property)
        if not lib.atoll_set_insert(realm, cls, pk, prop, _json_arg(value), ctypes.byref(out)):
            raise_last_error("atoll_set_insert")
        return bool(out.value)

    def set_erase(self, class_name: str, primary_key: Any, property: str, value: Any) -> bool:
        """Removes the element equal to ``value`` from a set property (``set.discard``);
        returns whether there was one (a link to an object that does not exist is in no set:
        False). Values and errors as for :meth:`list_insert`."""
        out = ctypes.c_bool(False)
        realm, cls, pk, prop = self._target(class_name, primary_key, property)
        if not lib.atoll_set_erase(realm, cls, pk, prop, _json_arg(value), ctypes.byref(out)):
            raise_last_error("atoll_set_erase")
        return bool(out.value)

    def dictionary_set(self, class_name: str, primary_key: Any, property: str, key: str,
                       value: Any) -> None:
        """Sets ``key`` of a dictionary property to ``value`` (``d[key] = value``), adding the
        key or replacing its value (a replaced embedded object is deleted). Keys are
        non-empty str, without ``.`` or NUL and not starting with ``$`` (a NUL raises
        ValueError here, the others InvalidArgumentError). Values and errors as for
        :meth:`list_insert`."""
        realm, cls, pk, prop = self._target(class_name, primary_key, property)
        k = _cstr(key, "key")
        if not lib.atoll_dictionary_set(realm, cls, pk, prop, k, _json_arg(value)):
            raise_last_error("atoll_dictionary_set")

    def dictionary_erase(self, class_name: str, primary_key: Any, property: str,
                         key: str) -> bool:
        """Removes ``key`` from a dictionary property (``d.pop(key, None)``); returns whether
        it was there. An erased embedded object is deleted. Errors as for
        :meth:`dictionary_set`."""
        out = ctypes.c_bool(False)
        realm, cls, pk, prop = self._target(class_name, primary_key, property)
        k = _cstr(key, "key")
        if not lib.atoll_dictionary_erase(realm, cls, pk, prop, k, ctypes.byref(out)):
            raise_last_error("atoll_dictionary_erase")
        return bool(out.value)

    # MARK: Snapshots and notifications

    def refresh(self) -> bool:
        """Moves the realm's snapshot to the newest committed data (of other handles and
        processes too); returns whether that showed newer data. Reads see the data as of the
        last refresh: this, :meth:`begin_write` and each delivery of notifications refresh.
        Inside a write transaction it does nothing (and returns False)."""
        before = self.version
        if not lib.atoll_realm_refresh(self._h()):
            raise_last_error("atoll_realm_refresh")
        return self.version != before

    def notification_fd(self) -> int:
        """For ``notifications="host"``: a file descriptor that becomes readable when
        notifications are due. Poll it for reading (``select``, ``selectors``, an event
        loop's ``add_reader``) and call :meth:`deliver_notifications` when it is. Do not read
        or close it; it is valid until the realm closes (stop polling before closing).
        InvalidArgumentError for a realm that delivers on its own thread (the default)."""
        fd = int(lib.atoll_realm_notification_fd(self._h()))
        if fd < 0:
            raise_last_error("atoll_realm_notification_fd")
        self._notification_fd = fd
        return fd

    def deliver_notifications(self) -> None:
        """For ``notifications="host"``: refreshes the realm and calls, on this thread, the
        callbacks of every due notification. Inside a write transaction it delivers nothing
        (the commit makes the notifications due again). A callback's exception is reported
        (``sys.unraisablehook``) and delivery goes on; a ``KeyboardInterrupt`` or
        ``SystemExit`` raised by a callback is raised here once every callback has run.
        InvalidArgumentError for a ``"thread"`` realm (whose notifier thread delivers)."""
        handle = self._h()
        with DeliveryScope():
            ok = lib.atoll_realm_deliver_notifications(handle)
            if not ok:
                raise_last_error("atoll_realm_deliver_notifications")

    def observe(self, callback: Callable[[RealmChange], Any]) -> NotificationToken:
        """Calls ``callback(change)`` with a :class:`~atoll.RealmChange` after each delivery
        that covers commits (of this handle, another handle or another process): the
        versions it covers and the classes whose objects changed. No initial call.

        Callbacks run on the library's notifier thread (``notifications="thread"``) or inside
        :meth:`deliver_notifications` (``"host"``); they may read and write the realm (which
        shows the state the change describes). Keep the returned token: dropping it, or
        ``token.invalidate()``, unregisters. Observers are added outside write transactions
        (AlreadyInWriteError)."""
        check_callback(callback)
        handle, registration = register(lib.atoll_realm_observe, (self._h(),), callback,
                                        decode_realm_change)
        if not handle:
            raise_last_error("atoll_realm_observe")
        return self._adopt_token(NotificationToken(handle, registration, self,
                                                   f"on {self!r}"))

    def observe_object(self, class_name: str, primary_key: Any,
                       callback: Callable[[ObjectChange], Any],
                       key_paths: Optional[Sequence[str]] = None) -> NotificationToken:
        """Calls ``callback(change)`` with an :class:`~atoll.ObjectChange` after commits that
        changed the object with that primary key (its ``_atoll_key`` for classes without
        one): the changed properties with their old and new values. When the object is
        deleted, a last call with ``deleted=True``. No initial call.

        ``key_paths`` (e.g. ``["age", "dog.name"]``) limits what counts as a change; without
        them every property counts, and so do changes of linked objects (up to three links
        away) and of embedded ones. A link counts as changed when it is set, when the linked
        object changes, and when the linked object is deleted (the link becomes None).

        NoSuchClassError, NotFoundError (no such object), TypeMismatchError (a key of the
        wrong type), InvalidArgumentError (a bad key path, an embedded class),
        AlreadyInWriteError, ClosedError. See :meth:`observe` for threads and tokens."""
        check_callback(callback)
        cls = _cstr(class_name, "class_name")
        paths = dumps_key_paths(key_paths)
        handle, registration = register(
            lib.atoll_object_observe, (self._h(), cls, _json_arg(primary_key), paths),
            callback, decode_object_change)
        if not handle:
            raise_last_error("atoll_object_observe")
        return self._adopt_token(NotificationToken(
            handle, registration, self, f"on {class_name} {primary_key!r} of {self!r}"))

    def observe_collection(self, class_name: str, primary_key: Any, property: str,
                           callback: Callable[[CollectionChange], Any],
                           key_paths: Optional[Sequence[str]] = None) -> NotificationToken:
        """Calls ``callback(change)`` with a :class:`~atoll.CollectionChange` for a list, set
        or dictionary property of one object: first the initial state (``initial=True``,
        ``count``), then after each commit that changed it; ``deleted=True`` in the last call
        when the object is deleted.

        Lists and sets are compared by value (keys are the elements; links as primary keys);
        dictionaries in key order (keys are the dictionary's keys). ``key_paths`` is for
        collections of links only: what counts as a change of a linked object (every property
        when None); a modification is reported at the linked object's index.

        NoSuchPropertyError, InvalidArgumentError (not a collection; key paths on a collection
        of values), and the errors of :meth:`observe_object`."""
        check_callback(callback)
        cls = _cstr(class_name, "class_name")
        prop = _cstr(property, "property")
        paths = dumps_key_paths(key_paths)
        handle, registration = register(
            lib.atoll_collection_observe, (self._h(), cls, _json_arg(primary_key), prop, paths),
            callback, decode_collection_change)
        if not handle:
            raise_last_error("atoll_collection_observe")
        return self._adopt_token(NotificationToken(
            handle, registration, self,
            f"on {class_name} {primary_key!r}.{property} of {self!r}"))

    def realm_changes(self) -> "ChangeStream[RealmChange]":
        """An async stream of :meth:`observe`'s changes::

            async for change in realm.realm_changes():
                print(change.version, change.classes)

        (``realm.changes()`` is the change log, not a stream.) Call it in a coroutine; see
        :class:`~atoll.ChangeStream` for how it is delivered and when it ends."""
        return open_stream(self, lambda push: self.observe(push))

    def object_changes(self, class_name: str, primary_key: Any,
                       key_paths: Optional[Sequence[str]] = None) -> "ChangeStream[ObjectChange]":
        """An async stream of :meth:`observe_object`'s changes; it ends after the change
        that reports the object's deletion."""
        return open_stream(self, lambda push: self.observe_object(class_name, primary_key,
                                                                  push, key_paths),
                           finish_after=lambda change: change.deleted)

    def collection_changes(self, class_name: str, primary_key: Any, property: str,
                           key_paths: Optional[Sequence[str]] = None
                           ) -> "ChangeStream[CollectionChange]":
        """An async stream of :meth:`observe_collection`'s changes (the initial state
        first); it ends after the change that reports the owner's deletion."""
        return open_stream(self, lambda push: self.observe_collection(
            class_name, primary_key, property, push, key_paths),
            finish_after=lambda change: change.deleted)

    # MARK: Notification bookkeeping

    def _adopt_token(self, token: NotificationToken) -> NotificationToken:
        with self._lock:
            if self._handle is not None:
                self._tokens.add(token)
                return token
        token.invalidate()
        raise closed_error("realm")

    def _adopt_stream(self, state: Any) -> None:
        with self._lock:
            if self._handle is not None:
                self._streams.add(state)
                return
        state.close()
        raise closed_error("realm")

    def _end_observers(self) -> None:
        """Ends the change streams and invalidates the tokens of this realm."""
        with self._lock:
            streams = list(self._streams)
            tokens = list(self._tokens)
            self._streams.clear()
            self._tokens.clear()
        for state in streams:
            state.close()
        for token in tokens:
            token.invalidate()

    def _acquire_loop_reader(self, loop: asyncio.AbstractEventLoop) -> None:
        """Makes ``loop`` poll the notification descriptor (once per loop, counted)."""
        with self._reader_lock:
            self._reader_owner = threading.get_ident()
            try:
                users = self._readers.get(loop, 0)
                if users == 0:
                    fd = self.notification_fd()
                    loop.add_reader(fd, _deliver_from_reader, weakref.ref(self))
                self._readers[loop] = users + 1
            finally:
                self._reader_owner = None

    def _release_loop_reader(self, loop: asyncio.AbstractEventLoop) -> None:
        """Undoes one :meth:`_acquire_loop_reader` (on the loop's thread)."""
        nested = self._reader_owner == threading.get_ident()
        if nested and not loop.is_closed():
            # A stream collected by the garbage collector inside _acquire_loop_reader on
            # this thread: the lock is not reentrant, so finish after it.
            loop.call_soon_threadsafe(self._release_loop_reader, loop)
            return
        with (contextlib.nullcontext() if nested else self._reader_lock):
            users = self._readers.get(loop, 0) - 1
            if users > 0:
                self._readers[loop] = users
                return
            self._readers.pop(loop, None)
            fd = self._notification_fd
        if fd is not None and not loop.is_closed():
            loop.remove_reader(fd)

    # MARK: Files

    def write_copy(self, path: PathLike, compact: bool = True) -> None:
        """Writes a copy of the realm's committed data to a new file (Realm's ``writeCopy``).

        ``compact=True`` writes the data in as few pages as possible; ``False`` copies every
        page as it is. An in-memory realm can be copied to a file. Raises FileError when
        ``path`` (or a ``-wal``/``-shm``/``-journal`` file beside it) exists or cannot be
        written, AlreadyInWriteError inside a write transaction. A failed copy leaves no file.
        """
        target = _cstr(os.fspath(path) if isinstance(path, os.PathLike) else path, "path")
        if not isinstance(compact, bool):
            raise TypeError(f"compact must be a bool, not {type(compact).__name__}")
        if not lib.atoll_realm_write_copy(self._h(), target, compact):
            raise_last_error("atoll_realm_write_copy")

    def write_copy_to(self, config: Union[PathLike, Mapping[str, Any]]) -> None:
        """Writes a compacted copy to a configuration's path, then checks that the copy opens
        with that configuration (schema, schema_version); when it does not, the copy is
        removed and the open's error (SchemaMismatchError...) is raised.

        ``config`` is a path or a mapping of :data:`CONFIG_KEYS` (open()'s keyword
        arguments)::

            realm.write_copy_to({"path": "v2.realm", "schema": schema, "schema_version": 2})
        """
        config_json = _config_json(config)
        if not lib.atoll_realm_write_copy_to(self._h(), config_json):
            raise_last_error("atoll_realm_write_copy_to")

    def compact(self) -> None:
        """Compacts the file: rewrites the data in as few pages as possible and gives the free
        pages back to the file system. Other handles and processes may keep the realm open;
        waits for another writer like :meth:`begin_write` (BusyError past
        ``write_timeout_ms``). AlreadyInWriteError inside a write transaction, ReadOnlyError
        for a read-only realm."""
        if not lib.atoll_realm_compact(self._h()):
            raise_last_error("atoll_realm_compact")

    # MARK: Sync (atoll.sync)

    @property
    def synced(self) -> bool:
        """Whether this realm was opened with :func:`atoll.open_synced` or
        :func:`atoll.async_open` (a realm opened with :func:`atoll.open` is local, even on a
        synced file)."""
        return self._sync is not None

    @property
    def user(self) -> Any:
        """The :class:`atoll.User` a synced realm syncs for; None for a local realm."""
        return None if self._sync is None else self._sync.user

    @property
    def subscriptions(self) -> Any:
        """The subscription set of a flexible-sync realm (:class:`atoll.SubscriptionSet`)::

            with realm.subscriptions.update() as subs:
                subs.add("big", "Task", "priority > $0", 5)
            realm.subscriptions.wait()

        InvalidArgumentError for a local realm, ClosedError once the realm is closed."""
        from .sync import SubscriptionSet
        self._h()
        return SubscriptionSet(self, self._synced_state())

    @property
    def sync_session(self) -> Any:
        """The :class:`atoll.SyncSession` of a synced realm: its state, pause / resume and
        the waits for upload and download. InvalidArgumentError for a local realm."""
        self._h()
        return self._synced_state().session(self)

    def _synced_state(self) -> Any:
        if self._sync is None:
            raise InvalidArgumentError(
                "the realm is not synced (open it with atoll.open_synced or atoll.async_open)",
                _ffi.ATOLL_ERR_INVALID_ARGUMENT)
        return self._sync

    def write_copy_synced(self, config: Union[PathLike, Mapping[str, Any]],
                          user: Any = None, **sync_options: Any) -> None:
        """Copies this realm's data between local and synced (Realm's
        ``writeCopy(configuration:)``; :meth:`write_copy` is the plain file copy).

        With a ``user``: into a new synced realm at ``config`` (a path or a mapping of
        :data:`CONFIG_KEYS`), synced as ``sync_options`` say (the keyword arguments of
        :func:`atoll.open_synced`: ``mode``, ``partition_value``, ``initial_subscriptions``...).
        The objects are written anew, so they are uploaded when the copy is opened with
        :func:`atoll.open_synced`. Without a user: out as a local realm, without the sync
        metadata, which :func:`atoll.open` opens as a plain realm.

        InvalidArgumentError when the target has objects already, FileError, and the errors of
        opening the target."""
        from .sync import write_copy_synced
        write_copy_synced(self, config, user, **sync_options)

    # MARK: Results bookkeeping

    def _forget(self, results: "Results") -> None:
        with self._lock:
            self._results.discard(results)

    def _adopt(self, results: "Results", handle: Any) -> None:
        with self._lock:
            if self._handle is None:
                lib.atoll_results_free(handle)
                raise closed_error("realm")
            self._results.add(results)


# MARK: - Migrations

class _MigrationRealm(Realm):
    """:attr:`Migration.realm`: the realm being migrated, borrowed from the library for the
    duration of the migration callable.

    It has the new schema and is already in the migration's write transaction: create, get,
    query and delete directly, without ``write()`` (the migration commits when the callable
    returns). ``close()`` closes this wrapper only (its Results are freed, and it raises
    ClosedError from then on); the migration goes on. When the callable returns, the wrapper
    and its Results are closed for good, so that a realm kept past the callable raises
    ClosedError instead of reaching a handle the library has retired.
    """

    def __init__(self, handle: Any, path: Optional[str]) -> None:  # opens nothing: borrows
        self._handle = None
        self._prepare(path, -1)
        self._config_json = b""
        self._handle = handle
        self._finalizer = lambda: None  # borrowed: the library owns the handle

    def begin_write(self) -> None:
        self._h()
        raise AlreadyInWriteError(
            "a migration's realm is in the migration's write transaction already: create, "
            "update and delete objects directly (the migration commits when its callable "
            "returns)", _ffi.ATOLL_ERR_ALREADY_IN_WRITE)

    def __repr__(self) -> str:
        state = "closed" if self._handle is None else "migrating"
        where = repr(self.path) if self.path is not None else "in-memory"
        return f"<atoll.Realm {where} {state}>"


class Migration:
    """What the ``migration`` callable of :func:`atoll.open` receives: the schemas and versions
    before and after, the old objects, and the realm with the new schema to write to.

    When the callable runs, every class whose storage changed already has its new layout:
    values of properties that kept their name and type were copied (links keep pointing at
    the same objects), other properties hold their defaults. Rename, retype and fill in::

        def migrate(m):
            m.rename_property("Person", "name", "fullName")
            for key, old in m.old_objects("Person"):
                m.set("Person", key, {"age": int(old["age"] or 0)})

        atoll.open(path, schema=v2, schema_version=2, migration=migrate)

    ``old_schema``, ``new_schema``, ``old_version`` and ``new_version`` are plain values.
    The methods and :attr:`realm` work only while the callable runs; afterwards they raise
    :class:`~atoll.ClosedError`.
    """

    def __init__(self, handle: Any, path: Optional[str]) -> None:
        self._handle: Any = handle
        old, new = ctypes.c_uint64(0), ctypes.c_uint64(0)
        if not lib.atoll_migration_versions(handle, ctypes.byref(old), ctypes.byref(new)):
            raise_last_error("atoll_migration_versions")
        #: the file's schema version before the migration
        self.old_version: int = int(old.value)
        #: the configuration's schema version, which the file gets
        self.new_version: int = int(new.value)
        #: the file's schema before the migration (a list of object schemas, object form)
        self.old_schema: List[Dict[str, Any]] = self._json(
            lib.atoll_migration_old_schema(handle), "atoll_migration_old_schema")
        #: the schema after it
        self.new_schema: List[Dict[str, Any]] = self._json(
            lib.atoll_migration_new_schema(handle), "atoll_migration_new_schema")
        realm = lib.atoll_migration_realm(handle)
        if not realm:
            raise_last_error("atoll_migration_realm")
        #: the realm being migrated (see :class:`_MigrationRealm`): new schema, in the
        #: migration's transaction, usable only during the callable
        self.realm: Realm = _MigrationRealm(realm, path)

    @staticmethod
    def _json(ptr: Optional[int], function: str) -> Any:
        text = _ffi.take_string(ptr)
        if text is None:
            raise_last_error(function)
        return ejson.loads(text)  # type: ignore[arg-type]

    def _h(self) -> Any:
        handle = self._handle
        if handle is None:
            raise ClosedError("the migration is over: a Migration is usable only while the "
                              "migration callable runs", _ffi.ATOLL_ERR_CLOSED)
        return handle

    def _end(self) -> None:
        """Called when the callable returns: nothing of the migration is usable after."""
        self._handle = None
        self.realm.close()

    def __repr__(self) -> str:
        state = "over" if self._handle is None else "running"
        return f"<atoll.Migration {self.old_version} -> {self.new_version} {state}>"

    def old_objects(self, class_name: str) -> List[Tuple[int, Object]]:
        """The objects of a class as they were before the migration (with the old schema's
        properties), each with the key of the object it became: ``[(key, {...}), ...]``.
        Pass the key to :meth:`set`. NoSuchClassError when the old schema has no such class."""
        cls = _cstr(class_name, "class_name")
        entries = self._json(lib.atoll_migration_old_objects(self._h(), cls),
                             "atoll_migration_old_objects")
        return [(int(e["key"]), e["object"]) for e in entries]

    def set(self, class_name: str, key: int, values: Mapping[str, Any]) -> None:
        """Writes properties of the new object with ``key`` (from :meth:`old_objects`).
        Setting an int primary key moves the object to that key; links to it follow.
        NotFoundError when there is no object with that key; the errors of create()."""
        cls = _cstr(class_name, "class_name")
        if isinstance(key, bool) or not isinstance(key, int):
            raise TypeError(f"key must be an int, not {type(key).__name__}")
        body = _json_arg(_object_arg(values))
        if not lib.atoll_migration_set(self._h(), cls, key, body):
            raise_last_error("atoll_migration_set")

    def rename_property(self, class_name: str, old_name: str, new_name: str) -> None:
        """Moves the data of property ``old_name`` (of the old schema) to ``new_name`` (of
        the new schema, which the old one lacks). Both must hold the same type (optionality
        may differ: nulls become the default of a required property).
        NoSuchPropertyError, TypeMismatchError, InvalidArgumentError (``old_name`` is still in
        the new schema, or ``new_name`` was in the old one)."""
        cls = _cstr(class_name, "class_name")
        old = _cstr(old_name, "old_name")
        new = _cstr(new_name, "new_name")
        if not lib.atoll_migration_rename_property(self._h(), cls, old, new):
            raise_last_error("atoll_migration_rename_property")

    def delete_data(self, class_name: str) -> None:
        """Deletes every object of a class; a class the new schema does not have is removed
        from the file (without this, classes left out of the new schema stay, with their
        objects). NoSuchClassError for an unknown class."""
        cls = _cstr(class_name, "class_name")
        if not lib.atoll_migration_delete_data(self._h(), cls):
            raise_last_error("atoll_migration_delete_data")


def open(
    path: Optional[PathLike] = None,
    *,
    schema: Optional[Sequence[Mapping[str, Any]]] = None,
    schema_version: int = 0,
    in_memory: bool = False,
    read_only: bool = False,
    write_timeout_ms: int = -1,
    should_compact_on_launch: Optional[ShouldCompact] = None,
    migration: Optional[MigrationCallback] = None,
    delete_realm_if_migration_needed: bool = False,
    notifications: str = "thread",
    durability: str = "full",
    change_log_values: bool = False,
) -> Realm:
    """Opens (creating when needed) a realm. See :class:`Realm`.

    ``should_compact_on_launch(total_bytes, used_bytes) -> bool`` is called once during the
    open (not for read-only or in-memory realms), on this thread, with the database's size and
    the part of it that holds data; when it returns true and no other handle or process has
    the file open, the file is compacted before the realm is returned. If it raises, the file
    is not compacted, the realm is closed again and open() raises that exception.

    Schema changes: an existing file whose schema differs from ``schema`` only by additions
    gets them. Any other change needs a ``schema_version`` higher than the file's; the file is
    then migrated in one transaction: values of properties that kept their name and type are
    kept (links keep pointing at the same objects), other properties take their defaults,
    and then ``migration(m)``, when given, is called on this thread with a :class:`Migration`
    to move the data (it is called for any version bump, even one that only adds). If it
    raises, the migration is rolled back, the file is left exactly as it was, and open()
    raises that same exception, with the library's :class:`~atoll.MigrationError` as its
    ``__context__`` (unless the exception already had a context, which is kept). Whatever the
    callable returns is ignored. A ``schema_version`` lower than the file's raises
    :class:`~atoll.SchemaMismatchError` (no downgrades).

    ``delete_realm_if_migration_needed=True`` deletes every class and object instead of
    migrating, when a migration would be needed, and starts with ``schema``.

    ``notifications`` says who calls the realm's change callbacks: ``"thread"`` (the
    default) a notifier thread of the library; ``"host"`` the thread that calls
    :meth:`Realm.deliver_notifications` when :meth:`Realm.notification_fd` is readable (an
    event loop; the async ``changes`` streams do this themselves).

    ``durability`` says what a commit that returned survives: ``"full"`` (the default) a
    power loss or an operating system crash; ``"normal"`` a crash of the process only (after
    a power loss the last commits may be gone, the file intact), for fewer writes to the disk.

    ``change_log_values=True`` makes the file's change log keep the values it records, which
    :meth:`Realm.changes` returns; from the next commit on, for every handle and process
    (False leaves the file as it is). Without it the log keeps only what changed, which is
    what notifications read. Synced realms always keep values.

    The realm reads a snapshot: the data as of its last refresh (:meth:`Realm.refresh`,
    :meth:`Realm.begin_write`, each delivery of notifications), not what other handles and
    processes committed since.
    """
    return Realm(path, schema=schema, schema_version=schema_version, in_memory=in_memory,
                 read_only=read_only, write_timeout_ms=write_timeout_ms,
                 should_compact_on_launch=should_compact_on_launch, migration=migration,
                 delete_realm_if_migration_needed=delete_realm_if_migration_needed,
                 notifications=notifications, durability=durability,
                 change_log_values=change_log_values)


def file_exists(config: Union[PathLike, Mapping[str, Any]]) -> bool:
    """Whether the database file of a configuration exists (a path, or a mapping of
    :data:`CONFIG_KEYS`). An in-memory configuration has no file: False."""
    out = ctypes.c_bool(False)
    if not lib.atoll_realm_file_exists(_config_json(config), ctypes.byref(out)):
        raise_last_error("atoll_realm_file_exists")
    return bool(out.value)


def delete_files(config: Union[PathLike, Mapping[str, Any]]) -> bool:
    """Deletes the database file of a configuration with its ``-wal``, ``-shm`` and
    ``-journal`` files; returns whether any file was deleted (files that do not exist are not
    an error). Raises BusyError while the realm is open, in this process or another."""
    out = ctypes.c_bool(False)
    if not lib.atoll_realm_delete_files(_config_json(config), ctypes.byref(out)):
        raise_last_error("atoll_realm_delete_files")
    return bool(out.value)


# MARK: - Results

class _ResultsReader(Sequence[Object]):
    """What live and frozen results share: reading (len, indexing, slices, paged iteration)
    and the lifetime of the handle."""

    PAGE_SIZE = 1000
    _what = "results"

    _handle: Any
    _lock: threading.Lock
    _finalizer: Any

    # MARK: Lifetime

    def close(self) -> None:
        """Frees the results (idempotent)."""
        with self._lock:
            if self._handle is None:
                return
            self._handle = None
            self._finalizer()

    @property
    def closed(self) -> bool:
        return self._handle is None

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # MARK: Reading

    def _check_open(self) -> None:
        if self._handle is None:
            raise closed_error(self._what)

    def __len__(self) -> int:
        out = ctypes.c_size_t(0)
        with self._lock:
            self._check_open()
            ok = lib.atoll_results_count(self._handle, ctypes.byref(out))
            if not ok:
                raise_last_error("atoll_results_count")
        return int(out.value)

    def _fetch(self, offset: int, limit: int) -> List[Object]:
        """Objects [offset, offset + limit); limit 0 means all from offset on."""
        with self._lock:
            self._check_open()
            text = _ffi.take_string(lib.atoll_results_json(self._handle, offset, limit))
            if text is None:
                raise_last_error("atoll_results_json")
        return ejson.loads(text)

    @overload
    def __getitem__(self, index: int) -> Object: ...

    @overload
    def __getitem__(self, index: slice) -> List[Object]: ...

    def __getitem__(self, index: Union[int, slice]) -> Union[Object, List[Object]]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return self._fetch(0, 0)[index]
            if stop <= start:
                return []
            return self._fetch(start, stop - start)
        if isinstance(index, bool) or not isinstance(index, int):
            try:
                index = index.__index__()  # type: ignore[union-attr]
            except AttributeError:
                raise TypeError(
                    f"Results indices must be int or slice, not {type(index).__name__}"
                ) from None
        original = index
        if index < 0:
            index += len(self)
            if index < 0:
                raise IndexError(f"Results index {original} out of range")
        page = self._fetch(index, 1)
        if not page:
            raise IndexError(f"Results index {original} out of range")
        return page[0]

    def __iter__(self) -> Iterator[Object]:
        offset = 0
        while True:
            page = self._fetch(offset, self.PAGE_SIZE)
            yield from page
            if len(page) < self.PAGE_SIZE:
                return
            offset += len(page)

    def to_list(self) -> List[Object]:
        """All matching objects, read in one call."""
        return self._fetch(0, 0)


class Results(_ResultsReader):
    """The objects of one class that match a query, in the query's order.

    Results are live: each call (len, indexing, iteration page) sees the realm's data as of
    that call (the realm's snapshot: see :meth:`Realm.refresh`). :meth:`observe` and
    :meth:`changes` report how they change; :meth:`freeze` keeps a copy that never does.
    """

    frozen = False

    def __init__(self, realm: Realm, class_name: str, rql: Optional[str],
                 args: Sequence[Any]) -> None:
        self._handle: Any = None
        cls = _cstr(class_name, "class_name")
        rql_bytes = None if rql is None else _cstr(rql, "query")
        args_json = _json_arg(list(args)) if args else None
        self.realm: Realm = realm
        self.class_name: str = class_name
        self.query: Optional[str] = rql
        self.args: Tuple[Any, ...] = tuple(args)
        self._lock = threading.Lock()
        handle = lib.atoll_results_query(realm._h(), cls, rql_bytes, args_json)
        if not handle:
            raise_last_error("atoll_results_query")
        self._finalizer = weakref.finalize(self, _free_results_handle, handle)
        self._handle = handle
        try:
            realm._adopt(self, handle)
        except ClosedError:
            self._handle = None
            self._finalizer.detach()
            raise

    # MARK: Lifetime

    def close(self) -> None:
        """Frees the results (idempotent). Tokens of :meth:`observe` stay registered."""
        super().close()
        self.realm._forget(self)

    def __enter__(self) -> "Results":
        return self

    def _describe(self) -> str:
        q = "" if self.query is None else f" {self.query!r}"
        a = f" {list(self.args)!r}" if self.args else ""
        return f"{self.class_name}{q}{a}"

    def __repr__(self) -> str:
        return f"<atoll.Results {self._describe()}{' closed' if self.closed else ''}>"

    # MARK: Query

    def filter(self, rql: str, *args: Any) -> "Results":
        """New Results narrowed by ``rql`` (with ``$0``... bound to ``args``)::

            realm.objects("Dog").filter("age > $0 SORT(name ASC)", 2)

        On Results that are already filtered, the queries combine as ``(old) AND (new)``,
        the new ``$n`` renumbered after the old arguments; that needs the old query to have
        no SORT / DISTINCT / LIMIT (NotImplementedError otherwise).
        """
        if not isinstance(rql, str):
            raise TypeError(f"query must be a str, not {type(rql).__name__}")
        self._check_open()
        if self.query is None or not self.query.strip():
            return Results(self.realm, self.class_name, rql, args)
        old_pred, old_suffix = _split_suffix(self.query)
        if old_suffix:
            raise NotImplementedError(
                f"cannot narrow {self.query!r}: it ends in {old_suffix!r}, and SORT / "
                "DISTINCT / LIMIT cannot be combined with AND; filter the unfiltered "
                "objects() with one query instead")
        new_pred, new_suffix = _split_suffix(_shift_args(rql, len(self.args)))
        combined = f"({old_pred or 'TRUEPREDICATE'}) AND ({new_pred or 'TRUEPREDICATE'})"
        if new_suffix:
            combined += " " + new_suffix
        return Results(self.realm, self.class_name, combined, self.args + tuple(args))

    # MARK: Writing

    def delete_all(self) -> int:
        """Deletes every object that matches now (in a write transaction); returns how many."""
        out = ctypes.c_size_t(0)
        with self._lock:
            self._check_open()
            if not lib.atoll_results_delete_all(self._handle, ctypes.byref(out)):
                raise_last_error("atoll_results_delete_all")
        return int(out.value)

    # MARK: Live data

    def freeze(self) -> "FrozenResults":
        """A frozen copy: the objects that match in the realm's snapshot now. It is read like
        these results (len, indexing, slices, iteration) from any thread, never changes, and
        stays readable after the realm closes."""
        with self._lock:
            self._check_open()
            handle = lib.atoll_results_freeze(self._handle)
            if not handle:
                raise_last_error("atoll_results_freeze")
        return FrozenResults(handle, self.class_name, self.query, self.args)

    def observe(self, callback: Callable[[ResultsChange], Any],
                key_paths: Optional[Sequence[str]] = None) -> NotificationToken:
        """Calls ``callback(change)`` with a :class:`~atoll.ResultsChange`: first the initial
        state (``initial=True``, ``count``), then after each commit (of this handle, another
        handle or another process) that changed these results: deletions, insertions,
        modifications and moves by index, and the primary keys of the objects deleted,
        inserted and modified. Commits that change nothing here call nothing::

            def on_change(change):
                print(change.insertions, change.inserted_keys, change.count)

            token = realm.objects("Dog").filter("age > 2 SORT(name ASC)").observe(on_change)
            ...
            token.invalidate()

        ``key_paths`` (e.g. ``["name", "owner.name"]``) limits what counts as a modification
        (insertions and deletions always count); without them every property counts, and so
        do the properties of objects linked up to three links away. A bad key path raises
        InvalidArgumentError.

        Callbacks run on the library's notifier thread (``notifications="thread"``) or inside
        :meth:`Realm.deliver_notifications` (``"host"``); they may read and write the realm,
        which shows the state the change describes. A callback's exception is reported through
        ``sys.unraisablehook`` and does not stop delivery. Keep the token: dropping it or
        ``token.invalidate()`` unregisters (closing the realm does too; closing these results
        does not). Observers are added outside write transactions (AlreadyInWriteError).
        """
        check_callback(callback)
        paths = dumps_key_paths(key_paths)
        with self._lock:
            self._check_open()
            handle, registration = register(lib.atoll_results_observe, (self._handle, paths),
                                            callback, decode_results_change)
            if not handle:
                raise_last_error("atoll_results_observe")
        return self.realm._adopt_token(NotificationToken(handle, registration, self,
                                                         f"on {self._describe()}"))

    def changes(self, key_paths: Optional[Sequence[str]] = None
                ) -> "ChangeStream[ResultsChange]":
        """An async stream of :meth:`observe`'s changes, the initial state first::

            async for change in realm.objects("Dog").changes():
                if not change.initial:
                    print("new dogs:", change.inserted_keys)

        Call it in a coroutine (it needs the running event loop). With
        ``notifications="host"`` the loop itself polls the realm; with ``"thread"`` the
        library's notifier thread hands changes to the loop. Breaking out of the loop,
        ``aclose()``, cancellation or closing the realm end it (see
        :class:`~atoll.ChangeStream`).
        """
        return open_stream(self.realm, lambda push: self.observe(push, key_paths))


class FrozenResults(_ResultsReader):
    """Results frozen by :meth:`Results.freeze`: the objects that matched at that moment.

    Read them as results (len, indexing, slices, iteration, :meth:`to_list`) from any thread;
    they never change and stay readable after the realm closes. They cannot be filtered,
    observed or deleted from. :meth:`close` frees them (so does dropping them)."""

    frozen = True
    _what = "frozen results"

    def __init__(self, handle: Any, class_name: str, query: Optional[str],
                 args: Tuple[Any, ...]) -> None:
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _free_results_handle, handle)
        self._handle: Any = handle
        self.class_name: str = class_name
        self.query: Optional[str] = query
        self.args: Tuple[Any, ...] = args

    def __enter__(self) -> "FrozenResults":
        return self

    def freeze(self) -> "FrozenResults":
        """These results (they are frozen already)."""
        self._check_open()
        return self

    def __repr__(self) -> str:
        q = "" if self.query is None else f" {self.query!r}"
        a = f" {list(self.args)!r}" if self.args else ""
        return f"<atoll.FrozenResults {self.class_name}{q}{a}{' closed' if self.closed else ''}>"
