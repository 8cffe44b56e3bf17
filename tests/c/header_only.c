/*
 * header_only.c — a build-only check that include/atoll.h stands on its own: this file includes
 * nothing else and is compiled as ISO C11 with -Wall -Wextra -Werror -pedantic (see
 * tests/c/CMakeLists.txt). It also pins the ABI the header promises to keep: the status codes
 * keep their numbers, and every function keeps its signature (a signature that must change gets
 * a _v2 sibling, so this table only ever grows).
 */
#include "atoll.h"
#include "atoll.h" /* the include guard works */

_Static_assert(ATOLL_VERSION_NUMBER >= 1000, "ATOLL_VERSION_NUMBER is MAJOR*1000000+MINOR*1000+PATCH");

_Static_assert(ATOLL_OK == 0, "status codes are never renumbered");
_Static_assert(ATOLL_ERR_INVALID_ARGUMENT == 1, "status codes are never renumbered");
_Static_assert(ATOLL_ERR_INVALID_JSON == 2, "status codes are never renumbered");
_Static_assert(ATOLL_ERR_SCHEMA == 3, "status codes are never renumbered");
_Static_assert(ATOLL_ERR_SCHEMA_MISMATCH == 4, "status codes are never renumbered");
_Static_assert(ATOLL_ERR_NOT_FOUND == 5, "status codes are never renumbered");
_Static_assert(ATOLL_ERR_DUPLICATE_PRIMARY_KEY == 6, "status codes are never renumbered");
_Static_assert(ATOLL_ERR_QUERY_SYNTAX == 7, "status codes are never renumbered");
_Static_assert(ATOLL_ERR_QUERY_INVALID == 8, "status codes are never renumbered");
_Static_assert(ATOLL_ERR_NOT_IN_WRITE == 9, "status codes are never renumbered");
_Static_assert(ATOLL_ERR_ALREADY_IN_WRITE == 10, "status codes are never renumbered");
_Static_assert(ATOLL_ERR_FILE == 11, "status codes are never renumbered");
_Static_assert(ATOLL_ERR_CLOSED == 12, "status codes are never renumbered");
_Static_assert(ATOLL_ERR_READ_ONLY == 13, "status codes are never renumbered");
_Static_assert(ATOLL_ERR_BUSY == 14, "status codes are never renumbered");
_Static_assert(ATOLL_ERR_NO_SUCH_CLASS == 15, "status codes are never renumbered");
_Static_assert(ATOLL_ERR_NO_SUCH_PROPERTY == 16, "status codes are never renumbered");
_Static_assert(ATOLL_ERR_TYPE_MISMATCH == 17, "status codes are never renumbered");
_Static_assert(ATOLL_ERR_MISSING_VALUE == 18, "status codes are never renumbered");
_Static_assert(ATOLL_ERR_INTERNAL == 19, "status codes are never renumbered");
_Static_assert(ATOLL_ERR_MIGRATION == 20, "status codes are never renumbered");
_Static_assert(ATOLL_UPDATE_ERROR == 0 && ATOLL_UPDATE_MODIFIED == 1 && ATOLL_UPDATE_ALL == 2,
               "update policies are never renumbered");

/* Every function, with the type it had when it was published. */
struct atoll_abi_v0 {
    int (*libversion_number)(void);
    const char *(*libversion)(void);
    bool (*last_error)(atoll_error_t *);
    const char *(*status_name)(int);
    void (*free)(void *);
    atoll_realm_t *(*realm_open)(const char *);
    void (*realm_close)(atoll_realm_t *);
    bool (*realm_begin_write)(atoll_realm_t *);
    bool (*realm_commit)(atoll_realm_t *);
    bool (*realm_cancel_write)(atoll_realm_t *);
    bool (*realm_is_in_write)(atoll_realm_t *, bool *);
    char *(*realm_schema)(atoll_realm_t *);
    bool (*realm_schema_version)(atoll_realm_t *, uint64_t *);
    bool (*realm_version)(atoll_realm_t *, uint64_t *);
    char *(*realm_changes)(atoll_realm_t *, uint64_t, size_t);
    char *(*object_create)(atoll_realm_t *, const char *, const char *, int);
    struct json_t *(*object_create_j)(atoll_realm_t *, const char *, struct json_t *, int);
    bool (*objects_create_many)(atoll_realm_t *, const char *, const char *, int, size_t *);
    bool (*objects_create_many_j)(atoll_realm_t *, const char *, struct json_t *, int, size_t *);
    char *(*object_get)(atoll_realm_t *, const char *, const char *);
    struct json_t *(*object_get_j)(atoll_realm_t *, const char *, struct json_t *);
    bool (*object_delete)(atoll_realm_t *, const char *, const char *);
    bool (*object_delete_j)(atoll_realm_t *, const char *, struct json_t *);
    atoll_results_t *(*results_query)(atoll_realm_t *, const char *, const char *, const char *);
    atoll_results_t *(*results_query_j)(atoll_realm_t *, const char *, const char *,
                                        struct json_t *);
    bool (*results_count)(atoll_results_t *, size_t *);
    char *(*results_json)(atoll_results_t *, size_t, size_t);
    struct json_t *(*results_json_j)(atoll_results_t *, size_t, size_t);
    bool (*results_delete_all)(atoll_results_t *, size_t *);
    void (*results_free)(atoll_results_t *);
    atoll_realm_t *(*realm_open_with)(const char *, const atoll_open_options_t *);
    bool (*realm_write_copy)(atoll_realm_t *, const char *, bool);
    bool (*realm_write_copy_to)(atoll_realm_t *, const char *);
    bool (*realm_compact)(atoll_realm_t *);
    bool (*realm_file_exists)(const char *, bool *);
    bool (*realm_delete_files)(const char *, bool *);
    atoll_realm_t *(*migration_realm)(atoll_migration_t *);
    char *(*migration_old_schema)(atoll_migration_t *);
    char *(*migration_new_schema)(atoll_migration_t *);
    bool (*migration_versions)(atoll_migration_t *, uint64_t *, uint64_t *);
    char *(*migration_old_objects)(atoll_migration_t *, const char *);
    bool (*migration_set)(atoll_migration_t *, const char *, int64_t, const char *);
    bool (*migration_rename_property)(atoll_migration_t *, const char *, const char *, const char *);
    bool (*migration_delete_data)(atoll_migration_t *, const char *);
};

extern const struct atoll_abi_v0 atoll_header_only_abi;
const struct atoll_abi_v0 atoll_header_only_abi = {
    atoll_libversion_number,
    atoll_libversion,
    atoll_last_error,
    atoll_status_name,
    atoll_free,
    atoll_realm_open,
    atoll_realm_close,
    atoll_realm_begin_write,
    atoll_realm_commit,
    atoll_realm_cancel_write,
    atoll_realm_is_in_write,
    atoll_realm_schema,
    atoll_realm_schema_version,
    atoll_realm_version,
    atoll_realm_changes,
    atoll_object_create,
    atoll_object_create_j,
    atoll_objects_create_many,
    atoll_objects_create_many_j,
    atoll_object_get,
    atoll_object_get_j,
    atoll_object_delete,
    atoll_object_delete_j,
    atoll_results_query,
    atoll_results_query_j,
    atoll_results_count,
    atoll_results_json,
    atoll_results_json_j,
    atoll_results_delete_all,
    atoll_results_free,
    atoll_realm_open_with,
    atoll_realm_write_copy,
    atoll_realm_write_copy_to,
    atoll_realm_compact,
    atoll_realm_file_exists,
    atoll_realm_delete_files,
    atoll_migration_realm,
    atoll_migration_old_schema,
    atoll_migration_new_schema,
    atoll_migration_versions,
    atoll_migration_old_objects,
    atoll_migration_set,
    atoll_migration_rename_property,
    atoll_migration_delete_data,
};

/* The types a host sees. */
extern atoll_error_t atoll_header_only_error;
atoll_error_t atoll_header_only_error = { ATOLL_OK, "" };
extern const char atoll_header_only_version[];
const char atoll_header_only_version[] = ATOLL_VERSION;

/* atoll_open_options_t grows only at the end, so size stays first and the fields keep their
   places. */
_Static_assert(offsetof(atoll_open_options_t, size) == 0, "size is the first field");
_Static_assert(offsetof(atoll_open_options_t, should_compact) == sizeof(size_t),
               "fields of atoll_open_options_t keep their places");
_Static_assert(offsetof(atoll_open_options_t, migration) == sizeof(size_t) + 2 * sizeof(void *),
               "the migration fields follow the first version's");
extern const atoll_open_options_t atoll_header_only_options;
const atoll_open_options_t atoll_header_only_options = { sizeof(atoll_open_options_t), NULL, NULL, NULL, NULL };
