/*
 * atoll.h — the C interface of Atoll, an offline-first object database.
 *
 * Conventions (see docs/abi.md for the long form):
 *
 *   - Every function is named atoll_<noun>_<verb>; handles are opaque (atoll_<noun>_t) and only
 *     ever cross as pointers. Each constructor has a destructor, and every destructor accepts
 *     NULL as a harmless no-op.
 *   - A call reports failure by returning false or NULL. The reason is then available from
 *     atoll_last_error() on the same thread: a stable code (atoll_status_e) and a message.
 *     Every call that can fail clears the last error when it succeeds. The calls that cannot
 *     fail leave it as it is, so that an error can be read, named and printed around them:
 *     atoll_last_error(), atoll_status_name(), atoll_libversion*(), atoll_free() and the
 *     destructors (atoll_realm_close(), atoll_results_free()).
 *   - Objects, primary keys, schemas and query arguments cross as JSON text (UTF-8): MongoDB
 *     Extended JSON v2, relaxed form, for values JSON has no type for ({"$oid": ...},
 *     {"$date": ...}, {"$uuid": ...}, {"$numberDecimal": ...}, {"$binary": ...}). Hosts that use
 *     jansson can pass and receive json_t values through the _j twins instead.
 *   - Memory returned by the library is freed by the library: char * results with atoll_free(),
 *     json_t * results with json_decref(), handles with their own destructor. Ownership is said
 *     on every function in fixed words: "caller owns; free with atoll_free()", "borrowed; valid
 *     until ...", and for json_t jansson's own "new reference" / "borrowed reference".
 *   - Threads: every handle may be used from any thread. Calls on one handle are serialized
 *     inside the library (a call waits while another thread's call on the same handle runs), so
 *     concurrent use never corrupts anything. A write transaction belongs to the handle, not to
 *     the thread that began it. Several handles, in one process or several, may use one file at
 *     once: readers never block, and a second writer waits in atoll_realm_begin_write() until
 *     the first commits or cancels.
 *   - Handles stay recognisable after they are closed: a call on a closed realm, or on results
 *     whose realm was closed, fails with ATOLL_ERR_CLOSED instead of touching freed memory.
 *     Passing a pointer that never was a handle of this library fails with
 *     ATOLL_ERR_INVALID_ARGUMENT.
 *
 * New status codes, functions and configuration keys may be added in later versions; existing
 * ones keep their numbers and meanings. A signature that must change gets a _v2 sibling.
 */
#ifndef ATOLL_H
#define ATOLL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The version of this header, as text and as MAJOR * 1000000 + MINOR * 1000 + PATCH. */
#define ATOLL_VERSION "0.1.0"
#define ATOLL_VERSION_NUMBER 1000

/* jansson's value type; include <jansson.h> to use the _j functions. */
struct json_t;

/** An open realm: one connection to one database file (or in-memory database). */
typedef struct atoll_realm atoll_realm_t;

/** The objects of one class that match a query, in the query's order. */
typedef struct atoll_results atoll_results_t;

/**
 * Status codes. ATOLL_OK is 0; codes are never renumbered; new codes may be added, so a host
 * should treat an unknown code as a generic failure.
 */
typedef enum atoll_status_e {
    ATOLL_OK = 0,
    /** A NULL or otherwise unusable argument, or a pointer that is not a handle of this library. */
    ATOLL_ERR_INVALID_ARGUMENT = 1,
    /** Text that is not valid JSON (or not UTF-8), or JSON of the wrong shape for the call. */
    ATOLL_ERR_INVALID_JSON = 2,
    /** A schema that is not valid: unknown types, bad names, a link to a missing class... */
    ATOLL_ERR_SCHEMA = 3,
    /** The file's schema differs from the configuration's in a way that needs a migration. */
    ATOLL_ERR_SCHEMA_MISMATCH = 4,
    /** No object with that primary key (or link target) exists. */
    ATOLL_ERR_NOT_FOUND = 5,
    /** An object with that primary key exists and the update policy is ATOLL_UPDATE_ERROR. */
    ATOLL_ERR_DUPLICATE_PRIMARY_KEY = 6,
    /** A query that does not parse; the message gives the position. */
    ATOLL_ERR_QUERY_SYNTAX = 7,
    /** A query that parses but cannot run: unknown property, wrong argument type or count... */
    ATOLL_ERR_QUERY_INVALID = 8,
    /** A write call outside a write transaction. */
    ATOLL_ERR_NOT_IN_WRITE = 9,
    /** atoll_realm_begin_write() on a handle already in a write transaction. */
    ATOLL_ERR_ALREADY_IN_WRITE = 10,
    /** The file could not be opened, created, read or written. */
    ATOLL_ERR_FILE = 11,
    /** The handle (or the realm it belongs to) has been closed. */
    ATOLL_ERR_CLOSED = 12,
    /** A write on a realm opened read-only. */
    ATOLL_ERR_READ_ONLY = 13,
    /** The write lock was not obtained within the configured "writeTimeoutMs"; or the files of a
        realm that is open (in this process or another) cannot be deleted. */
    ATOLL_ERR_BUSY = 14,
    /** A class name the realm's schema does not have. */
    ATOLL_ERR_NO_SUCH_CLASS = 15,
    /** A property name the class does not have. */
    ATOLL_ERR_NO_SUCH_PROPERTY = 16,
    /** A value of the wrong type for its property (or primary key). */
    ATOLL_ERR_TYPE_MISMATCH = 17,
    /** A required property, or the primary key, was missing or null. */
    ATOLL_ERR_MISSING_VALUE = 18,
    /** An unexpected failure inside the library or SQLite; the message says what. */
    ATOLL_ERR_INTERNAL = 19,
    /** A migration failed: its callback returned false (the message is the callback's last
     *  error, if it had one). The file is left as it was. */
    ATOLL_ERR_MIGRATION = 20,
    /** Sync: a login was refused, or the user is logged out (the message has the server's reason). */
    ATOLL_ERR_AUTH = 21,
    /** Sync: a wait (download, upload, subscriptions, connecting) did not end in time. */
    ATOLL_ERR_TIMEOUT = 22,
    /** Sync: the server could not be reached. */
    ATOLL_ERR_NETWORK = 23,
    /** Sync: a subscription with that name exists already (update it instead). */
    ATOLL_ERR_SUBSCRIPTION_EXISTS = 24,
    /** Sync: the server refused the subscription set (the message has its reason). */
    ATOLL_ERR_SUBSCRIPTION = 25,
    /** Sync: any other sync error; the message starts with its code (docs/protocol.md). */
    ATOLL_ERR_SYNC = 26
} atoll_status_e;

/** How atoll_object_create() treats an object whose primary key exists already. */
typedef enum atoll_update_policy_e {
    /** Fail with ATOLL_ERR_DUPLICATE_PRIMARY_KEY (Realm's .error). */
    ATOLL_UPDATE_ERROR = 0,
    /** Update the properties given, recording only those whose value changed (Realm's .modified). */
    ATOLL_UPDATE_MODIFIED = 1,
    /** Update the properties given, recording all of them as changed (Realm's .all). */
    ATOLL_UPDATE_ALL = 2
} atoll_update_policy_e;

/** The last error of the calling thread. */
typedef struct atoll_error {
    int code;            /**< an atoll_status_e value */
    const char *message; /**< borrowed; valid until the next call on this thread of an atoll_
                              function that can fail */
} atoll_error_t;

/* MARK: - Library */

/**
 * The version of the library that is loaded, as MAJOR * 1000000 + MINOR * 1000 + PATCH.
 * Compare with ATOLL_VERSION_NUMBER to detect a header/library mismatch.
 * @return the version number. Never fails; any thread.
 */
int atoll_libversion_number(void);

/**
 * The version of the library that is loaded, as text ("0.1.0").
 * @return a static string; never NULL; never free it. Any thread.
 */
const char *atoll_libversion(void);

/**
 * The error of the last failed call on this thread.
 * @param out receives the code and message; may be NULL to only ask whether there is one.
 *        out->message is borrowed: valid until the next call on this thread of an atoll_
 *        function that can fail.
 * @return true when the last atoll_ call on this thread that can fail did fail; false when it
 *         succeeded (then *out is set to ATOLL_OK and an empty message). Calls that cannot fail
 *         (see the top of this header) do not change the answer. Any thread.
 */
bool atoll_last_error(atoll_error_t *out);

/**
 * The name of a status code, as spelled in this header ("ATOLL_ERR_NOT_FOUND").
 * @param code a status code.
 * @return a static string, or NULL for a code this version does not know. Any thread.
 */
const char *atoll_status_name(int code);

/**
 * Frees memory the library returned as char * (JSON text).
 * @param ptr what an atoll_ function returned with "caller owns"; NULL is a no-op.
 * Any thread.
 */
void atoll_free(void *ptr);

/* MARK: - Realms */

/**
 * Opens (creating when needed) a realm.
 *
 * @param config_json a JSON object:
 *   - "path" (string): the database file. Required unless "inMemory" is true.
 *   - "inMemory" (bool, default false): keep the data in memory only. With a "path", handles
 *     of this process that open the same path share one in-memory database, which lives until
 *     the last of them closes; without one, the database is private to this handle.
 *   - "schema" (array of object schemas, Realm JS notation, see docs/schema.md): the classes.
 *     When absent, the schema stored in the file is used (an empty realm has none).
 *   - "schemaVersion" (integer >= 0, default 0): the version of "schema".
 *   - "readOnly" (bool, default false): open without the right to write; the file must exist.
 *     Every write call then fails with ATOLL_ERR_READ_ONLY, and the handle still sees what
 *     other handles and processes commit (after a refresh). A file in a directory that cannot
 *     be written (and with no "-wal" file beside it) is read as it is, without companion files.
 *     Without "readOnly", a file that cannot be written (permissions, a read-only file system),
 *     or one whose directory cannot hold its "-wal" and "-shm" files, fails the open with
 *     ATOLL_ERR_FILE naming the reason.
 *   - "writeTimeoutMs" (integer, default -1): how long atoll_realm_begin_write() waits for
 *     another writer; -1 waits as long as it takes, as Realm does.
 *   - "deleteRealmIfMigrationNeeded" (bool, default false): when the file's schema would need
 *     a migration, delete every class and object and start with "schema" instead of failing.
 *   - "notifications" ("thread" or "host", default "thread"): who calls this handle's change
 *     callbacks (see Notifications below): a notifier thread of the library, or the host,
 *     which polls atoll_realm_notification_fd() and calls atoll_realm_deliver_notifications().
 *   - "durability" ("full" or "normal", default "full"): what a commit that returned
 *     survives. "full": a power loss or an operating system crash (the commit waits until the
 *     log is on the disk, as Realm's commits do). "normal": a crash of the process only; after
 *     a power loss or an OS crash the last commits may be gone, the file intact. See
 *     docs/files.md, "Durability".
 *   - "changeLogValues" (bool, default false): make the file's change log keep the values it
 *     records, which atoll_realm_changes() returns. Without it, the log keeps only what
 *     changed (objects, properties, positions: what notifications read) and costs a few bytes
 *     per change instead of a second copy of every value written. Once set, the file keeps
 *     values from the next commit on, for every handle and process (false does not undo it);
 *     synced realms always keep them until the server has them. See docs/changelog.md.
 *   Reads see the data as of the handle's last refresh (a snapshot): atoll_realm_refresh(),
 *   atoll_realm_begin_write() and each delivery of notifications move it to the newest data.
 *   Opening an existing file whose schema differs from "schema" only by additions (new
 *   classes, new properties, new indexes) adds them. Any other difference needs a higher
 *   "schemaVersion" than the file's: the file is then migrated (with the migration callback of
 *   atoll_realm_open_with(), if given). Without one, or with a lower "schemaVersion" than the
 *   file's, the open fails with ATOLL_ERR_SCHEMA_MISMATCH naming each difference.
 * @return a new handle (caller owns; close with atoll_realm_close()), or NULL on failure:
 *   ATOLL_ERR_INVALID_ARGUMENT (NULL, or bad configuration values), ATOLL_ERR_INVALID_JSON,
 *   ATOLL_ERR_SCHEMA, ATOLL_ERR_SCHEMA_MISMATCH, ATOLL_ERR_FILE, ATOLL_ERR_BUSY,
 *   ATOLL_ERR_DUPLICATE_PRIMARY_KEY (primary keys not unique after a migration).
 * Any thread.
 */
atoll_realm_t *atoll_realm_open(const char *config_json);

/**
 * Closes a realm. A write transaction left open is cancelled (nothing of it is kept). Results
 * of this realm fail with ATOLL_ERR_CLOSED from then on but must still be freed.
 * @param realm the handle; NULL, or a realm closed already, is a no-op.
 * Any thread; waits for a call running on the handle in another thread to return.
 */
void atoll_realm_close(atoll_realm_t *realm);

/**
 * Begins a write transaction, waiting (up to "writeTimeoutMs") while another handle or process
 * holds the write lock. The handle then reads its own uncommitted writes.
 * @return true on success; false with ATOLL_ERR_ALREADY_IN_WRITE, ATOLL_ERR_READ_ONLY,
 *   ATOLL_ERR_BUSY, ATOLL_ERR_CLOSED, ATOLL_ERR_FILE.
 * Any thread.
 */
bool atoll_realm_begin_write(atoll_realm_t *realm);

/**
 * Commits the write transaction: its changes and one change-log entry holding its instructions
 * become visible to other handles together, and survive what the configuration's "durability"
 * promises (by default a power loss or an OS crash; with "normal" a crash of the process).
 * @return true on success; false with ATOLL_ERR_NOT_IN_WRITE, ATOLL_ERR_CLOSED, ATOLL_ERR_FILE
 *   (then the transaction has been rolled back).
 * Any thread.
 */
bool atoll_realm_commit(atoll_realm_t *realm);

/**
 * Cancels the write transaction: nothing written since atoll_realm_begin_write() is kept.
 * @return true on success; false with ATOLL_ERR_NOT_IN_WRITE, ATOLL_ERR_CLOSED.
 * Any thread.
 */
bool atoll_realm_cancel_write(atoll_realm_t *realm);

/**
 * Whether the handle is in a write transaction.
 * @param out_in_write receives the answer.
 * @return true on success; false with ATOLL_ERR_INVALID_ARGUMENT, ATOLL_ERR_CLOSED.
 */
bool atoll_realm_is_in_write(atoll_realm_t *realm, bool *out_in_write);

/**
 * The realm's schema, as a JSON array of object schemas in the object form of docs/schema.md.
 * @return JSON text (caller owns; free with atoll_free()), or NULL with ATOLL_ERR_CLOSED.
 */
char *atoll_realm_schema(atoll_realm_t *realm);

/**
 * The schema version stored in the file.
 * @return true on success; false with ATOLL_ERR_INVALID_ARGUMENT, ATOLL_ERR_CLOSED.
 */
bool atoll_realm_schema_version(atoll_realm_t *realm, uint64_t *out_version);

/**
 * The version of the newest change-log entry: 0 for a realm never written to, then one more
 * for each commit that changed something (a commit that changed nothing adds no entry).
 * @return true on success; false with ATOLL_ERR_INVALID_ARGUMENT, ATOLL_ERR_CLOSED.
 */
bool atoll_realm_version(atoll_realm_t *realm, uint64_t *out_version);

/**
 * Reads the change log: the entries with a version greater than after_version, oldest first,
 * as a JSON array of {"version": n, "timestamp": {"$date": ...}, "instructions": [...]}.
 * Each instruction is an object with "op" ("create", "erase", "set", "listInsert",
 * "listErase", "listSet", "listMove", "listClear"), "class", "primaryKey", "path" (the property,
 * then indexes and property names into embedded objects) and, as the op needs, "value",
 * "index" and "toIndex". See docs/changelog.md.
 * The log is pruned: every 64 commits, entries older than the newest 64 are deleted unless an
 * observer (of any handle or process on the file) has not been delivered them yet.
 * Values are in the log only from the first commit after the file was opened with
 * "changeLogValues": true; an entry recorded before fails the call.
 * @param max_entries at most this many entries; 0 means no limit.
 * @return JSON text (caller owns; free with atoll_free()), or NULL with ATOLL_ERR_CLOSED, or
 *   ATOLL_ERR_INVALID_ARGUMENT when an entry after after_version was recorded without values
 *   (the message names its version: read after it).
 */
char *atoll_realm_changes(atoll_realm_t *realm, uint64_t after_version, size_t max_entries);

/* MARK: - Files */

/**
 * Asked by atoll_realm_open_with() whether to compact the file before the realm is used
 * (Realm's shouldCompactOnLaunch).
 * @param total_bytes the size of the database: its page count times its page size.
 * @param used_bytes the part of it that holds data: (page count - free pages) * page size.
 * @param userdata the options' should_compact_userdata, as given.
 * @return true to compact. The file is compacted only when, besides, no other handle or
 *   process has it open.
 * Runs at most once, during atoll_realm_open_with(), on the thread that called it; it must not
 * call atoll_ functions on the realm being opened (there is no handle yet).
 */
typedef bool (*atoll_should_compact_fn)(uint64_t total_bytes, uint64_t used_bytes, void *userdata);

/** A migration in progress: valid only during the migration callback. */
typedef struct atoll_migration atoll_migration_t;

/**
 * Called by atoll_realm_open_with() when the file's schema version is lower than the
 * configuration's "schemaVersion", after the file's classes were changed to the new schema
 * (see the migration functions below and docs/schema.md). Everything runs in one transaction:
 * returning false (or any error) leaves the file exactly as it was.
 * @param migration the migration; valid until the callback returns.
 * @param userdata the options' migration_userdata, as given.
 * @return true to commit the migration; false to fail the open with ATOLL_ERR_MIGRATION.
 * Runs once, on the thread that called atoll_realm_open_with().
 */
typedef bool (*atoll_migration_fn)(atoll_migration_t *migration, void *userdata);

/**
 * Options of atoll_realm_open_with(). Set size to sizeof(atoll_open_options_t): later versions
 * add fields at the end, and size tells the library which ones the host knows (a host built
 * with the first version, without the migration fields, passes that smaller size and still
 * works). Zero-initialise the struct, then set the fields you use.
 */
typedef struct atoll_open_options {
    size_t size;                            /**< sizeof(atoll_open_options_t) */
    atoll_should_compact_fn should_compact; /**< NULL: never compact at open */
    void *should_compact_userdata;          /**< passed to should_compact; borrowed (used
                                                 only during the call) */
    atoll_migration_fn migration;           /**< NULL: schema changes apply without a callback */
    void *migration_userdata;               /**< passed to migration; borrowed */
} atoll_open_options_t;

/**
 * atoll_realm_open() with options: a should-compact callback asked at open.
 *
 * When options->should_compact is set and the realm is neither read-only nor in memory, it is
 * called once the file is open and its schema checked, with the file's total and used bytes.
 * When it returns true and no other handle (of this process) or process had the file open,
 * the file is compacted as atoll_realm_compact() does before this returns. A writer that got
 * in meanwhile (ATOLL_ERR_BUSY) skips the compaction; it is not an error.
 * @param config_json as for atoll_realm_open().
 * @param options NULL (the same as atoll_realm_open()), or options whose size is
 *   sizeof(atoll_open_options_t). Borrowed: not kept after the call.
 * @return a new handle (caller owns; close with atoll_realm_close()), or NULL with the errors of
 *   atoll_realm_open(); ATOLL_ERR_INVALID_ARGUMENT when options->size is smaller than the
 *   fields this library reads or larger than the struct it knows; ATOLL_ERR_FILE when the
 *   compaction failed (the file is then as it was).
 * Any thread; the callback runs on this one.
 */
atoll_realm_t *atoll_realm_open_with(const char *config_json, const atoll_open_options_t *options);

/**
 * Writes a copy of the realm's committed data to a new file (Realm's writeCopy(toFile:)). An
 * in-memory realm can be copied to a file this way. Other handles and processes may keep
 * reading and writing; the copy is the data as of one moment. A failed copy leaves no file.
 * @param path the new file; it must not exist, nor its "-wal", "-shm" or "-journal" companions.
 * @param compact true writes the data in as few pages as possible (SQLite's VACUUM INTO); false
 *   copies every page as it is, free pages included (SQLite's online backup).
 * @return true on success; false with ATOLL_ERR_ALREADY_IN_WRITE (the handle is in a write
 *   transaction: commit or cancel it first), ATOLL_ERR_FILE (path exists, or cannot be created
 *   or written), ATOLL_ERR_INVALID_ARGUMENT (NULL, empty or non-UTF-8 path), ATOLL_ERR_CLOSED.
 * Any thread.
 */
bool atoll_realm_write_copy(atoll_realm_t *realm, const char *path, bool compact);

/**
 * Writes a compacted copy of the realm to the "path" of a configuration, then checks that the
 * copy opens with that configuration (its "schema" and "schemaVersion", as atoll_realm_open()
 * checks them; schema additions are made in the copy). When it does not, the copy is removed
 * and the call fails with the error the open gave.
 * @param config_json a configuration as for atoll_realm_open(), with a "path" and without
 *   "inMemory": true.
 * @return true on success; false with the errors of atoll_realm_write_copy(), of
 *   atoll_realm_open() (ATOLL_ERR_SCHEMA_MISMATCH, ATOLL_ERR_SCHEMA, ATOLL_ERR_INVALID_JSON...),
 *   ATOLL_ERR_INVALID_ARGUMENT for an in-memory configuration or one without "path".
 * Any thread.
 */
bool atoll_realm_write_copy_to(atoll_realm_t *realm, const char *config_json);

/**
 * Compacts the file: rewrites the data in as few pages as possible (SQLite's VACUUM) and gives
 * the free pages back to the file system. Other handles and processes may keep the realm open;
 * like atoll_realm_begin_write(), it waits (up to "writeTimeoutMs") for another writer.
 * A handle that is reading at that moment can delay the shrinking of the file to a later
 * checkpoint; that is not an error.
 * @return true on success; false with ATOLL_ERR_ALREADY_IN_WRITE, ATOLL_ERR_READ_ONLY,
 *   ATOLL_ERR_BUSY (another writer past "writeTimeoutMs"), ATOLL_ERR_FILE, ATOLL_ERR_CLOSED.
 * Any thread.
 */
bool atoll_realm_compact(atoll_realm_t *realm);

/**
 * Whether the database file of a configuration exists (Realm's fileExists(for:)).
 * @param config_json a configuration as for atoll_realm_open(); only "path" and "inMemory"
 *   matter. An in-memory configuration has no file: false.
 * @param out_exists receives the answer.
 * @return true on success; false with ATOLL_ERR_INVALID_ARGUMENT (NULL, or no "path"),
 *   ATOLL_ERR_INVALID_JSON.
 * Any thread.
 */
bool atoll_realm_file_exists(const char *config_json, bool *out_exists);

/**
 * Deletes the database file of a configuration with its "-wal", "-shm" and "-journal" files
 * (Realm's deleteFiles(for:)). Files that do not exist are not an error.
 *
 * Refused while the realm is open anywhere: by a handle of this process, or by a connection of
 * another process (seen through the lock SQLite keeps in the "-shm" file while a connection is
 * open; the call holds that lock itself until the files are deleted). Connections that keep no
 * "-shm" file (another program opening the database outside WAL mode) cannot be seen; see
 * docs/files.md for the limits.
 * @param config_json a configuration as for atoll_realm_open(); only "path" and "inMemory"
 *   matter. An in-memory configuration has no files: nothing is deleted.
 * @param out_deleted receives whether any file was deleted; may be NULL.
 * @return true on success; false with ATOLL_ERR_BUSY (the realm is open; the message says
 *   whether in this process or which process), ATOLL_ERR_FILE (a file exists but cannot be
 *   deleted), ATOLL_ERR_INVALID_ARGUMENT (NULL, or no "path"), ATOLL_ERR_INVALID_JSON.
 * Any thread.
 */
bool atoll_realm_delete_files(const char *config_json, bool *out_deleted);

/* MARK: - Migrations
 *
 * What a migration callback calls. When the callback runs, every class whose storage changed
 * has its new layout: values of properties that kept their name and type were copied (links
 * keep pointing at the same objects), other new properties hold their defaults. The callback
 * reads the old objects and writes the new ones. Every function below fails with
 * ATOLL_ERR_CLOSED once the callback has returned, and ATOLL_ERR_INVALID_ARGUMENT for a NULL
 * or wrong handle or a NULL string.
 */

/**
 * The realm being migrated, with the new schema and already in the migration's write
 * transaction: create, read, query and delete objects with the usual functions. The migration
 * owns that transaction: atoll_realm_begin_write() on it fails with ATOLL_ERR_ALREADY_IN_WRITE,
 * atoll_realm_commit() and atoll_realm_cancel_write() with ATOLL_ERR_INVALID_ARGUMENT;
 * atoll_realm_close() on it does nothing.
 * Results made on it are results of a realm that closes when the callback returns: from then
 * on they fail with ATOLL_ERR_CLOSED (and must still be freed with atoll_results_free()).
 * @return the handle (borrowed; valid until the callback returns), or NULL on error.
 */
atoll_realm_t *atoll_migration_realm(atoll_migration_t *migration);

/**
 * The schema before the migration.
 * @return JSON text (caller owns; free with atoll_free()), or NULL on error.
 */
char *atoll_migration_old_schema(atoll_migration_t *migration);

/**
 * The schema after the migration.
 * @return JSON text (caller owns; free with atoll_free()), or NULL on error.
 */
char *atoll_migration_new_schema(atoll_migration_t *migration);

/**
 * The schema versions before and after.
 * @param out_old, out_new where to write them; either may be NULL.
 * @return true on success.
 */
bool atoll_migration_versions(atoll_migration_t *migration, uint64_t *out_old, uint64_t *out_new);

/**
 * The objects of a class as they were before the migration, with the old schema's properties.
 * @return JSON text (caller owns; free with atoll_free()): an array of
 *   {"key": <the new object's key>, "object": {...}}; NULL with ATOLL_ERR_NO_SUCH_CLASS (the
 *   old schema has no such class).
 */
char *atoll_migration_old_objects(atoll_migration_t *migration, const char *class_name);

/**
 * Writes properties of a new object, found by the key atoll_migration_old_objects() gave.
 * Setting an int primary key moves the object to that key; links to it follow.
 * @param values_json a JSON object of the properties to set.
 * @return true on success; false with the errors of atoll_object_create(), ATOLL_ERR_NOT_FOUND
 *   (no object with that key).
 */
bool atoll_migration_set(atoll_migration_t *migration, const char *class_name, int64_t key,
                         const char *values_json);

/**
 * Moves the data of property `from` (of the old schema) to property `to` (of the new schema,
 * which the old one lacks). Both must hold the same type (optionality may differ: nulls become
 * the default of a required property).
 * @return true on success; false with ATOLL_ERR_NO_SUCH_PROPERTY, ATOLL_ERR_TYPE_MISMATCH,
 *   ATOLL_ERR_INVALID_ARGUMENT (`from` is still in the new schema, or `to` was in the old one).
 */
bool atoll_migration_rename_property(atoll_migration_t *migration, const char *class_name,
                                     const char *from, const char *to);

/**
 * Deletes every object of a class. A class that the new schema does not have is removed from
 * the file (without this, classes left out of the new schema stay, with their objects).
 * @return true on success; false with ATOLL_ERR_NO_SUCH_CLASS.
 */
bool atoll_migration_delete_data(atoll_migration_t *migration, const char *class_name);

/* MARK: - Objects */

/**
 * Creates an object, or updates the one with the same primary key as update_policy says.
 * Properties left out take their schema default (or null, 0, "", empty list by type) on
 * create, and are left unchanged on update. Links are given as the target's primary key, or as
 * a whole object which is created or updated with the same policy. Embedded objects are given
 * whole and replace the previous ones. Needs a write transaction. A failed call changes nothing.
 * @param realm the handle.
 * @param class_name the class.
 * @param object_json a JSON object of property values.
 * @param update_policy an atoll_update_policy_e.
 * @return the object as stored, as JSON text (caller owns; free with atoll_free()); NULL with
 *   ATOLL_ERR_NOT_IN_WRITE, ATOLL_ERR_INVALID_JSON, ATOLL_ERR_NO_SUCH_CLASS,
 *   ATOLL_ERR_NO_SUCH_PROPERTY, ATOLL_ERR_TYPE_MISMATCH, ATOLL_ERR_MISSING_VALUE,
 *   ATOLL_ERR_DUPLICATE_PRIMARY_KEY, ATOLL_ERR_NOT_FOUND (a link to a missing object),
 *   ATOLL_ERR_INVALID_ARGUMENT, ATOLL_ERR_CLOSED.
 */
char *atoll_object_create(atoll_realm_t *realm, const char *class_name, const char *object_json,
                          int update_policy);

/**
 * atoll_object_create() for jansson hosts.
 * @param object borrowed reference; not modified.
 * @return new reference to the stored object, or NULL (same errors).
 */
struct json_t *atoll_object_create_j(atoll_realm_t *realm, const char *class_name,
                                     struct json_t *object, int update_policy);

/**
 * Creates or updates many objects of one class in one call; all or nothing: when one fails,
 * none of them is kept and the error names the index of the one that failed.
 * @param array_json a JSON array of objects.
 * @param out_count receives how many objects were written; may be NULL.
 * @return true on success; false with the errors of atoll_object_create().
 */
bool atoll_objects_create_many(atoll_realm_t *realm, const char *class_name,
                               const char *array_json, int update_policy, size_t *out_count);

/**
 * atoll_objects_create_many() for jansson hosts.
 * @param array borrowed reference to a JSON array; not modified.
 */
bool atoll_objects_create_many_j(atoll_realm_t *realm, const char *class_name,
                                 struct json_t *array, int update_policy, size_t *out_count);

/**
 * Reads the object with a primary key.
 * @param primary_key_json the key as JSON: 5, "abc", {"$oid": "..."}, {"$uuid": "..."}.
 * @return the object as JSON text (caller owns; free with atoll_free()); NULL with
 *   ATOLL_ERR_NOT_FOUND when there is no such object, or ATOLL_ERR_INVALID_JSON,
 *   ATOLL_ERR_NO_SUCH_CLASS, ATOLL_ERR_TYPE_MISMATCH (a key of the wrong type; also for a
 *   class without primary key), ATOLL_ERR_CLOSED.
 */
char *atoll_object_get(atoll_realm_t *realm, const char *class_name, const char *primary_key_json);

/**
 * atoll_object_get() for jansson hosts.
 * @param primary_key borrowed reference.
 * @return new reference, or NULL (same errors).
 */
struct json_t *atoll_object_get_j(atoll_realm_t *realm, const char *class_name,
                                  struct json_t *primary_key);

/**
 * Deletes the object with a primary key, with the embedded objects it owns. Links to it become
 * null and lists drop it. Needs a write transaction.
 * @return true on success; false with ATOLL_ERR_NOT_FOUND, ATOLL_ERR_NOT_IN_WRITE,
 *   ATOLL_ERR_INVALID_JSON, ATOLL_ERR_NO_SUCH_CLASS, ATOLL_ERR_TYPE_MISMATCH, ATOLL_ERR_CLOSED.
 */
bool atoll_object_delete(atoll_realm_t *realm, const char *class_name, const char *primary_key_json);

/**
 * atoll_object_delete() for jansson hosts.
 * @param primary_key borrowed reference.
 */
bool atoll_object_delete_j(atoll_realm_t *realm, const char *class_name, struct json_t *primary_key);

/* MARK: - Collection elements
 *
 * Element operations on a list, set or dictionary property of one object (Realm's
 * List.insert/replace/remove/move, MutableSet.insert/remove, Map[key] = value), each atomic and
 * recorded as its own change-log instruction, so that observers see which element changed.
 * All need a write transaction. The object is named by class_name and primary_key_json (its
 * row key for classes without a primary key); values are JSON as in atoll_object_create():
 * a link as the target's primary key (or the whole target object, which is then created), an
 * embedded object as an object (it belongs to the collection; the one it replaces is deleted).
 * Errors common to all: ATOLL_ERR_INVALID_ARGUMENT (NULL arguments, not a collection of that
 * kind, an index out of range, a bad dictionary key), ATOLL_ERR_INVALID_JSON,
 * ATOLL_ERR_NOT_IN_WRITE, ATOLL_ERR_NO_SUCH_CLASS, ATOLL_ERR_NO_SUCH_PROPERTY,
 * ATOLL_ERR_NOT_FOUND (the object, or a linked object), ATOLL_ERR_TYPE_MISMATCH,
 * ATOLL_ERR_MISSING_VALUE (null where the collection cannot hold it),
 * ATOLL_ERR_DUPLICATE_PRIMARY_KEY (a linked object given whole that exists), ATOLL_ERR_CLOSED.
 * A failed call changes nothing. */

/** Adds delta to an int property (a counter): the change log records an addInteger, so that
 *  sync adds concurrent increments up (docs/changelog.md). In a write transaction.
 *  @return true on success; false with ATOLL_ERR_INVALID_ARGUMENT (not an int property, or one
 *  that is null; an overflow), ATOLL_ERR_NOT_IN_WRITE, ATOLL_ERR_NO_SUCH_CLASS,
 *  ATOLL_ERR_NO_SUCH_PROPERTY, ATOLL_ERR_NOT_FOUND, ATOLL_ERR_TYPE_MISMATCH, ATOLL_ERR_CLOSED. */
bool atoll_object_add_integer(atoll_realm_t *realm, const char *class_name, const char *primary_key_json,
                              const char *property, int64_t delta);

/** Inserts value_json into a list at index (0...count): the elements from index on move up.
 *  @return true on success; false with the errors above. */
bool atoll_list_insert(atoll_realm_t *realm, const char *class_name, const char *primary_key_json,
                       const char *property, size_t index, const char *value_json);

/** Replaces the list element at index (0..count-1) with value_json.
 *  @return true on success; false with the errors above. */
bool atoll_list_set(atoll_realm_t *realm, const char *class_name, const char *primary_key_json,
                    const char *property, size_t index, const char *value_json);

/** Removes the list element at index (0..count-1): the elements after it move down.
 *  @return true on success; false with the errors above. */
bool atoll_list_erase(atoll_realm_t *realm, const char *class_name, const char *primary_key_json,
                      const char *property, size_t index);

/** Moves the list element at from_index to to_index (both 0..count-1).
 *  @return true on success; false with the errors above. */
bool atoll_list_move(atoll_realm_t *realm, const char *class_name, const char *primary_key_json,
                     const char *property, size_t from_index, size_t to_index);

/** Adds value_json to a set unless an equal element is in it.
 *  @param out_inserted receives whether it was added; may be NULL.
 *  @return true on success; false with the errors above. */
bool atoll_set_insert(atoll_realm_t *realm, const char *class_name, const char *primary_key_json,
                      const char *property, const char *value_json, bool *out_inserted);

/** Removes the element equal to value_json from a set (a link to a missing object is in none;
 *  a linked object given whole is looked up by its primary key, never created).
 *  @param out_erased receives whether there was one; may be NULL.
 *  @return true on success; false with the errors above. */
bool atoll_set_erase(atoll_realm_t *realm, const char *class_name, const char *primary_key_json,
                     const char *property, const char *value_json, bool *out_erased);

/** Sets key of a dictionary to value_json, adding the key or replacing its value. Keys are
 *  non-empty, without '.', NUL or a leading '$'.
 *  @return true on success; false with the errors above. */
bool atoll_dictionary_set(atoll_realm_t *realm, const char *class_name, const char *primary_key_json,
                          const char *property, const char *key, const char *value_json);

/** Removes key from a dictionary.
 *  @param out_erased receives whether it was there; may be NULL.
 *  @return true on success; false with the errors above. */
bool atoll_dictionary_erase(atoll_realm_t *realm, const char *class_name, const char *primary_key_json,
                            const char *property, const char *key, bool *out_erased);

/* MARK: - Results */

/**
 * Runs a query (Realm Query Language, see docs/query-language.md) over one class.
 * The query is checked here; the objects are read when asked for, each call seeing the data as
 * of that call (inside a write transaction, including its uncommitted writes).
 * @param rql the query; NULL or "" means all objects ("TRUEPREDICATE").
 * @param args_json NULL, or a JSON array of the values for $0, $1, ...
 * @return a new handle (caller owns; free with atoll_results_free()), or NULL with
 *   ATOLL_ERR_QUERY_SYNTAX, ATOLL_ERR_QUERY_INVALID, ATOLL_ERR_NO_SUCH_CLASS,
 *   ATOLL_ERR_INVALID_JSON, ATOLL_ERR_CLOSED.
 */
atoll_results_t *atoll_results_query(atoll_realm_t *realm, const char *class_name,
                                     const char *rql, const char *args_json);

/**
 * atoll_results_query() for jansson hosts.
 * @param args NULL or a borrowed reference to a JSON array.
 */
atoll_results_t *atoll_results_query_j(atoll_realm_t *realm, const char *class_name,
                                       const char *rql, struct json_t *args);

/**
 * How many objects match now.
 * @return true on success; false with ATOLL_ERR_INVALID_ARGUMENT, ATOLL_ERR_CLOSED.
 */
bool atoll_results_count(atoll_results_t *results, size_t *out_count);

/**
 * Reads matching objects, in order, from offset on.
 * @param limit at most this many; 0 means all from offset on.
 * @return a JSON array (caller owns; free with atoll_free()); an offset past the end gives
 *   "[]"; NULL with ATOLL_ERR_INVALID_ARGUMENT, ATOLL_ERR_CLOSED.
 */
char *atoll_results_json(atoll_results_t *results, size_t offset, size_t limit);

/**
 * atoll_results_json() for jansson hosts.
 * @return new reference to a JSON array, or NULL (same errors).
 */
struct json_t *atoll_results_json_j(atoll_results_t *results, size_t offset, size_t limit);

/**
 * Deletes every object that matches now, as atoll_object_delete() would. Needs a write
 * transaction.
 * @param out_count receives how many were deleted; may be NULL.
 * @return true on success; false with ATOLL_ERR_NOT_IN_WRITE, ATOLL_ERR_CLOSED.
 */
bool atoll_results_delete_all(atoll_results_t *results, size_t *out_count);

/**
 * Frees results (live or frozen).
 * @param results the handle; NULL is a no-op. Any thread.
 */
void atoll_results_free(atoll_results_t *results);

/**
 * A frozen copy of results: the objects that match in the realm's snapshot now, read with
 * atoll_results_count() and atoll_results_json() from any thread; it never changes, and stays
 * readable after the realm closes. It cannot be observed or deleted from (ATOLL_ERR_INVALID_ARGUMENT).
 * @return a new results handle (caller owns; free with atoll_results_free()), or NULL with
 *   ATOLL_ERR_INVALID_ARGUMENT, ATOLL_ERR_CLOSED.
 */
atoll_results_t *atoll_results_freeze(atoll_results_t *results);

/* MARK: - Notifications (docs/notifications.md) */

/** A registered change callback: freeing it unregisters. */
typedef struct atoll_token atoll_token_t;

/** Frees what a callback's userdata holds; called once, after the callback's last call. */
typedef void (*atoll_free_userdata_fn)(void *userdata);

/**
 * Receives changes.
 * @param userdata as given when registering.
 * @param changes_json the changes (borrowed: valid during the call only).
 * Called on the realm's notifier thread ("notifications": "thread") or inside
 * atoll_realm_deliver_notifications() on the host's thread ("host"), never while the realm's
 * lock is held: it may call any atoll_ function, read the realm (which shows the state the
 * change describes), write to it, and free any token, its own included.
 */
typedef void (*atoll_changes_fn)(void *userdata, const char *changes_json);

/**
 * Observes the results of a query (in its sort order). The first call gives the initial state
 * ({"initial": true, "count": n, and empty lists}); each later one, after commits that changed
 * the results, gives {"initial": false, "deletions": [indices in the old results],
 * "insertions": [indices in the new], "modifications": [indices in the new], "moves":
 * [{"from": old index, "to": new index}], "deletedKeys", "insertedKeys", "modifiedKeys":
 * [primary keys (row keys for classes without one)], "count": n}. A moved object is also a
 * deletion (old index) and an insertion (new index), as in realm-core; the keys name only the
 * objects that really left, entered or changed. Commits that change nothing of the results
 * call nothing. When the change cannot be computed (another handle or process migrated the
 * file so that the query no longer runs, a read failed), the callback gets the change with
 * "error": {"code": status code, "message": text} and empty lists, once: it is not called
 * again (atoll_object_observe() and atoll_collection_observe() do the same).
 * @param key_paths_json NULL (any property of the objects, and of the objects they link to up
 *   to three links away) or a JSON array of key paths, e.g. ["name", "dogs.name"]: only changes
 *   on those count as modifications (insertions and deletions always count).
 * @param fn the callback; userdata is passed to it; free_userdata (may be NULL) is called with
 *   userdata once, after the last call (on failure, at once).
 * @return a new token (caller owns; free with atoll_token_free()), or NULL with
 *   ATOLL_ERR_INVALID_ARGUMENT (NULL fn, bad key paths, frozen results), ATOLL_ERR_INVALID_JSON,
 *   ATOLL_ERR_ALREADY_IN_WRITE (observers are added outside write transactions), ATOLL_ERR_CLOSED.
 */
atoll_token_t *atoll_results_observe(atoll_results_t *results, const char *key_paths_json,
                                     atoll_changes_fn fn, void *userdata, atoll_free_userdata_fn free_userdata);

/**
 * Observes one object: after commits that changed it, {"deleted": false, "changedProperties":
 * [names], "old": {name: value before}, "new": {name: value after}} (only the changed
 * properties); when it is deleted, {"deleted": true, "changedProperties": [], "old": {the
 * object as last seen}, "new": {}}, and nothing more after that. No initial call.
 * A link property counts as changed when the link changes, when the linked object changes
 * (as key_paths_json allows), or when the linked object is deleted (the link becomes null).
 * @param primary_key_json the object's primary key as JSON (e.g. "5", "\"rex\"",
 *   "{\"$oid\": \"...\"}"); for classes without one, its row key.
 * @param key_paths_json as for atoll_results_observe().
 * @return a new token, or NULL with ATOLL_ERR_NO_SUCH_CLASS, ATOLL_ERR_NOT_FOUND,
 *   ATOLL_ERR_TYPE_MISMATCH, ATOLL_ERR_INVALID_ARGUMENT, ATOLL_ERR_INVALID_JSON,
 *   ATOLL_ERR_ALREADY_IN_WRITE, ATOLL_ERR_CLOSED.
 */
atoll_token_t *atoll_object_observe(atoll_realm_t *realm, const char *class_name, const char *primary_key_json,
                                    const char *key_paths_json, atoll_changes_fn fn, void *userdata,
                                    atoll_free_userdata_fn free_userdata);

/**
 * Observes a list, set or dictionary property of one object: an initial call, then changes
 * shaped as for results ({"initial", "deleted", "deletions", "insertions", "modifications",
 * "moves", "deletedKeys", "insertedKeys", "modifiedKeys", "count"}). For dictionaries the
 * indices are in key order and the keys are the dictionary's keys; for lists and sets the keys
 * are the elements' values (links as primary keys). "deleted": true when the object was
 * deleted (the last call).
 * @param key_paths_json for collections of links: what counts as a change of a linked object
 *   (NULL: any property); must be NULL for other collections.
 * @return a new token, or NULL with ATOLL_ERR_NO_SUCH_PROPERTY, ATOLL_ERR_INVALID_ARGUMENT
 *   (not a collection), and the errors of atoll_object_observe().
 */
atoll_token_t *atoll_collection_observe(atoll_realm_t *realm, const char *class_name, const char *primary_key_json,
                                        const char *property, const char *key_paths_json, atoll_changes_fn fn,
                                        void *userdata, atoll_free_userdata_fn free_userdata);

/**
 * Observes the realm: after each delivery that covers commits (of this handle, another handle
 * or another process), {"previousVersion": v0, "version": v1, "classes": [names of the classes
 * whose objects changed]}. Several commits may be delivered in one call.
 * @return a new token, or NULL with ATOLL_ERR_INVALID_ARGUMENT, ATOLL_ERR_ALREADY_IN_WRITE,
 *   ATOLL_ERR_CLOSED.
 */
atoll_token_t *atoll_realm_observe(atoll_realm_t *realm, atoll_changes_fn fn, void *userdata,
                                   atoll_free_userdata_fn free_userdata);

/**
 * Unregisters a callback. When it returns, the callback is not running on another thread and
 * will not be called again (inside its own callback, the token may be freed: free_userdata
 * then runs when the callback returns). Tokens outlive their realm: free them after closing it.
 * @param token NULL is a no-op. Any thread.
 */
void atoll_token_free(atoll_token_t *token);

/**
 * Moves the realm's snapshot to the newest committed data (Realm's refresh()). Observers are
 * told of the changes at the next delivery. Inside a write transaction it does nothing.
 * @return true on success; false with ATOLL_ERR_INVALID_ARGUMENT, ATOLL_ERR_CLOSED.
 */
bool atoll_realm_refresh(atoll_realm_t *realm);

/**
 * For "notifications": "host": a descriptor that becomes readable when notifications are due.
 * Poll it for reading in the host's event loop (select, poll, epoll, asyncio's add_reader,
 * GLib, libuv) and call atoll_realm_deliver_notifications() when it is. Do not read or close
 * it; it is valid until the realm is closed (stop polling before closing).
 * @return the descriptor, or -1 with ATOLL_ERR_INVALID_ARGUMENT (the realm delivers on its own
 *   thread), ATOLL_ERR_CLOSED.
 */
int atoll_realm_notification_fd(atoll_realm_t *realm);

/**
 * Refreshes the realm and calls, on this thread, the callbacks of every due notification
 * (for "host" delivery; with "thread" the notifier thread does this). Inside a write
 * transaction it delivers nothing (the commit makes the notifications due again).
 * @return true on success; false with ATOLL_ERR_INVALID_ARGUMENT (NULL, or a realm opened with
 *   "thread" delivery), ATOLL_ERR_CLOSED.
 */
bool atoll_realm_deliver_notifications(atoll_realm_t *realm);

/* MARK: - Sync (docs/sync.md, docs/protocol.md, docs/app-api.md)
 *
 * An app on an atoll-server, its users, and synced realms. Calls that talk to the server block
 * the calling thread until they are done (call them from a worker thread when the host must
 * not block); state changes and errors arrive through callbacks, on library threads. Every
 * handle here is freed with its own _free function; freeing never blocks on the network. */

/** An app on a server: its id, its users (kept in a metadata file). */
typedef struct atoll_app atoll_app_t;
/** A logged-in (or logged-out) user of an app. */
typedef struct atoll_user atoll_user_t;
/** The sync of one synced realm file: state, pause/resume, waits. */
typedef struct atoll_sync_session atoll_sync_session_t;
/** A synced realm being opened in the background (AsyncOpen / AutoOpen). */
typedef struct atoll_async_open atoll_async_open_t;

/**
 * Opens an app: {"appId": "default", "baseUrl": "http://127.0.0.1:9090", "metadataDir": ".",
 * "requestTimeoutMs": 60000, "connectTimeoutMs": 10000} (only appId is required). Users logged
 * in before (in metadataDir) are still logged in. Two handles with the same appId, baseUrl and
 * metadataDir share one app (its users and connections), as Realm's App(id:) does.
 * @return the app (free with atoll_app_free), or NULL with ATOLL_ERR_INVALID_ARGUMENT,
 *   ATOLL_ERR_INVALID_JSON, ATOLL_ERR_FILE (the metadata directory).
 */
atoll_app_t *atoll_app_new(const char *app_config_json);

/** Frees an app handle (users and realms opened through it stay usable). NULL is allowed. */
void atoll_app_free(atoll_app_t *app);

/**
 * Logs a user in and makes it the current user. Blocks until the server answers.
 * @param credentials_json {"provider": "anonymous"}, {"provider": "emailPassword", "email",
 *   "password"}, {"provider": "apiKey", "key"} or {"provider": "jwt", "token"}.
 * @return the user (free with atoll_user_free), or NULL with ATOLL_ERR_AUTH (refused; the
 *   message has the server's reason), ATOLL_ERR_NETWORK, ATOLL_ERR_TIMEOUT,
 *   ATOLL_ERR_INVALID_ARGUMENT.
 */
atoll_user_t *atoll_app_login(atoll_app_t *app, const char *credentials_json);

/**
 * Registers an email/password user (then log in with it). Blocks.
 * @return true; false with ATOLL_ERR_AUTH (e.g. the email is taken: HTTP 409 in the message),
 *   ATOLL_ERR_NETWORK, ATOLL_ERR_TIMEOUT, ATOLL_ERR_INVALID_ARGUMENT.
 */
bool atoll_app_register_email(atoll_app_t *app, const char *email, const char *password);

/**
 * The current user (the last logged in or switched to, if still logged in).
 * @return a new handle, or NULL with no error when nobody is logged in (or NULL with
 *   ATOLL_ERR_INVALID_ARGUMENT).
 */
atoll_user_t *atoll_app_current_user(atoll_app_t *app);

/**
 * Every user of the app's metadata file, most recently used first: a JSON array of
 * {"id", "state": "loggedIn" | "loggedOut", "provider", "profile"}; free with atoll_free.
 * @return the text, or NULL with ATOLL_ERR_INVALID_ARGUMENT.
 */
char *atoll_app_all_users(atoll_app_t *app);

/** Makes a logged-in user the current one. @return true; false with ATOLL_ERR_AUTH (logged
 *  out), ATOLL_ERR_INVALID_ARGUMENT. */
bool atoll_app_switch_user(atoll_app_t *app, atoll_user_t *user);

/**
 * Receives every sync error of the app's sessions: fn gets {"code": "writeRejected",
 * "codeNumber": 231, "message", "fatal": false, "action": "warning", "compensatingWrites":
 * [{"class", "primaryKey", "reason"}], "path": the realm file, when a session is concerned}.
 * Codes are Realm's SyncError codes where they apply (connectionFailed, timeout, authFailed,
 * clientReset, writeRejected, permissionDenied, invalidFlexibleSyncSubscriptions, ...; the
 * server's are listed in docs/protocol.md, the client's own — connectionFailed, timeout,
 * authFailed, clientReset, clientInternalError — in docs/sync.md). Called on a library thread.
 * @return a token (free with atoll_token_free to stop), or NULL with ATOLL_ERR_INVALID_ARGUMENT
 *   (free_userdata is then called at once).
 */
atoll_token_t *atoll_app_observe_errors(atoll_app_t *app, atoll_changes_fn fn, void *userdata,
                                        atoll_free_userdata_fn free_userdata);

/** The user as JSON: {"id", "state", "provider", "profile"}; free with atoll_free. NULL with
 *  ATOLL_ERR_INVALID_ARGUMENT. */
char *atoll_user_json(atoll_user_t *user);

/** Logs a user out: its refresh token is revoked on the server (best effort; works offline),
 *  its sync sessions stop. @return true; false with ATOLL_ERR_INVALID_ARGUMENT. */
bool atoll_user_logout(atoll_user_t *user);

/** Logs a user out and removes it from the metadata file. Blocks. */
bool atoll_user_remove(atoll_user_t *user);

/** Deletes the user on the server (its identities, keys and tokens), then removes it here.
 *  Blocks. @return true; false with ATOLL_ERR_AUTH, ATOLL_ERR_NETWORK, ATOLL_ERR_TIMEOUT. */
bool atoll_user_delete(atoll_user_t *user);

/** Frees a user handle (the user stays logged in). NULL is allowed. */
void atoll_user_free(atoll_user_t *user);

/**
 * Opens a synced realm. config_json is atoll_realm_open()'s configuration plus
 * "sync": {"mode": "flexible" | "partition", "partitionValue": any JSON value (partition),
 * "initialSubscriptions": [{"name", "class", "query", "args"}], "rerunOnOpen": false,
 * "downloadBeforeOpen": "never" | "once" | "always", "timeoutMs": 30000,
 * "offlineFallback": false, "clientResetMode": "manual" | "discardUnsyncedChanges" |
 * "recoverUnsyncedChanges" (default) | "recoverOrDiscardUnsyncedChanges"}.
 * With "downloadBeforeOpen" other than "never" it blocks until the server's data is in the
 * file ("once": only until the file has downloaded once); with "offlineFallback" a server that
 * cannot be reached in time opens the data on the device instead of failing.
 * The realm is an ordinary realm handle (atoll_realm_close closes it; the session stops with
 * the last handle of the file).
 * @return the realm, or NULL with ATOLL_ERR_TIMEOUT, ATOLL_ERR_NETWORK, ATOLL_ERR_AUTH,
 *   ATOLL_ERR_SYNC, and atoll_realm_open()'s errors.
 */
atoll_realm_t *atoll_realm_open_synced(atoll_user_t *user, const char *config_json);

/**
 * Opens a synced realm in the background, downloading first (AsyncOpen; with
 * "offlineFallback": true, AutoOpen). fn gets {"state": "connecting"}, {"state":
 * "waitingForUser"} (the user is logged out), {"state": "progress", "transferred",
 * "transferable", "estimate": 0..1}, then {"state": "open"} (take the realm with
 * atoll_async_open_take_realm) or {"state": "error", "code", "status": "ATOLL_ERR_TIMEOUT"...,
 * "message"}. Called on a library thread.
 * @return the task (free with atoll_async_open_free), or NULL with ATOLL_ERR_INVALID_ARGUMENT,
 *   ATOLL_ERR_INVALID_JSON (free_userdata is then called at once).
 */
atoll_async_open_t *atoll_realm_async_open(atoll_user_t *user, const char *config_json, atoll_changes_fn fn,
                                           void *userdata, atoll_free_userdata_fn free_userdata);

/** The realm an async open opened (once it reported "open"); once only.
 *  @return the realm, or NULL with ATOLL_ERR_INVALID_ARGUMENT (not open yet, or taken). */
atoll_realm_t *atoll_async_open_take_realm(atoll_async_open_t *task);

/** Frees the task; an open still running is cancelled (fn is not called after this returns
 *  a "state" other than what was under way). NULL is allowed. */
void atoll_async_open_free(atoll_async_open_t *task);

/**
 * The newest subscription set of a flexible-sync realm: {"version", "state": "pending" |
 * "bootstrapping" | "complete" | "error" | "superseded", "error": the server's reason or null,
 * "subscriptions": [{"name", "class", "query", "args"}]}; free with atoll_free.
 * @return the text, or NULL with ATOLL_ERR_INVALID_ARGUMENT (not a synced realm), ATOLL_ERR_CLOSED.
 */
char *atoll_subscriptions_json(atoll_realm_t *realm);

/**
 * Makes a new subscription set version in one batch: {"add": [{"name", "class", "query",
 * "args"}], "update": [{"name", "query", "args"}], "remove": ["name"], "removeClasses":
 * ["Class"], "removeAll": false}; removals first, then updates, then adds. It is sent to the
 * server at once; wait for it with atoll_subscriptions_wait().
 * @param out_version the new version (may be NULL).
 * @return true; false with ATOLL_ERR_SUBSCRIPTION_EXISTS (an added name exists),
 *   ATOLL_ERR_NOT_FOUND (an updated name does not), ATOLL_ERR_INVALID_ARGUMENT, ATOLL_ERR_SYNC
 *   (a partition-sync realm has no subscriptions).
 */
bool atoll_subscriptions_update(atoll_realm_t *realm, const char *update_json, uint64_t *out_version);

/**
 * Waits until a subscription version is complete (its objects are in the realm).
 * @return true; false with ATOLL_ERR_SUBSCRIPTION (the server refused it: SORT/LIMIT, a field
 *   that is not queryable...; the message has the reason), ATOLL_ERR_TIMEOUT.
 */
bool atoll_subscriptions_wait(atoll_realm_t *realm, uint64_t version, int timeout_ms);

/** The sync session of a synced realm (free with atoll_sync_session_free).
 *  @return the session, or NULL with ATOLL_ERR_INVALID_ARGUMENT (not synced), ATOLL_ERR_CLOSED. */
atoll_sync_session_t *atoll_realm_sync_session(atoll_realm_t *realm);

/** {"state": "active" | "paused" | "inactive", "connection": "disconnected" | "connecting" |
 *  "connected", "path", "user"}; free with atoll_free. */
char *atoll_sync_session_state_json(atoll_sync_session_t *session);

/** Stops talking to the server (local writes go on and wait to be uploaded). */
bool atoll_sync_session_pause(atoll_sync_session_t *session);

/** Syncs again after a pause (what was written meanwhile is uploaded). */
bool atoll_sync_session_resume(atoll_sync_session_t *session);

/** Drops the connection and connects again at once (skipping any backoff). */
bool atoll_sync_session_reconnect(atoll_sync_session_t *session);

/** Waits until every local change committed before the call is on the server.
 *  @return true; false with ATOLL_ERR_TIMEOUT, ATOLL_ERR_SYNC (the session stopped). */
bool atoll_sync_session_wait_for_upload(atoll_sync_session_t *session, int timeout_ms);

/** Waits until everything the server had when the call was made is in the realm.
 *  @return true; false with ATOLL_ERR_TIMEOUT, ATOLL_ERR_SYNC (the session stopped). */
bool atoll_sync_session_wait_for_download(atoll_sync_session_t *session, int timeout_ms);

/**
 * Observes a session: fn gets {"event": "state", "state"}, {"event": "connection",
 * "connection"} and {"event": "progress", "direction": "upload" | "download", "transferred",
 * "transferable", "estimate": 0..1}. Called on a library thread.
 * @return a token (free with atoll_token_free), or NULL with ATOLL_ERR_INVALID_ARGUMENT.
 */
atoll_token_t *atoll_sync_session_observe(atoll_sync_session_t *session, atoll_changes_fn fn, void *userdata,
                                          atoll_free_userdata_fn free_userdata);

/** Frees a session handle (the session goes on while its realm is open). NULL is allowed. */
void atoll_sync_session_free(atoll_sync_session_t *session);

/**
 * Copies a realm's data between local and synced (Realm's writeCopy(configuration:); the name
 * atoll_realm_write_copy is the plain file copy). With a user: into a new synced realm
 * (config_json as for atoll_realm_open_synced, whose subscriptions must cover the objects;
 * they are written as new local writes and uploaded before the call returns if the server can
 * be reached within "timeoutMs", else when the copy is next opened synced). Without (NULL):
 * out as a local realm (config_json as for atoll_realm_open) with no sync metadata.
 * @return true; false with ATOLL_ERR_INVALID_ARGUMENT (the target has objects), ATOLL_ERR_FILE,
 *   and the errors of opening.
 */
bool atoll_realm_write_copy_synced(atoll_realm_t *realm, const char *config_json, atoll_user_t *user_or_null);

#ifdef __cplusplus
}
#endif

#endif /* ATOLL_H */
