"""Sync: apps on an atoll-server, their users, synced realms, subscriptions and sync sessions.

The owning layer and public API over the ``atoll_app_*``, ``atoll_user_*``,
``atoll_realm_open_synced``, ``atoll_realm_async_open``, ``atoll_subscriptions_*`` and
``atoll_sync_session_*`` calls of include/atoll.h (docs/protocol.md, docs/app-api.md)::

    app = atoll.App("default", "http://127.0.0.1:9090", metadata_dir="state")
    user = app.current_user or app.login(atoll.Credentials.anonymous())
    realm = atoll.open_synced(user, "tasks.realm", schema=schema,
                              initial_subscriptions=[("all", "Task", "TRUEPREDICATE")])
    realm.sync_session.wait_for_download()

Ownership: an :class:`App` owns its ``atoll_app_t *``; every :class:`User` owns its
``atoll_user_t *`` and keeps the app's handle alive (the library's users and sessions refer to
their app), so :meth:`App.close` frees the app handle only once no user of it is left. A synced
:class:`~atoll.Realm` keeps its user and owns its ``atoll_sync_session_t *``, freed when the
realm closes. Every ``close()`` is idempotent and also runs from ``weakref.finalize``.

Threads: calls that talk to the server (login, register, log out, delete, the waits, opening
with ``download_before_open``) block the calling thread; ctypes releases the GIL meanwhile, so
other Python threads run. Callbacks (:meth:`App.on_error`, :meth:`SyncSession.observe`) run on
library threads, through the two long-lived trampolines of :mod:`atoll.notifications`, so no
ctypes callback object is ever freed while the library may call it, and an exception raised by
a callback is reported through ``sys.unraisablehook`` instead of reaching C.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import threading
import weakref
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import (Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple,
                    Union)

from . import _ffi, ejson
from .errors import (ERRORS_BY_NAME, AtollError, AuthError, InvalidArgumentError, NotFoundError,
                     SubscriptionExistsError, SyncError, closed_error, last_error,
                     raise_last_error)
from .notifications import NotificationToken, check_callback, register, report_callback_error
from .realm import CONFIG_KEYS, PathLike, Realm, _config, _config_json, _cstr, _json_arg

__all__ = ["App", "User", "UserInfo", "Credentials", "SyncToken", "SyncErrorEvent",
           "CompensatingWrite", "Subscription", "SubscriptionSet", "SubscriptionUpdate",
           "SyncSession", "open_synced", "async_open", "SYNC_MODES", "DOWNLOAD_BEFORE_OPEN",
           "CLIENT_RESET_MODES"]

lib = _ffi.lib

#: mode= values of open_synced().
SYNC_MODES = ("flexible", "partition")
#: download_before_open= values: "never" (open at once), "once" (wait the first time the file
#: is opened), "always" (wait every time).
DOWNLOAD_BEFORE_OPEN = ("never", "once", "always")
#: client_reset_mode= values (the library's names; snake_case spellings are accepted too).
CLIENT_RESET_MODES = ("manual", "discardUnsyncedChanges", "recoverUnsyncedChanges",
                      "recoverOrDiscardUnsyncedChanges")
_CLIENT_RESET_ALIASES = {
    "discard_unsynced_changes": "discardUnsyncedChanges",
    "recover_unsynced_changes": "recoverUnsyncedChanges",
    "recover_or_discard_unsynced_changes": "recoverOrDiscardUnsyncedChanges",
}
_INT_MAX = 2**31 - 1
_UNSET: Any = object()


# MARK: - Argument helpers

def _timeout_ms(timeout: Optional[float], what: str = "timeout") -> int:
    """Seconds (None: as long as it takes) as the ``int timeout_ms`` of the C calls."""
    if timeout is None:
        return _INT_MAX
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"{what} must be a number of seconds or None, not {type(timeout).__name__}")
    if timeout != timeout or timeout < 0:  # NaN or negative
        raise ValueError(f"{what} must be >= 0 seconds, not {timeout!r}")
    return min(_INT_MAX, int(round(timeout * 1000)))


def _positive_ms(timeout: Optional[float], what: str) -> Optional[int]:
    if timeout is None:
        return None
    ms = _timeout_ms(timeout, what)
    if ms < 1:
        raise ValueError(f"{what} must be > 0 seconds, not {timeout!r}")
    return ms


def _loads(ptr: Optional[int], function: str) -> Any:
    text = _ffi.take_string(ptr)
    if text is None:
        raise_last_error(function)
    return ejson.loads(text)  # type: ignore[arg-type]


def _choice(value: Any, choices: Sequence[str], what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be one of {list(choices)}, not {type(value).__name__}")
    if value not in choices:
        raise ValueError(f"{what} must be one of {list(choices)}, not {value!r}")
    return value


# MARK: - Errors the server reports while syncing

@dataclass(frozen=True)
class CompensatingWrite:
    """A write the server refused and undid (with a ``writeRejected`` error): the object's
    class and primary key, and why."""

    class_name: str
    primary_key: Any
    reason: str


@dataclass(frozen=True)
class SyncErrorEvent:
    """A sync error of one of an app's sessions, as :meth:`App.on_error` callbacks receive it.

    * ``code``: the protocol's code (``"writeRejected"``, ``"connectionFailed"``,
      ``"invalidFlexibleSyncSubscriptions"``, ``"clientReset"``...; docs/protocol.md), and
      ``code_number`` its number (231...);
    * ``fatal``: whether the session stopped until ``action`` is taken (``"warning"``,
      ``"retry"``, ``"clientReset"``, ``"applicationBug"``, ``"logOut"``, ``"none"``);
    * ``compensating_writes``: for ``writeRejected``, the writes that were undone;
    * ``path``: the realm file concerned, when one is.
    """

    code: str
    code_number: int
    message: str
    fatal: bool
    action: str
    compensating_writes: Tuple[CompensatingWrite, ...] = ()
    path: Optional[str] = None

    def to_exception(self) -> SyncError:
        """This error as an :class:`atoll.SyncError` (to raise it)."""
        return SyncError(f"{self.code}: {self.message}")


def _decode_error_event(d: Mapping[str, Any]) -> SyncErrorEvent:
    writes = tuple(CompensatingWrite(str(w.get("class", "")), w.get("primaryKey"),
                                     str(w.get("reason", "")))
                   for w in d.get("compensatingWrites") or ())
    path = d.get("path")
    return SyncErrorEvent(code=str(d.get("code", "")), code_number=int(d.get("codeNumber", 0)),
                          message=str(d.get("message", "")), fatal=bool(d.get("fatal", False)),
                          action=str(d.get("action", "")), compensating_writes=writes,
                          path=None if path is None else str(path))


class SyncToken(NotificationToken):
    """Keeps a sync callback registered (:meth:`App.on_error`, :meth:`SyncSession.observe`).

    ``cancel()`` (or ``invalidate()``, the end of its ``with`` block, dropping the last
    reference to it) unregisters the callback; when it returns, the callback is not running on
    another thread and is never called again. Closing the app (or the realm) cancels it too.
    """

    def cancel(self) -> None:
        """Unregisters the callback (idempotent, any thread)."""
        self.invalidate()

    @property
    def cancelled(self) -> bool:
        return self.invalidated

    def __enter__(self) -> "SyncToken":
        return self

    def __repr__(self) -> str:
        return f"<atoll.SyncToken {self._description}{' cancelled' if self.cancelled else ''}>"


# MARK: - Credentials

class Credentials:
    """How a user logs in (:meth:`App.login`)::

        atoll.Credentials.anonymous()                      # a new user at each login
        atoll.Credentials.email_password("a@b.co", "secret")
        atoll.Credentials.api_key(key)
        atoll.Credentials.jwt(token)                       # a custom JWT
    """

    __slots__ = ("provider", "_payload")

    def __init__(self, provider: str, **payload: str) -> None:
        #: the library's provider name: anonymous, emailPassword, apiKey, jwt
        self.provider: str = provider
        self._payload: Dict[str, str] = payload

    @classmethod
    def anonymous(cls) -> "Credentials":
        return cls("anonymous")

    @classmethod
    def email_password(cls, email: str, password: str) -> "Credentials":
        return cls("emailPassword", email=_str(email, "email"), password=_str(password, "password"))

    @classmethod
    def api_key(cls, key: str) -> "Credentials":
        return cls("apiKey", key=_str(key, "key"))

    @classmethod
    def jwt(cls, token: str) -> "Credentials":
        return cls("jwt", token=_str(token, "token"))

    def _json(self) -> bytes:
        return json.dumps({"provider": self.provider, **self._payload}).encode("utf-8")

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Credentials) and self.provider == other.provider
                and self._payload == other._payload)

    def __hash__(self) -> int:
        return hash((self.provider, tuple(sorted(self._payload.items()))))

    def __repr__(self) -> str:  # never shows secrets
        shown = {"email": self._payload["email"]} if "email" in self._payload else {}
        inner = "".join(f", {k}={v!r}" for k, v in shown.items())
        return f"<atoll.Credentials {self.provider}{inner}>"


def _str(value: Any, what: str) -> str:
    _cstr(value, what)  # type and NUL checks
    return value


# MARK: - Apps

def _free_app(handle: Any) -> None:
    lib.atoll_app_free(handle)


def _free_user(handle: Any) -> None:
    lib.atoll_user_free(handle)


def _free_session(handle: Any) -> None:
    lib.atoll_sync_session_free(handle)


class _AppHandle:
    """The ``atoll_app_t *`` of an :class:`App`, freed when the last of the app and its users
    lets go of it (the library's users, sessions and connections refer to their app)."""

    __slots__ = ("handle", "_finalizer", "__weakref__")

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self._finalizer = weakref.finalize(self, _free_app, handle)


@dataclass(frozen=True)
class UserInfo:
    """A user of an app's metadata file, as :attr:`App.all_users` lists them (not a handle:
    log in, or use :attr:`App.current_user`, to act as the user)."""

    id: str
    state: str
    provider: str
    profile: Dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


class App:
    """An app on an atoll-server: its users, kept logged in across runs in a metadata file
    (``atoll-users-<app id>.realm`` in ``metadata_dir``), and the errors of its sessions::

        app = atoll.App("default", "http://127.0.0.1:9090", metadata_dir="state")
        user = app.login(atoll.Credentials.anonymous())

    ``base_url`` defaults to the library's (``http://127.0.0.1:9090``); ``request_timeout``
    (seconds, for one app API request; the library's default is 60) and ``connect_timeout``
    (connecting the sync WebSocket; default 10). InvalidArgumentError for an app id that is not
    letters, digits, ``-`` and ``_``, or a URL that is not http(s); FileError when the metadata
    directory cannot be made.
    """

    def __init__(self, app_id: str, base_url: Optional[str] = None, metadata_dir: PathLike = ".",
                 request_timeout: Optional[float] = None,
                 connect_timeout: Optional[float] = None) -> None:
        self._owner: Optional[_AppHandle] = None
        config: Dict[str, Any] = {"appId": _str(app_id, "app_id")}
        if base_url is not None:
            config["baseUrl"] = _str(base_url, "base_url")
        if not isinstance(metadata_dir, (str, os.PathLike)):
            raise TypeError(f"metadata_dir must be a str or os.PathLike, "
                            f"not {type(metadata_dir).__name__}")
        config["metadataDir"] = _str(os.fspath(metadata_dir), "metadata_dir")
        for key, value, what in (("requestTimeoutMs", request_timeout, "request_timeout"),
                                 ("connectTimeoutMs", connect_timeout, "connect_timeout")):
            ms = _positive_ms(value, what)
            if ms is not None:
                config[key] = ms
        handle = lib.atoll_app_new(json.dumps(config).encode("utf-8"))
        if not handle:
            raise_last_error("atoll_app_new")
        self.app_id: str = app_id
        self.base_url: Optional[str] = base_url
        self.metadata_dir: str = config["metadataDir"]
        self._owner = _AppHandle(handle)
        self._lock = threading.Lock()
        self._tokens: "weakref.WeakSet[SyncToken]" = weakref.WeakSet()

    # MARK: Lifetime

    def close(self) -> None:
        """Closes the app (idempotent): cancels its :meth:`on_error` registrations; the app
        raises ClosedError from then on. Users and realms opened through it stay usable (the
        library's handle is freed when the last of them is)."""
        with self._lock:
            owner, self._owner = self._owner, None
            tokens = list(self._tokens)
            self._tokens.clear()
        for t in tokens:
            t.invalidate()
        del owner  # freed now, unless a User still holds it

    @property
    def closed(self) -> bool:
        return self._owner is None

    def __enter__(self) -> "App":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        where = self.base_url or "default URL"
        return f"<atoll.App {self.app_id!r} {where}{' closed' if self.closed else ''}>"

    def _owner_handle(self) -> _AppHandle:
        owner = self._owner
        if owner is None:
            raise closed_error("app")
        return owner

    def _h(self) -> Any:
        return self._owner_handle().handle

    def _app_key(self) -> Tuple[str, str]:
        """What makes two App objects the same app for their users: the app id and the
        metadata file (``atoll-users-<app id>.realm`` in ``metadata_dir``)."""
        return (self.app_id, os.path.abspath(self.metadata_dir))

    # MARK: Users

    def login(self, credentials: Credentials) -> "User":
        """Logs a user in (blocks until the server answers); the user becomes the current one.

        AuthError when the server refuses (wrong password, unknown key: the message has the
        server's reason), NetworkError when it cannot be reached, SyncTimeoutError."""
        if not isinstance(credentials, Credentials):
            raise TypeError(f"credentials must be atoll.Credentials, "
                            f"not {type(credentials).__name__}")
        owner = self._owner_handle()
        handle = lib.atoll_app_login(owner.handle, credentials._json())
        if not handle:
            raise_last_error("atoll_app_login")
        return User(self, owner, handle)

    def register_email(self, email: str, password: str) -> None:
        """Registers an email/password user (blocks); log in with it afterwards. AuthError
        when the email is taken (HTTP 409) or refused (a malformed email, a password not 6 to
        128 characters), NetworkError, SyncTimeoutError."""
        e, p = _cstr(email, "email"), _cstr(password, "password")
        if not lib.atoll_app_register_email(self._h(), e, p):
            raise_last_error("atoll_app_register_email")

    @property
    def current_user(self) -> Optional["User"]:
        """The current user (the last logged in or switched to, if still logged in; else
        another logged-in user), or None when nobody is logged in."""
        owner = self._owner_handle()
        handle = lib.atoll_app_current_user(owner.handle)
        if not handle:
            failed, _code, _message = _ffi.last_error()
            if failed:
                raise_last_error("atoll_app_current_user")
            return None
        return User(self, owner, handle)

    @property
    def all_users(self) -> List[UserInfo]:
        """Every user of the metadata file, logged in or out, most recently used first."""
        users = _loads(lib.atoll_app_all_users(self._h()), "atoll_app_all_users")
        return [UserInfo(str(u.get("id", "")), str(u.get("state", "")),
                         str(u.get("provider", "")), dict(u.get("profile") or {}))
                for u in users]

    def switch_user(self, user: "User") -> None:
        """Makes a logged-in user the current one (AuthError when it is logged out)."""
        if not isinstance(user, User):
            raise TypeError(f"user must be an atoll.User, not {type(user).__name__}")
        if not lib.atoll_app_switch_user(self._h(), user._h()):
            raise_last_error("atoll_app_switch_user")

    # MARK: Errors

    def on_error(self, callback: Callable[[SyncErrorEvent], Any]) -> SyncToken:
        """Calls ``callback(event)`` with a :class:`SyncErrorEvent` for every sync error of
        this app's sessions (a write the server rejected, a refused subscription, a lost
        connection, a client reset...). It runs on a library thread; an exception it raises is
        reported through ``sys.unraisablehook``. Keep the returned :class:`SyncToken`:
        ``token.cancel()`` (or leaving ``with app.on_error(cb):``, or dropping it) stops it::

            def on_error(e):
                if e.code == "writeRejected":
                    print([(w.class_name, w.primary_key) for w in e.compensating_writes])

            token = app.on_error(on_error)
        """
        check_callback(callback)
        handle, registration = register(lib.atoll_app_observe_errors, (self._h(),), callback,
                                        _decode_error_event)
        if not handle:
            raise_last_error("atoll_app_observe_errors")
        token = SyncToken(handle, registration, self, f"on errors of app {self.app_id!r}")
        with self._lock:
            if self._owner is not None:
                self._tokens.add(token)
                return token
        token.invalidate()
        raise closed_error("app")


# MARK: - Users

class User:
    """A user of an :class:`App` (from :meth:`App.login` or :attr:`App.current_user`).

    ``id``, and the current ``state`` (``"loggedIn"``, ``"loggedOut"``, ``"removed"``),
    ``provider`` and ``profile`` (the server's: ``identities``, ``data``...). Two User
    objects with the same id, app id and metadata directory are equal. :meth:`close` frees this handle only: the user stays
    logged in.
    """

    def __init__(self, app: App, owner: _AppHandle, handle: Any) -> None:
        self._handle: Any = handle
        self._finalizer = weakref.finalize(self, _free_user, handle)
        #: the app the user belongs to
        self.app: App = app
        self._app_handle = owner          # the library's user refers to its app
        self.id: str = str(self._json()["id"])

    def _h(self) -> Any:
        handle = self._handle
        if handle is None:
            raise closed_error("user")
        return handle

    def _json(self) -> Dict[str, Any]:
        return _loads(lib.atoll_user_json(self._h()), "atoll_user_json")

    def close(self) -> None:
        """Frees this handle (idempotent); the user stays logged in."""
        self._handle = None
        self._finalizer()

    @property
    def closed(self) -> bool:
        return self._handle is None

    def __enter__(self) -> "User":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def state(self) -> str:
        """``"loggedIn"``, ``"loggedOut"`` or ``"removed"``."""
        return str(self._json().get("state", ""))

    @property
    def logged_in(self) -> bool:
        return self.state == "loggedIn"

    @property
    def provider(self) -> str:
        """The provider of the last login: ``"anon-user"``, ``"local-userpass"``,
        ``"api-key"``, ``"custom-token"``."""
        return str(self._json().get("provider", ""))

    @property
    def profile(self) -> Dict[str, Any]:
        """The server's profile of the user (``identities``, ``data``, ...)."""
        return dict(self._json().get("profile") or {})

    def log_out(self) -> None:
        """Logs the user out: its refresh token is revoked on the server (best effort; works
        offline) and its sync sessions stop. Blocks."""
        if not lib.atoll_user_logout(self._h()):
            raise_last_error("atoll_user_logout")

    def remove(self) -> None:
        """Logs the user out and removes it from the app's metadata file. Blocks."""
        if not lib.atoll_user_remove(self._h()):
            raise_last_error("atoll_user_remove")

    def delete(self) -> None:
        """Deletes the user on the server (identities, keys, tokens), then removes it here.
        Blocks. AuthError, NetworkError, SyncTimeoutError."""
        if not lib.atoll_user_delete(self._h()):
            raise_last_error("atoll_user_delete")

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, User) and self.id == other.id
                and self.app._app_key() == other.app._app_key())

    def __hash__(self) -> int:
        return hash((self.id, self.app._app_key()))

    def __repr__(self) -> str:
        return f"<atoll.User {self.id} of {self.app.app_id!r}{' closed' if self.closed else ''}>"


# MARK: - Synced realms

class _SyncedRealmState:
    """What a synced :class:`~atoll.Realm` holds beside its handle: its user (which keeps the
    app alive) and its ``atoll_sync_session_t *``, made on first use, freed with the realm."""

    def __init__(self, user: User, mode: str) -> None:
        self.user = user
        self.mode = mode
        self._lock = threading.Lock()
        self._session: Any = None
        self._finalizer: Any = None
        self._closed = False

    def session(self, realm: Realm) -> "SyncSession":
        with self._lock:
            if self._closed:
                raise closed_error("realm")
            if self._session is None:
                handle = lib.atoll_realm_sync_session(realm._h())
                if not handle:
                    raise_last_error("atoll_realm_sync_session")
                self._session = handle
                self._finalizer = weakref.finalize(self, _free_session, handle)
        return SyncSession(realm, self)

    def session_handle(self) -> Any:
        handle = self._session
        if handle is None or self._closed:
            raise closed_error("realm")
        return handle

    def close(self) -> None:
        with self._lock:
            self._closed = True
            finalizer, self._finalizer = self._finalizer, None
            self._session = None
        if finalizer is not None:
            finalizer()


def _subscription_json(item: Any, what: str) -> Dict[str, Any]:
    """A subscription given to open_synced: a :class:`Subscription`, a mapping with
    name / class (or class_name) / query / args, or a tuple (name, class_name, query, *args)."""
    if isinstance(item, Subscription):
        name, cls, query, args = item.name, item.class_name, item.query, list(item.args)
    elif isinstance(item, Mapping):
        unknown = set(item) - {"name", "class", "class_name", "query", "args"}
        if unknown:
            raise TypeError(f"{what}: unknown keys {sorted(unknown)} (name, class_name, query, "
                            "args)")
        name = item.get("name")
        cls = item.get("class_name", item.get("class"))
        query = item.get("query", "TRUEPREDICATE")
        args = list(item.get("args") or ())
    elif isinstance(item, (tuple, list)) and len(item) >= 2:
        name, cls = item[0], item[1]
        query = item[2] if len(item) > 2 else "TRUEPREDICATE"
        args = list(item[3:])
    else:
        raise TypeError(f"{what} must be an atoll.Subscription, a mapping or a tuple "
                        f"(name, class_name, query, *args), not {type(item).__name__}")
    if name is not None:
        _cstr(name, f"{what} name")
    _cstr(cls, f"{what} class_name")
    _cstr(query, f"{what} query")
    return {"name": name or "", "class": cls, "query": query, "args": args}


def _sync_json(mode: str = "flexible", partition_value: Any = _UNSET,
               initial_subscriptions: Any = (), rerun_on_open: bool = False,
               download_before_open: str = "never", timeout: Optional[float] = 30.0,
               offline_fallback: bool = False,
               client_reset_mode: Optional[str] = None) -> Dict[str, Any]:
    """The configuration's ``"sync"`` object for open_synced()'s keyword arguments."""
    sync: Dict[str, Any] = {"mode": _choice(mode, SYNC_MODES, "mode")}
    if mode == "partition":
        if partition_value is _UNSET:
            raise TypeError("partition sync needs a partition_value (None is a valid value: "
                            "pass it explicitly)")
        sync["partitionValue"] = partition_value
    elif partition_value is not _UNSET:
        raise TypeError("partition_value is for mode='partition'")
    if isinstance(initial_subscriptions, (str, bytes, Mapping)):
        raise TypeError("initial_subscriptions must be a list of subscriptions")
    subs = [_subscription_json(s, f"initial_subscriptions[{i}]")
            for i, s in enumerate(initial_subscriptions or ())]
    if subs:
        if mode != "flexible":
            raise TypeError("initial_subscriptions are for mode='flexible'")
        sync["initialSubscriptions"] = subs
    for name, flag in (("rerun_on_open", rerun_on_open), ("offline_fallback", offline_fallback)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be a bool, not {type(flag).__name__}")
    sync["rerunOnOpen"] = rerun_on_open
    sync["downloadBeforeOpen"] = _choice(download_before_open, DOWNLOAD_BEFORE_OPEN,
                                         "download_before_open")
    sync["timeoutMs"] = _timeout_ms(timeout)
    sync["offlineFallback"] = offline_fallback
    if client_reset_mode is not None:
        mode_name = _CLIENT_RESET_ALIASES.get(client_reset_mode, client_reset_mode) \
            if isinstance(client_reset_mode, str) else client_reset_mode
        sync["clientResetMode"] = _choice(mode_name, CLIENT_RESET_MODES, "client_reset_mode")
    return sync


def _synced_config(path: Any, schema: Any, schema_version: int, write_timeout_ms: int,
                   notifications: str, sync_options: Dict[str, Any]
                   ) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """(the store's configuration, the "sync" object)."""
    if path is None:
        raise TypeError("a synced realm needs a path")
    config = _config(dict(path=path, schema=schema, schema_version=schema_version,
                          write_timeout_ms=write_timeout_ms, notifications=notifications))
    return config, _sync_json(**sync_options)


def _check_user(user: Any) -> User:
    if not isinstance(user, User):
        raise TypeError(f"user must be an atoll.User, not {type(user).__name__}")
    return user


def open_synced(
    user: User,
    path: Optional[PathLike] = None,
    *,
    schema: Optional[Sequence[Mapping[str, Any]]] = None,
    schema_version: int = 0,
    mode: str = "flexible",
    partition_value: Any = _UNSET,
    initial_subscriptions: Sequence[Any] = (),
    rerun_on_open: bool = False,
    download_before_open: str = "never",
    timeout: Optional[float] = 30.0,
    offline_fallback: bool = False,
    client_reset_mode: Optional[str] = None,
    write_timeout_ms: int = -1,
    notifications: str = "thread",
) -> Realm:
    """Opens a synced realm for ``user``: an ordinary :class:`~atoll.Realm` whose file is
    kept in sync with the server, plus :attr:`Realm.subscriptions <atoll.Realm.subscriptions>`
    and :attr:`Realm.sync_session <atoll.Realm.sync_session>`::

        realm = atoll.open_synced(user, "tasks.realm", schema=schema,
                                  initial_subscriptions=[("mine", "Task", "owner_id == $0",
                                                          user.id)])

    * ``mode``: ``"flexible"`` (the realm holds what its subscriptions select) or
      ``"partition"`` (every object whose partition key equals ``partition_value``, any JSON
      value; None is a value, so it must be given explicitly).
    * ``initial_subscriptions`` (flexible): made when the file has none yet (and at every open
      with ``rerun_on_open=True``); each an :class:`Subscription`, a mapping
      ``{"name", "class_name", "query", "args"}`` or a tuple ``(name, class_name, query,
      *args)``.
    * ``download_before_open``: ``"never"`` opens at once; ``"once"`` waits for the server's
      data the first time the file is opened; ``"always"`` every time. It waits up to
      ``timeout`` seconds (None: as long as it takes), then raises SyncTimeoutError -- unless
      ``offline_fallback=True``, which opens what is on the device instead when the server
      cannot be reached in time.
    * ``client_reset_mode``: ``"manual"``, ``"discardUnsyncedChanges"``,
      ``"recoverUnsyncedChanges"`` (the library's default) or
      ``"recoverOrDiscardUnsyncedChanges"`` (snake_case spellings work too).
    * ``schema``, ``schema_version``, ``write_timeout_ms``, ``notifications``: as for
      :func:`atoll.open`.

    Raises SyncTimeoutError, NetworkError, AuthError (the user is logged out), SyncError, and
    the errors of :func:`atoll.open`.
    """
    user = _check_user(user)
    config, sync = _synced_config(path, schema, schema_version, write_timeout_ms, notifications,
                                  dict(mode=mode, partition_value=partition_value,
                                       initial_subscriptions=initial_subscriptions,
                                       rerun_on_open=rerun_on_open,
                                       download_before_open=download_before_open,
                                       timeout=timeout, offline_fallback=offline_fallback,
                                       client_reset_mode=client_reset_mode))
    text = _json_arg({**config, "sync": sync})
    handle = lib.atoll_realm_open_synced(user._h(), text)
    if not handle:
        raise_last_error("atoll_realm_open_synced")
    return Realm._from_handle(handle, config, _SyncedRealmState(user, mode))


class _AsyncOpen:
    """What the library thread's callback and the awaiting coroutine of :func:`async_open`
    share. Everything but :meth:`on_event` runs on the event loop's thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop, future: "asyncio.Future[Realm]",
                 on_progress: Optional[Callable[[int, int, float], Any]],
                 config: Dict[str, Any], state: _SyncedRealmState) -> None:
        self.loop = loop
        self.future = future
        self.on_progress = on_progress
        self.config = config
        self.state = state
        self.task: Any = None            # the atoll_async_open_t *, None once freed

    def on_event(self, event: Mapping[str, Any]) -> None:
        """The registration's callback, on a library thread: hands the event to the loop."""
        try:
            self.loop.call_soon_threadsafe(self._handle, dict(event))
        except RuntimeError:
            pass  # the loop is closed: nobody awaits any more (the task is freed with it)

    def _handle(self, event: Dict[str, Any]) -> None:
        if self.future.done():
            return
        state = event.get("state")
        if state == "progress":
            if self.on_progress is not None:
                try:
                    self.on_progress(int(event.get("transferred", 0)),
                                     int(event.get("transferable", 0)),
                                     float(event.get("estimate", 0.0)))
                except Exception as e:  # noqa: BLE001 -- a progress callback does not fail the open
                    report_callback_error(e, self.on_progress,
                                          "Exception ignored in atoll async_open on_progress")
        elif state == "open":
            if self.task is None:
                return
            handle = lib.atoll_async_open_take_realm(self.task)
            if not handle:
                self.future.set_exception(last_error("atoll_async_open_take_realm"))
                return
            self.future.set_result(Realm._from_handle(handle, self.config, self.state))
        elif state == "error":
            cls = ERRORS_BY_NAME.get(str(event.get("status", "")), SyncError)
            message = str(event.get("message", "the async open failed"))
            code = event.get("code")
            if code and not message.startswith(f"{code}:"):
                message = f"{code}: {message}"
            self.future.set_exception(cls(message))
        elif state == "waitingForUser":
            # The library's task ends here: it does not wait for a later login.
            self.future.set_exception(AuthError(
                f"user {self.state.user.id} is logged out: log in again, then open"))

    def free(self) -> None:
        task, self.task = self.task, None
        if task is not None:
            lib.atoll_async_open_free(task)   # cancels an open under way


async def async_open(
    user: User,
    path: Optional[PathLike] = None,
    *,
    on_progress: Optional[Callable[[int, int, float], Any]] = None,
    schema: Optional[Sequence[Mapping[str, Any]]] = None,
    schema_version: int = 0,
    mode: str = "flexible",
    partition_value: Any = _UNSET,
    initial_subscriptions: Sequence[Any] = (),
    rerun_on_open: bool = False,
    timeout: Optional[float] = 30.0,
    offline_fallback: bool = False,
    client_reset_mode: Optional[str] = None,
    write_timeout_ms: int = -1,
    notifications: str = "thread",
) -> Realm:
    """Opens a synced realm in the background, downloading the server's data first (Realm's
    AsyncOpen; with ``offline_fallback=True``, AutoOpen: when the server cannot be reached in
    ``timeout`` seconds the data on the device opens instead)::

        realm = await atoll.async_open(user, "tasks.realm", schema=schema,
                                       on_progress=lambda done, total, estimate: ...)

    ``on_progress(transferred, transferable, estimate)`` is called on the event loop's thread
    while the download goes on (``estimate`` from 0.0 to 1.0); an exception it raises is
    reported through ``sys.unraisablehook`` and does not stop the open. The other arguments are
    :func:`open_synced`'s. Cancelling the awaiting task cancels the open (the library's task is
    freed). Raises what :func:`open_synced` raises; AuthError for a logged-out user.
    """
    user = _check_user(user)
    if on_progress is not None and not callable(on_progress):
        raise TypeError(f"on_progress must be callable, not {type(on_progress).__name__}")
    loop = asyncio.get_running_loop()
    config, sync = _synced_config(path, schema, schema_version, write_timeout_ms, notifications,
                                  dict(mode=mode, partition_value=partition_value,
                                       initial_subscriptions=initial_subscriptions,
                                       rerun_on_open=rerun_on_open, timeout=timeout,
                                       offline_fallback=offline_fallback,
                                       client_reset_mode=client_reset_mode))
    future: "asyncio.Future[Realm]" = loop.create_future()
    opening = _AsyncOpen(loop, future, on_progress, config, _SyncedRealmState(user, mode))
    handle, _registration = register(lib.atoll_realm_async_open,
                                     (user._h(), _json_arg({**config, "sync": sync})),
                                     opening.on_event, dict)
    if not handle:
        raise_last_error("atoll_realm_async_open")
    opening.task = handle   # events reach the loop only once this coroutine awaits
    try:
        return await future
    except asyncio.CancelledError:
        if future.done() and not future.cancelled() and future.exception() is None:
            future.result().close()   # opened, but nobody will take it
        raise
    finally:
        opening.free()


def write_copy_synced(realm: Realm, config: Union[PathLike, Mapping[str, Any]],
                      user: Optional[User] = None, **sync_options: Any) -> None:
    """:meth:`Realm.write_copy_synced <atoll.Realm.write_copy_synced>` (see there)."""
    if user is None:
        if sync_options:
            raise TypeError(f"sync options {sorted(sync_options)} need a user (a copy without "
                            "one is a local realm)")
        if not lib.atoll_realm_write_copy_synced(realm._h(), _config_json(config), None):
            raise_last_error("atoll_realm_write_copy_synced")
        return
    user = _check_user(user)
    if isinstance(config, (str, os.PathLike)):
        config = {"path": config}
    if not isinstance(config, Mapping):
        raise TypeError("config must be a path or a mapping of open()'s keyword arguments, "
                        f"not {type(config).__name__}")
    unknown = sorted(str(k) for k in config if k not in CONFIG_KEYS)
    if unknown:
        raise TypeError(f"unknown configuration keys {unknown}; a configuration takes "
                        f"{', '.join(CONFIG_KEYS)} (sync options are keyword arguments)")
    store = _config(config)
    text = _json_arg({**store, "sync": _sync_json(**sync_options)})
    if not lib.atoll_realm_write_copy_synced(realm._h(), text, user._h()):
        raise_last_error("atoll_realm_write_copy_synced")


# MARK: - Subscriptions

@dataclass(frozen=True)
class Subscription:
    """One query of a flexible-sync realm's subscription set: the objects of ``class_name``
    that match ``query`` (RQL, ``$0``... bound to ``args``) are synced. ``name`` is None for
    an unnamed subscription."""

    name: Optional[str]
    class_name: str
    query: str = "TRUEPREDICATE"
    args: Tuple[Any, ...] = ()

    def _wire(self) -> Dict[str, Any]:
        return {"name": self.name or "", "class": self.class_name, "query": self.query,
                "args": list(self.args)}


def _subscription_from(d: Mapping[str, Any]) -> Subscription:
    return Subscription(name=str(d.get("name") or "") or None, class_name=str(d.get("class", "")),
                        query=str(d.get("query", "TRUEPREDICATE")),
                        args=tuple(d.get("args") or ()))


class SubscriptionSet:
    """The subscription set of a flexible-sync realm (``realm.subscriptions``), read afresh
    at each access: its ``version``, ``state`` (``"pending"``, ``"bootstrapping"``,
    ``"complete"``, ``"error"``, ``"superseded"``), ``error`` (the server's reason, or None),
    and its :class:`Subscription` objects (iterate, ``len``, :meth:`find`).

    Change it with :meth:`update`; wait for the server with :meth:`wait`.
    """

    def __init__(self, realm: Realm, state: _SyncedRealmState) -> None:
        self._realm = realm
        self._state = state

    def _read(self) -> Dict[str, Any]:
        return _loads(lib.atoll_subscriptions_json(self._realm._h()), "atoll_subscriptions_json")

    @property
    def version(self) -> int:
        """The newest version (each update makes one; 0 before any)."""
        return int(self._read().get("version", 0))

    @property
    def state(self) -> str:
        """The newest version's state: ``"pending"`` (sent, not answered), ``"bootstrapping"``
        (its objects are arriving), ``"complete"`` (they are in the realm), ``"error"`` (the
        server refused it: see :attr:`error`), ``"superseded"``."""
        return str(self._read().get("state", ""))

    @property
    def error(self) -> Optional[str]:
        """The server's reason for refusing the newest version, or None."""
        e = self._read().get("error")
        return None if e is None else str(e)

    def _subscriptions(self) -> List[Subscription]:
        return [_subscription_from(d) for d in self._read().get("subscriptions") or ()]

    def __iter__(self) -> Iterator[Subscription]:
        return iter(self._subscriptions())

    def __len__(self) -> int:
        return len(self._read().get("subscriptions") or ())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.find(name) is not None

    def find(self, name: str) -> Optional[Subscription]:
        """The subscription with that name, or None."""
        _cstr(name, "name")
        return next((s for s in self._subscriptions() if s.name == name), None)

    @contextmanager
    def update(self) -> Iterator["SubscriptionUpdate"]:
        """Changes the subscriptions in one batch, sent when the block ends::

            with realm.subscriptions.update() as subs:
                subs.add("urgent", "Task", "priority > $0", 5)
                subs.remove("old")
            realm.subscriptions.wait(subs.version)

        The block's calls apply in order to a copy of the set; at its end one
        ``atoll_subscriptions_update`` makes the new version (``subs.version``) and sends it to
        the server. When the block raises, nothing is sent. ``add`` raises
        SubscriptionExistsError for a name in use, ``update`` NotFoundError for a name not
        in use, right away.
        """
        batch = SubscriptionUpdate(self._subscriptions())
        yield batch
        batch._commit(self._realm)

    def wait(self, version: Optional[int] = None, timeout: Optional[float] = 30.0) -> int:
        """Waits until a version (None: the newest) is complete: its objects are in the realm
        (refresh a realm handle to read them). Blocks; returns the version waited for.

        SubscriptionError when the server refused it (the message has its reason; the
        previous version stays in force), SyncTimeoutError after ``timeout`` seconds (None:
        as long as it takes)."""
        if version is None:
            version = self.version
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise TypeError(f"version must be an int >= 0 or None, not {version!r}")
        ms = _timeout_ms(timeout)
        if not lib.atoll_subscriptions_wait(self._realm._h(), version, ms):
            raise_last_error("atoll_subscriptions_wait")
        return version

    def __repr__(self) -> str:
        try:
            d = self._read()
        except AtollError as e:
            return f"<atoll.SubscriptionSet ({e.message})>"
        names = [s.get("name") or "(unnamed)" for s in d.get("subscriptions") or ()]
        return f"<atoll.SubscriptionSet v{d.get('version')} {d.get('state')} {names}>"


class SubscriptionUpdate:
    """What ``with realm.subscriptions.update() as subs:`` gives: the set being changed.

    Iterate it (or :meth:`find`) to see the set as the block's calls left it. After the block,
    :attr:`version` is the new version.
    """

    def __init__(self, current: List[Subscription]) -> None:
        self._initial = list(current)
        self._subs = list(current)
        #: the version the update made (None until the block ended)
        self.version: Optional[int] = None

    def _open(self) -> None:
        if self.version is not None:
            raise InvalidArgumentError("this subscription update was sent already: start a new "
                                       "one with realm.subscriptions.update()",
                                       _ffi.ATOLL_ERR_INVALID_ARGUMENT)

    def __iter__(self) -> Iterator[Subscription]:
        return iter(list(self._subs))

    def __len__(self) -> int:
        return len(self._subs)

    def find(self, name: str) -> Optional[Subscription]:
        return next((s for s in self._subs if s.name == name), None)

    def add(self, name: Optional[str], class_name: str, query: str = "TRUEPREDICATE",
            *args: Any) -> Subscription:
        """Subscribes to the objects of ``class_name`` matching ``query`` (``$0``... bound to
        ``args``). ``name`` None makes an unnamed subscription (adding an identical unnamed one
        again changes nothing). SubscriptionExistsError when the name is in use."""
        self._open()
        sub = Subscription(name or None, _str(class_name, "class_name"), _str(query, "query"),
                           tuple(args))
        if name is not None:
            _cstr(name, "name")
        if sub.name is not None and self.find(sub.name) is not None:
            raise SubscriptionExistsError(
                f"a subscription named '{sub.name}' exists already (update it instead)")
        if sub.name is None and sub in self._subs:
            return sub
        self._subs.append(sub)
        return sub

    def update(self, name: str, query: str, *args: Any) -> Subscription:
        """Changes the query (and arguments) of the subscription named ``name``
        (NotFoundError when there is none)."""
        self._open()
        _cstr(name, "name")
        for i, s in enumerate(self._subs):
            if s.name == name:
                new = Subscription(name, s.class_name, _str(query, "query"), tuple(args))
                self._subs[i] = new
                return new
        raise NotFoundError(f"no subscription named '{name}' to update")

    def remove(self, name: str) -> bool:
        """Removes the subscription named ``name``; returns whether there was one."""
        self._open()
        _cstr(name, "name")
        before = len(self._subs)
        self._subs = [s for s in self._subs if s.name != name]
        return len(self._subs) != before

    def remove_class(self, class_name: str) -> int:
        """Removes every subscription to ``class_name``; returns how many."""
        self._open()
        _cstr(class_name, "class_name")
        before = len(self._subs)
        self._subs = [s for s in self._subs if s.class_name != class_name]
        return before - len(self._subs)

    def remove_all(self) -> int:
        """Removes every subscription; returns how many."""
        self._open()
        count = len(self._subs)
        self._subs = []
        return count

    def _batch(self) -> Dict[str, Any]:
        """The library's batch (removals, then updates, then adds) that turns the initial set
        into the block's result."""
        init_named = {s.name: s for s in self._initial if s.name is not None}
        final_named = {s.name: s for s in self._subs if s.name is not None}
        init_unnamed = [s for s in self._initial if s.name is None]
        final_unnamed = [s for s in self._subs if s.name is None]
        if final_unnamed[:len(init_unnamed)] != init_unnamed:
            # An unnamed subscription went: the library removes by name, so start afresh.
            return {"removeAll": True, "add": [s._wire() for s in self._subs]}
        remove, update, add = [], [], []
        for name, old in init_named.items():
            new = final_named.get(name)
            if new is None or new.class_name != old.class_name:
                remove.append(name)
            elif new != old:
                update.append({"name": name, "query": new.query, "args": list(new.args)})
        for s in self._subs:
            if s.name is None:
                continue
            old = init_named.get(s.name)
            if old is None or old.class_name != s.class_name:
                add.append(s._wire())
        add.extend(s._wire() for s in final_unnamed[len(init_unnamed):])
        return {"remove": remove, "update": update, "add": add}

    def _commit(self, realm: Realm) -> None:
        self._open()
        out = ctypes.c_uint64(0)
        if not lib.atoll_subscriptions_update(realm._h(), _json_arg(self._batch()),
                                              ctypes.byref(out)):
            raise_last_error("atoll_subscriptions_update")
        self.version = int(out.value)

    def __repr__(self) -> str:
        names = [s.name or "(unnamed)" for s in self._subs]
        sent = f" -> v{self.version}" if self.version is not None else ""
        return f"<atoll.SubscriptionUpdate {names}{sent}>"


# MARK: - Sync sessions

class SyncSession:
    """The sync of one synced realm (``realm.sync_session``): its state, pause / resume /
    reconnect, the waits for upload and download, and its events. Valid while the realm is
    open (ClosedError afterwards)."""

    def __init__(self, realm: Realm, state: _SyncedRealmState) -> None:
        self._realm = realm
        self._state = state

    def _h(self) -> Any:
        if self._realm.closed:
            raise closed_error("realm")
        return self._state.session_handle()

    def _info(self) -> Dict[str, Any]:
        return _loads(lib.atoll_sync_session_state_json(self._h()),
                      "atoll_sync_session_state_json")

    @property
    def state(self) -> str:
        """``"active"``, ``"paused"`` or ``"inactive"`` (stopped: a fatal error, or the user
        logged out)."""
        return str(self._info().get("state", ""))

    @property
    def connection_state(self) -> str:
        """``"disconnected"``, ``"connecting"`` or ``"connected"``."""
        return str(self._info().get("connection", ""))

    @property
    def path(self) -> str:
        """The realm file (absolute)."""
        return str(self._info().get("path", ""))

    @property
    def user(self) -> User:
        return self._state.user

    def pause(self) -> None:
        """Stops talking to the server; local writes go on and wait to be uploaded."""
        if not lib.atoll_sync_session_pause(self._h()):
            raise_last_error("atoll_sync_session_pause")

    def resume(self) -> None:
        """Syncs again after :meth:`pause` (what was written meanwhile is uploaded)."""
        if not lib.atoll_sync_session_resume(self._h()):
            raise_last_error("atoll_sync_session_resume")

    def reconnect(self) -> None:
        """Drops the connection and connects again at once (skipping any backoff)."""
        if not lib.atoll_sync_session_reconnect(self._h()):
            raise_last_error("atoll_sync_session_reconnect")

    def wait_for_upload(self, timeout: Optional[float] = 30.0) -> None:
        """Waits until every local change committed before the call is on the server.
        Blocks. SyncTimeoutError after ``timeout`` seconds (None: as long as it takes); the
        session's error when it stopped (AuthError, SyncError...)."""
        if not lib.atoll_sync_session_wait_for_upload(self._h(), _timeout_ms(timeout)):
            raise_last_error("atoll_sync_session_wait_for_upload")

    def wait_for_download(self, timeout: Optional[float] = 30.0) -> None:
        """Waits until everything the server had when the call was made is in the file.
        Blocks. A realm handle reads it after :meth:`Realm.refresh <atoll.Realm.refresh>` (or
        a notification). Errors as for :meth:`wait_for_upload`."""
        if not lib.atoll_sync_session_wait_for_download(self._h(), _timeout_ms(timeout)):
            raise_last_error("atoll_sync_session_wait_for_download")

    def observe(self, callback: Callable[[Dict[str, Any]], Any]) -> SyncToken:
        """Calls ``callback(event)`` with the session's events, dicts as the library gives
        them: ``{"event": "state", "state"}``, ``{"event": "connection", "connection"}`` and
        ``{"event": "progress", "direction": "upload" | "download", "transferred",
        "transferable", "estimate"}``. It runs on a library thread; keep the returned
        :class:`SyncToken` (``cancel()`` stops it, so does closing the realm)."""
        check_callback(callback)
        handle, registration = register(lib.atoll_sync_session_observe, (self._h(),), callback,
                                        dict)
        if not handle:
            raise_last_error("atoll_sync_session_observe")
        token = SyncToken(handle, registration, self._realm, f"on the sync of {self._realm!r}")
        return self._realm._adopt_token(token)  # type: ignore[return-value]

    def __repr__(self) -> str:
        try:
            info = self._info()
        except AtollError as e:
            return f"<atoll.SyncSession ({e.message})>"
        return f"<atoll.SyncSession {info.get('path')} {info.get('state')} {info.get('connection')}>"
