"""Atoll: an offline-first object database (Python binding of libatoll).

>>> import atoll
>>> with atoll.open("app.realm", schema=[{"name": "Dog", "primaryKey": "_id",
...                                      "properties": {"_id": "int", "name": "string"}}]) as realm:
...     with realm.write():
...         realm.create("Dog", {"_id": 1, "name": "Rex"})
...     realm.objects("Dog").filter("name BEGINSWITH[c] $0", "r")[0]["name"]
'Rex'
"""

from __future__ import annotations

from . import _ffi
from .errors import (AlreadyInWriteError, AtollError, BusyError, ClosedError,
                     DuplicatePrimaryKeyError, FileError, InternalError, InvalidArgumentError,
                     InvalidJSONError, MigrationError, MissingValueError, NoSuchClassError,
                     NoSuchPropertyError, NotFoundError, NotInWriteError, QueryError,
                     QueryInvalidError, QuerySyntaxError, ReadOnlyError, SchemaError,
                     SchemaMismatchError, TypeMismatchError, SyncError, AuthError,
                     SyncTimeoutError, NetworkError, SubscriptionExistsError,
                     SubscriptionError)
from .ejson import Link
from .objectid import ObjectId
from .notifications import (ChangeStream, CollectionChange, Move, NotificationToken,
                            ObjectChange, RealmChange, ResultsChange)
from .realm import (CONFIG_KEYS, DURABILITY_MODES, NOTIFICATION_MODES, FrozenResults, Migration, Realm, Results,
                    UPDATE_POLICIES, delete_files, file_exists, open)
from .sync import (CLIENT_RESET_MODES, DOWNLOAD_BEFORE_OPEN, SYNC_MODES, App, CompensatingWrite,
                   Credentials, Subscription, SubscriptionSet, SubscriptionUpdate,
                   SyncErrorEvent, SyncSession, SyncToken, User, UserInfo, async_open,
                   open_synced)

__version__ = "0.1.0"


def library_version() -> str:
    """The version of the loaded libatoll, as text ("0.1.0")."""
    return _ffi.libversion()


def library_path() -> str:
    """Where libatoll was loaded from."""
    return _ffi.library_path


__all__ = [
    "open", "Realm", "Results", "FrozenResults", "Migration", "ObjectId", "Link",
    "UPDATE_POLICIES", "library_version", "library_path", "file_exists", "delete_files",
    "CONFIG_KEYS", "DURABILITY_MODES", "NOTIFICATION_MODES",
    "NotificationToken", "ChangeStream", "ResultsChange", "CollectionChange", "ObjectChange",
    "RealmChange", "Move",
    "AtollError", "InvalidArgumentError", "InvalidJSONError", "SchemaError",
    "SchemaMismatchError", "NotFoundError", "DuplicatePrimaryKeyError", "QueryError",
    "QuerySyntaxError", "QueryInvalidError", "NotInWriteError", "AlreadyInWriteError",
    "FileError", "ClosedError", "ReadOnlyError", "BusyError", "NoSuchClassError",
    "NoSuchPropertyError", "TypeMismatchError", "MissingValueError", "InternalError",
    "MigrationError",
    # sync
    "App", "User", "UserInfo", "Credentials", "open_synced", "async_open", "SyncSession",
    "SyncToken", "SyncErrorEvent", "CompensatingWrite", "Subscription", "SubscriptionSet",
    "SubscriptionUpdate", "SYNC_MODES", "DOWNLOAD_BEFORE_OPEN", "CLIENT_RESET_MODES",
    "SyncError", "AuthError", "SyncTimeoutError", "NetworkError", "SubscriptionExistsError",
    "SubscriptionError",
]
