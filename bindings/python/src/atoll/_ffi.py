"""ctypes declarations of libatoll's C ABI (include/atoll.h), and nothing else.

This module only loads the library and declares its functions, each under its C prototype.
The owning layer (handles that close themselves) lives in :mod:`atoll.realm`; error
translation lives in :mod:`atoll.errors`.

Where the library is found, in this order:

1. a copy bundled in this package (``libatoll.so`` next to this file);
2. the path in the ``ATOLL_LIBRARY`` environment variable;
3. ``ctypes.util.find_library("atoll")`` (the system's library search).

Ownership rules from the header, as they appear here:

* ``char *`` results that the caller owns are declared ``c_void_p`` (never ``c_char_p``, which
  would copy the text and lose the pointer); read them with :func:`take_string`, which copies
  the bytes and frees the pointer with ``atoll_free``.
* ``const char *`` results that are static or borrowed are declared ``c_char_p``.
* Handles are pointers to opaque structures (:data:`RealmPtr`, :data:`ResultsPtr`,
  :data:`MigrationPtr`, :data:`TokenPtr`, and for sync :data:`AppPtr`, :data:`UserPtr`,
  :data:`SyncSessionPtr`, :data:`AsyncOpenPtr`), so that ctypes refuses a results handle
  where a realm handle is expected.
* Change callbacks (:data:`atoll_changes_fn`) receive their JSON as ``c_char_p``: ctypes copies
  the borrowed text to ``bytes`` before the Python function runs, as the header asks. The
  CFUNCTYPE objects passed to the ``atoll_*_observe`` functions must stay referenced until
  their ``free_userdata`` has been called (the owning layer keeps two module-level ones for
  the life of the process).

The ``_j`` functions (``atoll_object_create_j`` and friends) take and return jansson
``json_t *`` values. Python has no ``json_t``, so they are deliberately not declared here;
every one of them has a text-JSON twin that is.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from ctypes import (CFUNCTYPE, POINTER, Structure, c_bool, c_char_p, c_int, c_int64, c_size_t,
                    c_uint64, c_void_p)
from typing import List, Optional

#: ATOLL_VERSION_NUMBER of the include/atoll.h this binding was written against.
BINDING_VERSION_NUMBER = 1000
#: ATOLL_VERSION of that header.
BINDING_VERSION = "0.1.0"

_LIBRARY_FILE = "libatoll.so"
_ENV_VAR = "ATOLL_LIBRARY"


def _load() -> "tuple[ctypes.CDLL, str]":
    """Loads libatoll, trying each place in turn; raises ImportError naming all of them."""
    tried: List[str] = []

    bundled = os.path.join(os.path.dirname(os.path.abspath(__file__)), _LIBRARY_FILE)
    if os.path.exists(bundled):
        try:
            return ctypes.CDLL(bundled), bundled
        except OSError as e:
            tried.append(f"bundled copy {bundled!r}: {e}")
    else:
        tried.append(f"bundled copy {bundled!r}: no such file")

    env_path = os.environ.get(_ENV_VAR)
    if env_path:
        try:
            return ctypes.CDLL(env_path), env_path
        except OSError as e:
            tried.append(f"${_ENV_VAR}={env_path!r}: {e}")
    else:
        tried.append(f"${_ENV_VAR}: not set")

    found = ctypes.util.find_library("atoll")
    if found:
        try:
            return ctypes.CDLL(found), found
        except OSError as e:
            tried.append(f"ctypes.util.find_library('atoll') -> {found!r}: {e}")
    else:
        tried.append("ctypes.util.find_library('atoll'): not found")

    raise ImportError(
        "cannot load libatoll; tried, in order:\n  - " + "\n  - ".join(tried)
        + f"\nSet {_ENV_VAR} to the path of libatoll.so (e.g. .build/debug/libatoll.so)."
    )


lib, library_path = _load()


# MARK: - Types

class atoll_realm_t(Structure):
    """typedef struct atoll_realm atoll_realm_t;  (opaque)"""


class atoll_results_t(Structure):
    """typedef struct atoll_results atoll_results_t;  (opaque)"""


class atoll_migration_t(Structure):
    """typedef struct atoll_migration atoll_migration_t;  (opaque; valid only during the
    migration callback)"""


class atoll_token_t(Structure):
    """typedef struct atoll_token atoll_token_t;  (opaque; a registered change callback)"""


class atoll_app_t(Structure):
    """typedef struct atoll_app atoll_app_t;  (opaque; an app on a sync server)"""


class atoll_user_t(Structure):
    """typedef struct atoll_user atoll_user_t;  (opaque; a user of an app)"""


class atoll_sync_session_t(Structure):
    """typedef struct atoll_sync_session atoll_sync_session_t;  (opaque; a synced realm's sync)"""


class atoll_async_open_t(Structure):
    """typedef struct atoll_async_open atoll_async_open_t;  (opaque; a background open)"""


RealmPtr = POINTER(atoll_realm_t)
ResultsPtr = POINTER(atoll_results_t)
MigrationPtr = POINTER(atoll_migration_t)
TokenPtr = POINTER(atoll_token_t)
AppPtr = POINTER(atoll_app_t)
UserPtr = POINTER(atoll_user_t)
SyncSessionPtr = POINTER(atoll_sync_session_t)
AsyncOpenPtr = POINTER(atoll_async_open_t)


class atoll_error_t(Structure):
    """typedef struct atoll_error { int code; const char *message; } atoll_error_t;

    ``message`` is borrowed: valid until the next atoll_ call on this thread. ``c_char_p``
    copies it to ``bytes`` when the field is read, so read it right after the call.
    """

    _fields_ = [("code", c_int), ("message", c_char_p)]


#: typedef bool (*atoll_should_compact_fn)(uint64_t total_bytes, uint64_t used_bytes,
#:                                         void *userdata);
#: Called on the thread that calls atoll_realm_open_with(), during that call only.
atoll_should_compact_fn = CFUNCTYPE(c_bool, c_uint64, c_uint64, c_void_p)


#: typedef bool (*atoll_migration_fn)(atoll_migration_t *migration, void *userdata);
#: Called on the thread that calls atoll_realm_open_with(), during that call only; the migration
#: handle (declared as MigrationPtr rather than void *, so that ctypes keeps it apart from other
#: handles) is valid until the callback returns.
atoll_migration_fn = CFUNCTYPE(c_bool, MigrationPtr, c_void_p)


#: typedef void (*atoll_free_userdata_fn)(void *userdata);
#: Called once, after the callback's last call (at once when registering fails); on the thread
#: that frees the token, or on the callback's thread when the token is freed inside it.
atoll_free_userdata_fn = CFUNCTYPE(None, c_void_p)

#: typedef void (*atoll_changes_fn)(void *userdata, const char *changes_json);
#: Called on the realm's notifier thread ("notifications": "thread") or inside
#: atoll_realm_deliver_notifications() ("host"). changes_json is borrowed for the call:
#: c_char_p copies it to bytes.
atoll_changes_fn = CFUNCTYPE(None, c_void_p, c_char_p)


class atoll_open_options_t(Structure):
    """typedef struct atoll_open_options {
        size_t size; atoll_should_compact_fn should_compact; void *should_compact_userdata;
        atoll_migration_fn migration; void *migration_userdata;
    } atoll_open_options_t;

    ``size`` must be ``ctypes.sizeof(atoll_open_options_t)``. The callback objects must stay
    referenced for as long as the library may call them (the duration of the open call).
    """

    _fields_ = [("size", c_size_t), ("should_compact", atoll_should_compact_fn),
                ("should_compact_userdata", c_void_p), ("migration", atoll_migration_fn),
                ("migration_userdata", c_void_p)]


# atoll_status_e
ATOLL_OK = 0
ATOLL_ERR_INVALID_ARGUMENT = 1
ATOLL_ERR_INVALID_JSON = 2
ATOLL_ERR_SCHEMA = 3
ATOLL_ERR_SCHEMA_MISMATCH = 4
ATOLL_ERR_NOT_FOUND = 5
ATOLL_ERR_DUPLICATE_PRIMARY_KEY = 6
ATOLL_ERR_QUERY_SYNTAX = 7
ATOLL_ERR_QUERY_INVALID = 8
ATOLL_ERR_NOT_IN_WRITE = 9
ATOLL_ERR_ALREADY_IN_WRITE = 10
ATOLL_ERR_FILE = 11
ATOLL_ERR_CLOSED = 12
ATOLL_ERR_READ_ONLY = 13
ATOLL_ERR_BUSY = 14
ATOLL_ERR_NO_SUCH_CLASS = 15
ATOLL_ERR_NO_SUCH_PROPERTY = 16
ATOLL_ERR_TYPE_MISMATCH = 17
ATOLL_ERR_MISSING_VALUE = 18
ATOLL_ERR_INTERNAL = 19
ATOLL_ERR_MIGRATION = 20
ATOLL_ERR_AUTH = 21
ATOLL_ERR_TIMEOUT = 22
ATOLL_ERR_NETWORK = 23
ATOLL_ERR_SUBSCRIPTION_EXISTS = 24
ATOLL_ERR_SUBSCRIPTION = 25
ATOLL_ERR_SYNC = 26

# atoll_update_policy_e
ATOLL_UPDATE_ERROR = 0
ATOLL_UPDATE_MODIFIED = 1
ATOLL_UPDATE_ALL = 2


# MARK: - Declarations

def _declare(name: str, restype, argtypes) -> None:
    try:
        fn = getattr(lib, name)
    except AttributeError:
        raise ImportError(
            f"{library_path} does not export {name}(), which atoll.h {BINDING_VERSION} declares"
        ) from None
    fn.restype = restype
    fn.argtypes = argtypes


# MARK: Library

# int atoll_libversion_number(void);
_declare("atoll_libversion_number", c_int, [])

# const char *atoll_libversion(void);            -- static, never free
_declare("atoll_libversion", c_char_p, [])

# bool atoll_last_error(atoll_error_t *out);
_declare("atoll_last_error", c_bool, [POINTER(atoll_error_t)])

# const char *atoll_status_name(int code);       -- static or NULL, never free
_declare("atoll_status_name", c_char_p, [c_int])

# void atoll_free(void *ptr);
_declare("atoll_free", None, [c_void_p])

# MARK: Realms

# atoll_realm_t *atoll_realm_open(const char *config_json);
_declare("atoll_realm_open", RealmPtr, [c_char_p])

# void atoll_realm_close(atoll_realm_t *realm);
_declare("atoll_realm_close", None, [RealmPtr])

# bool atoll_realm_begin_write(atoll_realm_t *realm);
_declare("atoll_realm_begin_write", c_bool, [RealmPtr])

# bool atoll_realm_commit(atoll_realm_t *realm);
_declare("atoll_realm_commit", c_bool, [RealmPtr])

# bool atoll_realm_cancel_write(atoll_realm_t *realm);
_declare("atoll_realm_cancel_write", c_bool, [RealmPtr])

# bool atoll_realm_is_in_write(atoll_realm_t *realm, bool *out_in_write);
_declare("atoll_realm_is_in_write", c_bool, [RealmPtr, POINTER(c_bool)])

# char *atoll_realm_schema(atoll_realm_t *realm);           -- caller owns; atoll_free()
_declare("atoll_realm_schema", c_void_p, [RealmPtr])

# bool atoll_realm_schema_version(atoll_realm_t *realm, uint64_t *out_version);
_declare("atoll_realm_schema_version", c_bool, [RealmPtr, POINTER(c_uint64)])

# bool atoll_realm_version(atoll_realm_t *realm, uint64_t *out_version);
_declare("atoll_realm_version", c_bool, [RealmPtr, POINTER(c_uint64)])

# char *atoll_realm_changes(atoll_realm_t *realm, uint64_t after_version,
#                           size_t max_entries);              -- caller owns; atoll_free()
_declare("atoll_realm_changes", c_void_p, [RealmPtr, c_uint64, c_size_t])

# MARK: Files

# atoll_realm_t *atoll_realm_open_with(const char *config_json,
#                                      const atoll_open_options_t *options);
_declare("atoll_realm_open_with", RealmPtr, [c_char_p, POINTER(atoll_open_options_t)])

# bool atoll_realm_write_copy(atoll_realm_t *realm, const char *path, bool compact);
_declare("atoll_realm_write_copy", c_bool, [RealmPtr, c_char_p, c_bool])

# bool atoll_realm_write_copy_to(atoll_realm_t *realm, const char *config_json);
_declare("atoll_realm_write_copy_to", c_bool, [RealmPtr, c_char_p])

# bool atoll_realm_compact(atoll_realm_t *realm);
_declare("atoll_realm_compact", c_bool, [RealmPtr])

# bool atoll_realm_file_exists(const char *config_json, bool *out_exists);
_declare("atoll_realm_file_exists", c_bool, [c_char_p, POINTER(c_bool)])

# bool atoll_realm_delete_files(const char *config_json, bool *out_deleted);
_declare("atoll_realm_delete_files", c_bool, [c_char_p, POINTER(c_bool)])

# MARK: Migrations (valid only during the migration callback; ATOLL_ERR_CLOSED afterwards)

# atoll_realm_t *atoll_migration_realm(atoll_migration_t *migration);
#                                     -- borrowed; valid until the callback returns; never close
_declare("atoll_migration_realm", RealmPtr, [MigrationPtr])

# char *atoll_migration_old_schema(atoll_migration_t *migration);   -- caller owns; atoll_free()
_declare("atoll_migration_old_schema", c_void_p, [MigrationPtr])

# char *atoll_migration_new_schema(atoll_migration_t *migration);   -- caller owns; atoll_free()
_declare("atoll_migration_new_schema", c_void_p, [MigrationPtr])

# bool atoll_migration_versions(atoll_migration_t *migration, uint64_t *out_old,
#                               uint64_t *out_new);
_declare("atoll_migration_versions", c_bool,
         [MigrationPtr, POINTER(c_uint64), POINTER(c_uint64)])

# char *atoll_migration_old_objects(atoll_migration_t *migration, const char *class_name);
#                                                             -- caller owns; atoll_free()
_declare("atoll_migration_old_objects", c_void_p, [MigrationPtr, c_char_p])

# bool atoll_migration_set(atoll_migration_t *migration, const char *class_name, int64_t key,
#                          const char *values_json);
_declare("atoll_migration_set", c_bool, [MigrationPtr, c_char_p, c_int64, c_char_p])

# bool atoll_migration_rename_property(atoll_migration_t *migration, const char *class_name,
#                                      const char *from, const char *to);
_declare("atoll_migration_rename_property", c_bool, [MigrationPtr, c_char_p, c_char_p, c_char_p])

# bool atoll_migration_delete_data(atoll_migration_t *migration, const char *class_name);
_declare("atoll_migration_delete_data", c_bool, [MigrationPtr, c_char_p])

# MARK: Objects

# char *atoll_object_create(atoll_realm_t *realm, const char *class_name,
#                           const char *object_json, int update_policy);
#                                                             -- caller owns; atoll_free()
_declare("atoll_object_create", c_void_p, [RealmPtr, c_char_p, c_char_p, c_int])

# struct json_t *atoll_object_create_j(...);                  -- not declared (jansson only)

# bool atoll_objects_create_many(atoll_realm_t *realm, const char *class_name,
#                                const char *array_json, int update_policy, size_t *out_count);
_declare("atoll_objects_create_many", c_bool,
         [RealmPtr, c_char_p, c_char_p, c_int, POINTER(c_size_t)])

# bool atoll_objects_create_many_j(...);                      -- not declared (jansson only)

# char *atoll_object_get(atoll_realm_t *realm, const char *class_name,
#                        const char *primary_key_json);       -- caller owns; atoll_free()
_declare("atoll_object_get", c_void_p, [RealmPtr, c_char_p, c_char_p])

# struct json_t *atoll_object_get_j(...);                     -- not declared (jansson only)

# bool atoll_object_delete(atoll_realm_t *realm, const char *class_name,
#                          const char *primary_key_json);
_declare("atoll_object_delete", c_bool, [RealmPtr, c_char_p, c_char_p])

# bool atoll_object_delete_j(...);                            -- not declared (jansson only)

# MARK: Collection elements (size_t indexes: the owning layer refuses negative ints, which
# ctypes would silently turn into huge size_t values)

# bool atoll_object_add_integer(atoll_realm_t *realm, const char *class_name,
#                               const char *primary_key_json, const char *property, int64_t delta);
_declare("atoll_object_add_integer", c_bool, [RealmPtr, c_char_p, c_char_p, c_char_p, c_int64])

# bool atoll_list_insert(atoll_realm_t *realm, const char *class_name,
#                        const char *primary_key_json, const char *property, size_t index,
#                        const char *value_json);
_declare("atoll_list_insert", c_bool, [RealmPtr, c_char_p, c_char_p, c_char_p, c_size_t, c_char_p])

# bool atoll_list_set(atoll_realm_t *realm, const char *class_name,
#                     const char *primary_key_json, const char *property, size_t index,
#                     const char *value_json);
_declare("atoll_list_set", c_bool, [RealmPtr, c_char_p, c_char_p, c_char_p, c_size_t, c_char_p])

# bool atoll_list_erase(atoll_realm_t *realm, const char *class_name,
#                       const char *primary_key_json, const char *property, size_t index);
_declare("atoll_list_erase", c_bool, [RealmPtr, c_char_p, c_char_p, c_char_p, c_size_t])

# bool atoll_list_move(atoll_realm_t *realm, const char *class_name,
#                      const char *primary_key_json, const char *property, size_t from_index,
#                      size_t to_index);
_declare("atoll_list_move", c_bool, [RealmPtr, c_char_p, c_char_p, c_char_p, c_size_t, c_size_t])

# bool atoll_set_insert(atoll_realm_t *realm, const char *class_name,
#                       const char *primary_key_json, const char *property,
#                       const char *value_json, bool *out_inserted);   -- out may be NULL
_declare("atoll_set_insert", c_bool,
         [RealmPtr, c_char_p, c_char_p, c_char_p, c_char_p, POINTER(c_bool)])

# bool atoll_set_erase(atoll_realm_t *realm, const char *class_name,
#                      const char *primary_key_json, const char *property,
#                      const char *value_json, bool *out_erased);      -- out may be NULL
_declare("atoll_set_erase", c_bool,
         [RealmPtr, c_char_p, c_char_p, c_char_p, c_char_p, POINTER(c_bool)])

# bool atoll_dictionary_set(atoll_realm_t *realm, const char *class_name,
#                           const char *primary_key_json, const char *property,
#                           const char *key, const char *value_json);
_declare("atoll_dictionary_set", c_bool,
         [RealmPtr, c_char_p, c_char_p, c_char_p, c_char_p, c_char_p])

# bool atoll_dictionary_erase(atoll_realm_t *realm, const char *class_name,
#                             const char *primary_key_json, const char *property,
#                             const char *key, bool *out_erased);      -- out may be NULL
_declare("atoll_dictionary_erase", c_bool,
         [RealmPtr, c_char_p, c_char_p, c_char_p, c_char_p, POINTER(c_bool)])

# MARK: Results

# atoll_results_t *atoll_results_query(atoll_realm_t *realm, const char *class_name,
#                                      const char *rql, const char *args_json);
_declare("atoll_results_query", ResultsPtr, [RealmPtr, c_char_p, c_char_p, c_char_p])

# atoll_results_t *atoll_results_query_j(...);                -- not declared (jansson only)

# bool atoll_results_count(atoll_results_t *results, size_t *out_count);
_declare("atoll_results_count", c_bool, [ResultsPtr, POINTER(c_size_t)])

# char *atoll_results_json(atoll_results_t *results, size_t offset, size_t limit);
#                                                             -- caller owns; atoll_free()
_declare("atoll_results_json", c_void_p, [ResultsPtr, c_size_t, c_size_t])

# struct json_t *atoll_results_json_j(...);                   -- not declared (jansson only)

# bool atoll_results_delete_all(atoll_results_t *results, size_t *out_count);
_declare("atoll_results_delete_all", c_bool, [ResultsPtr, POINTER(c_size_t)])

# void atoll_results_free(atoll_results_t *results);
_declare("atoll_results_free", None, [ResultsPtr])

# atoll_results_t *atoll_results_freeze(atoll_results_t *results);
#                                         -- caller owns; free with atoll_results_free()
_declare("atoll_results_freeze", ResultsPtr, [ResultsPtr])

# MARK: Notifications

# atoll_token_t *atoll_results_observe(atoll_results_t *results, const char *key_paths_json,
#                                      atoll_changes_fn fn, void *userdata,
#                                      atoll_free_userdata_fn free_userdata);
#                                         -- caller owns; free with atoll_token_free()
_declare("atoll_results_observe", TokenPtr,
         [ResultsPtr, c_char_p, atoll_changes_fn, c_void_p, atoll_free_userdata_fn])

# atoll_token_t *atoll_object_observe(atoll_realm_t *realm, const char *class_name,
#                                     const char *primary_key_json, const char *key_paths_json,
#                                     atoll_changes_fn fn, void *userdata,
#                                     atoll_free_userdata_fn free_userdata);
#                                         -- caller owns; free with atoll_token_free()
_declare("atoll_object_observe", TokenPtr,
         [RealmPtr, c_char_p, c_char_p, c_char_p, atoll_changes_fn, c_void_p,
          atoll_free_userdata_fn])

# atoll_token_t *atoll_collection_observe(atoll_realm_t *realm, const char *class_name,
#                                         const char *primary_key_json, const char *property,
#                                         const char *key_paths_json, atoll_changes_fn fn,
#                                         void *userdata, atoll_free_userdata_fn free_userdata);
#                                         -- caller owns; free with atoll_token_free()
_declare("atoll_collection_observe", TokenPtr,
         [RealmPtr, c_char_p, c_char_p, c_char_p, c_char_p, atoll_changes_fn, c_void_p,
          atoll_free_userdata_fn])

# atoll_token_t *atoll_realm_observe(atoll_realm_t *realm, atoll_changes_fn fn, void *userdata,
#                                    atoll_free_userdata_fn free_userdata);
#                                         -- caller owns; free with atoll_token_free()
_declare("atoll_realm_observe", TokenPtr,
         [RealmPtr, atoll_changes_fn, c_void_p, atoll_free_userdata_fn])

# void atoll_token_free(atoll_token_t *token);   -- NULL is a no-op; any thread; waits for a
#                                                   running call of the callback on another thread
_declare("atoll_token_free", None, [TokenPtr])

# bool atoll_realm_refresh(atoll_realm_t *realm);
_declare("atoll_realm_refresh", c_bool, [RealmPtr])

# int atoll_realm_notification_fd(atoll_realm_t *realm);   -- borrowed; valid until the realm
#                                                              closes; never read or close it
_declare("atoll_realm_notification_fd", c_int, [RealmPtr])

# bool atoll_realm_deliver_notifications(atoll_realm_t *realm);
_declare("atoll_realm_deliver_notifications", c_bool, [RealmPtr])


# MARK: Sync (apps, users, synced realms; the owning layer is atoll.sync)
#
# Calls that talk to the server block the calling thread (ctypes releases the GIL for them).
# The callbacks of atoll_app_observe_errors, atoll_realm_async_open and
# atoll_sync_session_observe are atoll_changes_fn, called on library threads with borrowed JSON.

# atoll_app_t *atoll_app_new(const char *app_config_json);   -- free with atoll_app_free()
_declare("atoll_app_new", AppPtr, [c_char_p])

# void atoll_app_free(atoll_app_t *app);          -- NULL is a no-op
_declare("atoll_app_free", None, [AppPtr])

# atoll_user_t *atoll_app_login(atoll_app_t *app, const char *credentials_json);
#                                                 -- blocks; free with atoll_user_free()
_declare("atoll_app_login", UserPtr, [AppPtr, c_char_p])

# bool atoll_app_register_email(atoll_app_t *app, const char *email, const char *password);
#                                                 -- blocks
_declare("atoll_app_register_email", c_bool, [AppPtr, c_char_p, c_char_p])

# atoll_user_t *atoll_app_current_user(atoll_app_t *app);
#                          -- new handle, or NULL with no error when nobody is logged in
_declare("atoll_app_current_user", UserPtr, [AppPtr])

# char *atoll_app_all_users(atoll_app_t *app);    -- caller owns; atoll_free()
_declare("atoll_app_all_users", c_void_p, [AppPtr])

# bool atoll_app_switch_user(atoll_app_t *app, atoll_user_t *user);
_declare("atoll_app_switch_user", c_bool, [AppPtr, UserPtr])

# atoll_token_t *atoll_app_observe_errors(atoll_app_t *app, atoll_changes_fn fn, void *userdata,
#                                         atoll_free_userdata_fn free_userdata);
#                                         -- caller owns; free with atoll_token_free()
_declare("atoll_app_observe_errors", TokenPtr,
         [AppPtr, atoll_changes_fn, c_void_p, atoll_free_userdata_fn])

# char *atoll_user_json(atoll_user_t *user);      -- caller owns; atoll_free()
_declare("atoll_user_json", c_void_p, [UserPtr])

# bool atoll_user_logout(atoll_user_t *user);     -- blocks (best effort on the server)
_declare("atoll_user_logout", c_bool, [UserPtr])

# bool atoll_user_remove(atoll_user_t *user);     -- blocks
_declare("atoll_user_remove", c_bool, [UserPtr])

# bool atoll_user_delete(atoll_user_t *user);     -- blocks
_declare("atoll_user_delete", c_bool, [UserPtr])

# void atoll_user_free(atoll_user_t *user);       -- NULL is a no-op; the user stays logged in
_declare("atoll_user_free", None, [UserPtr])

# atoll_realm_t *atoll_realm_open_synced(atoll_user_t *user, const char *config_json);
#                                 -- blocks with "downloadBeforeOpen"; close with atoll_realm_close()
_declare("atoll_realm_open_synced", RealmPtr, [UserPtr, c_char_p])

# atoll_async_open_t *atoll_realm_async_open(atoll_user_t *user, const char *config_json,
#                                            atoll_changes_fn fn, void *userdata,
#                                            atoll_free_userdata_fn free_userdata);
#                                         -- caller owns; free with atoll_async_open_free()
_declare("atoll_realm_async_open", AsyncOpenPtr,
         [UserPtr, c_char_p, atoll_changes_fn, c_void_p, atoll_free_userdata_fn])

# atoll_realm_t *atoll_async_open_take_realm(atoll_async_open_t *task);
#                                         -- once, after "open"; close with atoll_realm_close()
_declare("atoll_async_open_take_realm", RealmPtr, [AsyncOpenPtr])

# void atoll_async_open_free(atoll_async_open_t *task);   -- NULL is a no-op; cancels a running open
_declare("atoll_async_open_free", None, [AsyncOpenPtr])

# char *atoll_subscriptions_json(atoll_realm_t *realm);   -- caller owns; atoll_free()
_declare("atoll_subscriptions_json", c_void_p, [RealmPtr])

# bool atoll_subscriptions_update(atoll_realm_t *realm, const char *update_json,
#                                 uint64_t *out_version);  -- out may be NULL
_declare("atoll_subscriptions_update", c_bool, [RealmPtr, c_char_p, POINTER(c_uint64)])

# bool atoll_subscriptions_wait(atoll_realm_t *realm, uint64_t version, int timeout_ms);
#                                                 -- blocks
_declare("atoll_subscriptions_wait", c_bool, [RealmPtr, c_uint64, c_int])

# atoll_sync_session_t *atoll_realm_sync_session(atoll_realm_t *realm);
#                                         -- caller owns; free with atoll_sync_session_free()
_declare("atoll_realm_sync_session", SyncSessionPtr, [RealmPtr])

# char *atoll_sync_session_state_json(atoll_sync_session_t *session);   -- caller owns; atoll_free()
_declare("atoll_sync_session_state_json", c_void_p, [SyncSessionPtr])

# bool atoll_sync_session_pause(atoll_sync_session_t *session);
_declare("atoll_sync_session_pause", c_bool, [SyncSessionPtr])

# bool atoll_sync_session_resume(atoll_sync_session_t *session);
_declare("atoll_sync_session_resume", c_bool, [SyncSessionPtr])

# bool atoll_sync_session_reconnect(atoll_sync_session_t *session);
_declare("atoll_sync_session_reconnect", c_bool, [SyncSessionPtr])

# bool atoll_sync_session_wait_for_upload(atoll_sync_session_t *session, int timeout_ms);
#                                                 -- blocks
_declare("atoll_sync_session_wait_for_upload", c_bool, [SyncSessionPtr, c_int])

# bool atoll_sync_session_wait_for_download(atoll_sync_session_t *session, int timeout_ms);
#                                                 -- blocks
_declare("atoll_sync_session_wait_for_download", c_bool, [SyncSessionPtr, c_int])

# atoll_token_t *atoll_sync_session_observe(atoll_sync_session_t *session, atoll_changes_fn fn,
#                                           void *userdata, atoll_free_userdata_fn free_userdata);
#                                         -- caller owns; free with atoll_token_free()
_declare("atoll_sync_session_observe", TokenPtr,
         [SyncSessionPtr, atoll_changes_fn, c_void_p, atoll_free_userdata_fn])

# void atoll_sync_session_free(atoll_sync_session_t *session);   -- NULL is a no-op
_declare("atoll_sync_session_free", None, [SyncSessionPtr])

# bool atoll_realm_write_copy_synced(atoll_realm_t *realm, const char *config_json,
#                                    atoll_user_t *user_or_null);
_declare("atoll_realm_write_copy_synced", c_bool, [RealmPtr, c_char_p, UserPtr])


# MARK: - Helpers

def take_string(ptr: Optional[int]) -> Optional[str]:
    """Copies an owned ``char *`` (as returned through ``c_void_p``) and frees it.

    Returns None for NULL. The text is UTF-8 JSON; a byte sequence that is not UTF-8 (a
    library bug) is decoded with replacement characters rather than raising here.
    """
    if not ptr:
        return None
    try:
        return ctypes.string_at(ptr).decode("utf-8", errors="replace")
    finally:
        lib.atoll_free(ptr)


def last_error() -> "tuple[bool, int, str]":
    """``atoll_last_error()`` of this thread: (failed, code, message)."""
    err = atoll_error_t()
    failed = bool(lib.atoll_last_error(ctypes.byref(err)))
    raw = err.message
    message = raw.decode("utf-8", errors="replace") if raw else ""
    return failed, int(err.code), message


def status_name(code: int) -> Optional[str]:
    """``atoll_status_name(code)`` as text, or None for a code the library does not know."""
    raw = lib.atoll_status_name(code)
    return raw.decode("ascii", errors="replace") if raw is not None else None


def libversion() -> str:
    raw = lib.atoll_libversion()
    return raw.decode("ascii", errors="replace") if raw is not None else ""


def libversion_number() -> int:
    return int(lib.atoll_libversion_number())


def _check_version() -> None:
    number = libversion_number()
    if number // 1_000_000 != BINDING_VERSION_NUMBER // 1_000_000:
        raise ImportError(
            f"{library_path} is libatoll {libversion()} ({number}); this binding was written "
            f"for {BINDING_VERSION} ({BINDING_VERSION_NUMBER}) and needs the same major version"
        )


_check_version()
