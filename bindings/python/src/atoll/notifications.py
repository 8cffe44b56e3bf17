"""Live data: change notifications (``atoll_*_observe``) as Python callbacks and async streams.

What a callback receives (decoded from the library's JSON, keys and values as Python values
through :mod:`atoll.ejson`):

* :class:`ResultsChange` from :meth:`Results.observe <atoll.Results.observe>`;
* :class:`ObjectChange` from :meth:`Realm.observe_object <atoll.Realm.observe_object>`;
* :class:`CollectionChange` from :meth:`Realm.observe_collection
  <atoll.Realm.observe_collection>`;
* :class:`RealmChange` from :meth:`Realm.observe <atoll.Realm.observe>`.

Each registration returns a :class:`NotificationToken`; ``token.invalidate()`` (or leaving its
``with`` block, or dropping the last reference to it) unregisters the callback.

How this layer keeps ctypes safe:

* Only two CFUNCTYPE objects ever cross into the library (:data:`_CHANGES_TRAMPOLINE` and
  :data:`_FREE_TRAMPOLINE`, module globals that live as long as the process). The ``userdata``
  given to the library is a small integer naming a :class:`_Registration` in :data:`_live`;
  the library's ``free_userdata`` removes it, once, after the callback's last call. So no
  callback object is ever freed while the library may still call it, and none leaks.
* An exception raised by a user's callback never reaches ctypes: it is reported through
  :func:`sys.unraisablehook` (which prints it by default) and delivery goes on. Within
  :meth:`Realm.deliver_notifications <atoll.Realm.deliver_notifications>`, a
  ``KeyboardInterrupt`` or ``SystemExit`` raised by a callback is re-raised by that call once
  every due callback has run.
* No lock of this module is held while calling the library, so that a callback running on the
  library's notifier thread can always finish (``atoll_token_free`` waits for it).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
import threading
import traceback
import weakref
from dataclasses import dataclass, field
from typing import (Any, Callable, Dict, Generic, List, Mapping, NamedTuple,
                    Optional, TypeVar)

from . import _ffi, ejson
from .errors import AtollError, error_for

__all__ = ["Move", "ResultsChange", "CollectionChange", "ObjectChange", "RealmChange",
           "NotificationToken", "ChangeStream"]

lib = _ffi.lib


# MARK: - Changes

class Move(NamedTuple):
    """An object (or element) the change moved: its index in the old results and in the new.

    A tuple, so ``change.moves == [(0, 4)]`` works as well as ``[Move(0, 4)]``.
    """

    from_index: int
    to_index: int


@dataclass
class ResultsChange:
    """How the results of a query changed (what :meth:`Results.observe` callbacks receive).

    The first call has ``initial=True``, the current ``count`` and empty lists. Later ones:

    * ``deletions``: indices in the old results; ``insertions`` and ``modifications``:
      indices in the new ones; each ascending. Deleting the deletions (from the highest) and
      then inserting the insertions (from the lowest) turns the old list into the new one.
    * ``moves``: objects the sort moved, as :class:`Move` (old index, new index). A moved
      object is *also* a deletion at its old index and an insertion at its new one (as in
      realm-core), so code that ignores ``moves`` still ends up right.
    * ``deleted_keys``, ``inserted_keys``, ``modified_keys``: the primary keys (row keys for
      classes without one) of the objects that really left, entered or changed; a moved
      object is in none of them unless it also changed.
    * ``count``: how many objects the results hold now.
    """

    initial: bool = False
    deletions: List[int] = field(default_factory=list)
    insertions: List[int] = field(default_factory=list)
    modifications: List[int] = field(default_factory=list)
    moves: List[Move] = field(default_factory=list)
    deleted_keys: List[Any] = field(default_factory=list)
    inserted_keys: List[Any] = field(default_factory=list)
    modified_keys: List[Any] = field(default_factory=list)
    count: int = 0
    #: set when the change could not be computed (e.g. another process migrated the file so
    #: that the query no longer runs): the observer's last call, with empty lists
    error: Optional[AtollError] = None


@dataclass
class CollectionChange(ResultsChange):
    """How a list, set or dictionary property of one object changed
    (:meth:`Realm.observe_collection`): the fields of :class:`ResultsChange`, and ``deleted``.

    For lists and sets the keys are the elements' values (links as primary keys); for
    dictionaries the indices are in key order and the keys are the dictionary's keys. A
    list changed by element operations gets its change from them (moves, modifications); a
    collection replaced whole when it is updated is compared by value:
    ``[1, 2, 3, 4]`` becoming ``[9, 4, 1, 33]`` deletes indices ``[0, 1, 2]``, inserts
    ``[0, 2, 3]`` and moves ``(0, 2)``. ``deleted`` is true when the owning object was
    deleted (the last call).
    """

    deleted: bool = False


@dataclass
class ObjectChange:
    """How one object changed (:meth:`Realm.observe_object`).

    ``changed_properties`` names the properties that changed, in schema order; ``old`` and
    ``new`` map each of them to its value before and after. When the object was deleted,
    ``deleted`` is true, ``changed_properties`` and ``new`` are empty and ``old`` is the whole
    object as last seen; nothing is delivered after that.
    """

    deleted: bool = False
    changed_properties: List[str] = field(default_factory=list)
    old: Dict[str, Any] = field(default_factory=dict)
    new: Dict[str, Any] = field(default_factory=dict)
    #: set when the change could not be computed: the observer's last call
    error: Optional[AtollError] = None


@dataclass
class RealmChange:
    """Commits delivered to a realm observer (:meth:`Realm.observe`): the change-log versions
    the delivery covers (several commits may arrive in one call) and the names of the classes
    whose objects changed."""

    previous_version: int = 0
    version: int = 0
    classes: List[str] = field(default_factory=list)


def _ints(value: Any) -> List[int]:
    return [int(i) for i in value or ()]


def _results_fields(d: Mapping[str, Any]) -> Dict[str, Any]:
    return dict(
        initial=bool(d.get("initial", False)),
        deletions=_ints(d.get("deletions")),
        insertions=_ints(d.get("insertions")),
        modifications=_ints(d.get("modifications")),
        moves=[Move(int(m["from"]), int(m["to"])) for m in d.get("moves") or ()],
        deleted_keys=list(d.get("deletedKeys") or ()),
        inserted_keys=list(d.get("insertedKeys") or ()),
        modified_keys=list(d.get("modifiedKeys") or ()),
        count=int(d.get("count", 0)),
        error=_error(d),
    )


def _error(d: Mapping[str, Any]) -> Optional[AtollError]:
    """The error a change carries (``"error": {"code", "message"}``), as the binding's exception."""
    e = d.get("error")
    if not isinstance(e, Mapping):
        return None
    return error_for(int(e.get("code", 0)), str(e.get("message", "")))


def decode_results_change(d: Mapping[str, Any]) -> ResultsChange:
    """A :class:`ResultsChange` from the library's (EJSON-decoded) change object."""
    return ResultsChange(**_results_fields(d))


def decode_collection_change(d: Mapping[str, Any]) -> CollectionChange:
    """A :class:`CollectionChange` from the library's (EJSON-decoded) change object."""
    return CollectionChange(deleted=bool(d.get("deleted", False)), **_results_fields(d))


def decode_object_change(d: Mapping[str, Any]) -> ObjectChange:
    """An :class:`ObjectChange` from the library's (EJSON-decoded) change object."""
    return ObjectChange(deleted=bool(d.get("deleted", False)),
                        changed_properties=[str(p) for p in d.get("changedProperties") or ()],
                        old=dict(d.get("old") or {}), new=dict(d.get("new") or {}), error=_error(d))


def decode_realm_change(d: Mapping[str, Any]) -> RealmChange:
    """A :class:`RealmChange` from the library's (EJSON-decoded) change object."""
    return RealmChange(previous_version=int(d.get("previousVersion", 0)),
                       version=int(d.get("version", 0)),
                       classes=[str(c) for c in d.get("classes") or ()])


# MARK: - Reporting a callback's exception

def _unraisable_args_type() -> Optional[type]:
    """The type of what sys.unraisablehook receives (not exposed by name): captured once, at
    import, from a deliberately unraisable exception."""
    captured: List[Any] = []

    class _Probe:
        def __del__(self) -> None:
            raise RuntimeError("atoll: probing sys.unraisablehook's argument type")

    previous = sys.unraisablehook
    sys.unraisablehook = captured.append
    try:
        _Probe()
    finally:
        sys.unraisablehook = previous
    return type(captured[0]) if captured else None


class _UnraisableArgs:
    """A stand-in for sys.UnraisableHookArgs where the real type could not be found."""

    def __init__(self, values: Any) -> None:
        self.exc_type, self.exc_value, self.exc_traceback, self.err_msg, self.object = values


_UNRAISABLE_ARGS: Any = _unraisable_args_type() or _UnraisableArgs


def report_callback_error(exc: BaseException, callback: Any,
                          message: str = "Exception ignored in atoll change callback") -> None:
    """Reports an exception of a change callback through :func:`sys.unraisablehook` (which
    prints it to stderr by default; pytest and applications may install their own), or prints
    it when the hook itself fails. Never raises."""
    try:
        hook = sys.unraisablehook
        hook(_UNRAISABLE_ARGS((type(exc), exc, exc.__traceback__, message, callback)))
    except BaseException:  # noqa: B902 -- reporting must not raise into the library
        try:
            print(f"{message}: {callback!r}", file=sys.stderr)
            traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
        except BaseException:  # noqa: B902
            pass


# MARK: - Registrations

class _Registration:
    """What the library's userdata stands for: the Python callable and how to decode for it.

    Lives in :data:`_live` from just before the ``atoll_*_observe`` call until the library
    calls ``free_userdata`` (once, after the last call of the callback)."""

    __slots__ = ("callback", "decode", "active", "__weakref__")

    def __init__(self, callback: Callable[[Any], Any],
                 decode: Callable[[Mapping[str, Any]], Any]) -> None:
        self.callback = callback
        self.decode = decode
        self.active = True


#: userdata -> registration. Plain dict operations (atomic under the GIL), no lock: a lock
#: here could be held by a thread that the garbage collector makes free a token, which waits
#: for a callback that would wait for the lock.
_live: Dict[int, _Registration] = {}
_userdata_ids = itertools.count(1)
#: Per thread: while Realm.deliver_notifications runs, the BaseExceptions (KeyboardInterrupt,
#: SystemExit) that its callbacks raised, to re-raise when it returns.
_delivering = threading.local()


def _on_changes(userdata: Optional[int], changes_json: Optional[bytes]) -> None:
    """The one atoll_changes_fn: finds the registration and calls its Python callable."""
    registration = _live.get(userdata or 0)
    if registration is None or not registration.active or changes_json is None:
        return
    callback = registration.callback
    try:
        change = registration.decode(ejson.loads(changes_json.decode("utf-8")))
        if registration.active:  # invalidated on another thread meanwhile: stay silent
            callback(change)
    except Exception as e:  # noqa: BLE001 -- must not reach ctypes
        report_callback_error(e, callback)
    except BaseException as e:  # noqa: B902 -- KeyboardInterrupt, SystemExit
        pending = getattr(_delivering, "pending", None)
        if pending is not None:
            pending.append(e)
        else:
            report_callback_error(e, callback)


def _on_free(userdata: Optional[int]) -> None:
    """The one atoll_free_userdata_fn: the library is done with this registration."""
    registration = _live.pop(userdata or 0, None)
    if registration is not None:
        registration.active = False
        registration.callback = None  # type: ignore[assignment]  # drop the user's objects now


#: The library calls these from its notifier threads; they live as long as the process.
_CHANGES_TRAMPOLINE = _ffi.atoll_changes_fn(_on_changes)
_FREE_TRAMPOLINE = _ffi.atoll_free_userdata_fn(_on_free)


def register(observe: Callable[..., Any], args: tuple, callback: Callable[[Any], Any],
             decode: Callable[[Mapping[str, Any]], Any]) -> "tuple[Any, _Registration]":
    """Calls ``observe(*args, fn, userdata, free_userdata)`` (an ``atoll_*_observe``) for
    ``callback``. Returns (token handle, registration); on failure the handle is NULL (falsy)
    and the library's error is this thread's last error (the registration is gone already)."""
    registration = _Registration(callback, decode)
    userdata = next(_userdata_ids)
    _live[userdata] = registration  # before the call: the first delivery may come at once
    try:
        handle = observe(*args, _CHANGES_TRAMPOLINE, userdata, _FREE_TRAMPOLINE)
    except BaseException:
        _live.pop(userdata, None)  # ctypes refused the arguments: the library never saw them
        raise
    if not handle:
        _live.pop(userdata, None)  # free_userdata ran already; this is only belt and braces
        registration.active = False
    return handle, registration


class DeliveryScope:
    """``with DeliveryScope():`` around atoll_realm_deliver_notifications: collects the
    KeyboardInterrupt / SystemExit its callbacks raise on this thread and re-raises the first
    when the block ends."""

    def __enter__(self) -> "DeliveryScope":
        self._outer = getattr(_delivering, "pending", None)
        _delivering.pending = []
        return self

    def __exit__(self, *exc: Any) -> None:
        pending = _delivering.pending
        _delivering.pending = self._outer
        if pending and exc[0] is None:
            raise pending[0]


# MARK: - Tokens

def _free_token(handle: Any, registration: _Registration) -> None:
    registration.active = False     # the callable is not called again, even by a racing call
    lib.atoll_token_free(handle)    # waits for a call running on another thread to return


class NotificationToken:
    """Keeps a change callback registered. ``invalidate()`` unregisters it.

    When ``invalidate()`` returns, the callback is not running on another thread and will
    never be called again (it may be called inside the callback itself, which then finishes).
    A token is also a context manager (``with results.observe(cb):``), and dropping the last
    reference to it unregisters the callback too: keep the token for as long as you want
    changes. Closing the realm invalidates its tokens.

    ``invalidate()`` waits for a call of the callback running on another thread (the
    notifier thread) to return: do not call it while holding something that callback waits
    for.
    """

    def __init__(self, handle: Any, registration: _Registration, source: Any,
                 description: str) -> None:
        self._registration = registration
        #: what is observed: the Results, or the Realm (keeps it alive while registered)
        self.source = source
        self._description = description
        self._finalizer = weakref.finalize(self, _free_token, handle, registration)

    def invalidate(self) -> None:
        """Unregisters the callback (idempotent, any thread)."""
        self._finalizer()

    @property
    def invalidated(self) -> bool:
        """Whether :meth:`invalidate` was called (or the realm was closed)."""
        return not self._finalizer.alive

    def __enter__(self) -> "NotificationToken":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.invalidate()

    def __repr__(self) -> str:
        state = " invalidated" if self.invalidated else ""
        return f"<atoll.NotificationToken {self._description}{state}>"


# MARK: - Async streams

T = TypeVar("T")
_END = object()


class _StreamState:
    """What a :class:`ChangeStream`'s callback and cleanup share (never the stream itself, so
    that dropping the stream finalizes it)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, realm: Any) -> None:
        self.loop = loop
        self.loop_thread = threading.get_ident()
        self.realm = realm
        self.queue: "asyncio.Queue[Any]" = asyncio.Queue()
        self.token: Optional[NotificationToken] = None
        self.reader = False              # whether this stream holds the realm's loop reader
        self.closed = False              # no more changes will be queued
        self.stopped = False             # the consumer ended the iteration
        self.finish_after: Callable[[Any], bool] = lambda change: False
        self._lock = threading.Lock()

    def _in_loop(self, fn: Callable[..., Any], *args: Any, always: bool = False) -> None:
        """Runs fn(*args) on the loop's thread: now when this is it, else soon. Once the loop
        is closed nobody waits any more: fn is skipped, or (``always``) run here."""
        if self.loop.is_closed() or threading.get_ident() == self.loop_thread:
            if always or not self.loop.is_closed():
                fn(*args)
            return
        try:
            self.loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # closed meanwhile
            if always:
                fn(*args)

    def push(self, change: Any) -> None:
        """The registration's callback (any thread)."""
        if not self.closed:
            self._in_loop(self.queue.put_nowait, change)

    def close(self) -> None:
        """Unregisters, stops polling and wakes the consumer (idempotent, any thread)."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            token, self.token = self.token, None
            reader, self.reader = self.reader, False
        if token is not None:
            token.invalidate()
        if reader:  # always: the realm's count of the loop's users must go down
            self._in_loop(self.realm._release_loop_reader, self.loop, always=True)
        self._in_loop(self.queue.put_nowait, _END)


class ChangeStream(Generic[T]):
    """An asynchronous iterator of changes: ``async for change in results.changes(): ...``.

    Made by :meth:`Results.changes`, :meth:`Realm.realm_changes`,
    :meth:`Realm.object_changes` and :meth:`Realm.collection_changes`, inside a running event
    loop (and consumed on that loop). For a realm opened with ``notifications="host"`` the
    loop polls the realm's notification descriptor (``loop.add_reader``) and delivers on its
    own thread; with ``"thread"`` the library's notifier thread hands each change to the loop
    (``loop.call_soon_threadsafe``). Changes wait in an unbounded queue until consumed.

    The iteration ends (and the registration is freed and the loop stops polling) when the
    loop body breaks out and drops the stream, on :meth:`aclose` (or the end of an ``async
    with`` block), when the task waiting for a change is cancelled, after an object or
    collection change with ``deleted=True``, and when the realm is closed (changes already
    queued are yielded first). When a change cannot be computed (its ``error`` is set), the
    iteration raises that error.
    """

    def __init__(self, state: _StreamState) -> None:
        self._state = state
        self._finalizer = weakref.finalize(self, state.close)

    def __aiter__(self) -> "ChangeStream[T]":
        return self

    async def __anext__(self) -> T:
        state = self._state
        if state.stopped:
            raise StopAsyncIteration
        try:
            item = await state.queue.get()
        except asyncio.CancelledError:
            self._stop()
            raise
        if item is _END:
            self._stop()
            raise StopAsyncIteration
        error = getattr(item, "error", None)
        if error is not None:  # the observer's last call: the stream ends with its error
            self._stop()
            raise error
        if state.finish_after(item):
            self._stop()
        return item  # type: ignore[no-any-return]

    def _stop(self) -> None:
        self._state.stopped = True
        self._finalizer()

    async def aclose(self) -> None:
        """Ends the iteration: frees the registration and stops polling."""
        self._stop()

    def close(self) -> None:
        """:meth:`aclose`, callable without awaiting (from any thread)."""
        self._stop()

    @property
    def closed(self) -> bool:
        return self._state.stopped or self._state.closed

    async def __aenter__(self) -> "ChangeStream[T]":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self._stop()

    def __repr__(self) -> str:
        token = self._state.token
        what = token._description if token is not None else "closed"
        return f"<atoll.ChangeStream {what}>"


def open_stream(realm: Any, observe: Callable[[Callable[[Any], None]], NotificationToken],
                finish_after: Optional[Callable[[Any], bool]] = None) -> ChangeStream[Any]:
    """A :class:`ChangeStream` on the running loop, fed by ``observe(push)`` (which registers
    a callback and returns its token)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        raise RuntimeError("a change stream needs a running event loop: call it from a "
                           "coroutine (async for change in results.changes(): ...)") from None
    state = _StreamState(loop, realm)
    if finish_after is not None:
        state.finish_after = finish_after
    token = observe(state.push)
    state.token = token
    stream: ChangeStream[Any] = ChangeStream(state)
    if realm.notifications == "host":
        try:
            realm._acquire_loop_reader(loop)
        except BaseException:
            stream.close()
            raise
        state.reader = True
    realm._adopt_stream(state)
    return stream


def dumps_key_paths(key_paths: Any) -> Optional[bytes]:
    """``key_paths`` (None, or an iterable of str such as ``["name", "dogs.name"]``) as the
    JSON text the library takes; TypeError for anything else."""
    if key_paths is None:
        return None
    if isinstance(key_paths, (str, bytes, Mapping)) or not hasattr(key_paths, "__iter__"):
        raise TypeError("key_paths must be None or a list of str (e.g. ['name', 'dogs.name']), "
                        f"not {type(key_paths).__name__}")
    paths = list(key_paths)
    for p in paths:
        if not isinstance(p, str):
            raise TypeError(f"key_paths must hold str, not {type(p).__name__} ({p!r})")
        if "\x00" in p:
            raise ValueError(f"key paths must not contain NUL characters: {p!r}")
    return json.dumps(paths, ensure_ascii=False).encode("utf-8")


def check_callback(callback: Any) -> None:
    if not callable(callback):
        raise TypeError(f"callback must be callable (it receives the change), "
                        f"not {type(callback).__name__}")

