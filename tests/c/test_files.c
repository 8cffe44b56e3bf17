/* test_files.c — a realm's files: copies, compaction (explicit and at open), whether the file
 * exists, deleting it, read-only handles, and two handles and two processes on one file. The
 * second process is a fork made before either side opens anything (SQLite connections must
 * not cross a fork). */
#define _XOPEN_SOURCE 700
#include "support/check.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* What deleting 900 dogs with 1 KB names frees at least (pages are not full). */
#define FREED 600000

static long long file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : 0;
}

static bool file_exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

static bool any_file_left(const char *path) {
    static const char *const suffixes[] = { "", "-wal", "-shm", "-journal" };
    char name[1024];
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        snprintf(name, sizeof name, "%s%s", path, suffixes[i]);
        if (file_exists(name)) return true;
    }
    return false;
}

static void path_config(char *config, size_t size, const char *path) {
    snprintf(config, size, "{\"path\": \"%s\"}", path);
}

/* Dogs first..first+count-1, each with a 1 KB name, in one transaction. */
static bool fill(atoll_realm_t *realm, int first, int count) {
    size_t cap = (size_t)count * 1100 + 16;
    char *json = malloc(cap);
    char name[1001];
    memset(name, 'x', 1000);
    name[1000] = '\0';
    size_t n = 0;
    n += (size_t)snprintf(json + n, cap - n, "[");
    for (int i = 0; i < count; i++)
        n += (size_t)snprintf(json + n, cap - n, "%s{\"_id\": %d, \"name\": \"%s\", \"age\": %d}",
                              i ? "," : "", first + i, name, i % 20);
    snprintf(json + n, cap - n, "]");
    bool ok = atoll_realm_begin_write(realm) &&
              atoll_objects_create_many(realm, "Dog", json, ATOLL_UPDATE_ERROR, NULL) &&
              atoll_realm_commit(realm);
    free(json);
    return ok;
}

static size_t count_dogs(atoll_realm_t *realm, const char *query) {
    atoll_results_t *r = atoll_results_query(realm, "Dog", query, NULL);
    size_t n = 0;
    if (!atoll_results_count(r, &n)) n = (size_t)-1;
    atoll_results_free(r);
    return n;
}

/* The realm's version; UINT64_MAX when the call fails. */
static uint64_t version_of(atoll_realm_t *realm) {
    uint64_t v = 0;
    return atoll_realm_version(realm, &v) ? v : UINT64_MAX;
}

/* All dogs as JSON text (caller frees with atoll_free()). */
static char *all_dogs(atoll_realm_t *realm) {
    atoll_results_t *r = atoll_results_query(realm, "Dog", "TRUEPREDICATE SORT(_id ASC)", NULL);
    char *json = atoll_results_json(r, 0, 0);
    atoll_results_free(r);
    return json;
}

/* A closed realm at a new path with 1,000 dogs written and all but the first 100 deleted. */
static const char *make_fragmented(const char *name) {
    const char *path = atoll_tmp_realm_path(name);
    atoll_realm_t *realm = atoll_test_open(path, NULL);
    if (!CHECK(realm != NULL)) return path;
    CHECK(fill(realm, 0, 1000));
    CHECK(atoll_realm_begin_write(realm));
    atoll_results_t *doomed = atoll_results_query(realm, "Dog", "_id >= 100", NULL);
    size_t deleted = 0;
    CHECK(atoll_results_delete_all(doomed, &deleted));
    CHECK_INT(deleted, 900);
    atoll_results_free(doomed);
    CHECK(atoll_realm_commit(realm));
    atoll_realm_close(realm);
    return path;
}

/* MARK: - should_compact */

typedef struct compact_probe {
    bool answer;
    int calls;
    uint64_t total, used;
} compact_probe_t;

static bool should_compact(uint64_t total, uint64_t used, void *userdata) {
    compact_probe_t *probe = userdata;
    probe->calls++;
    probe->total = total;
    probe->used = used;
    return probe->answer;
}

static atoll_realm_t *open_with_probe(const char *config, compact_probe_t *probe) {
    atoll_open_options_t options;
    memset(&options, 0, sizeof options);
    options.size = sizeof options;
    options.should_compact = should_compact;
    options.should_compact_userdata = probe;
    return atoll_realm_open_with(config, &options);
}

/* What should_compact is told about the file at path now (it answers no). */
static compact_probe_t usage(const char *path) {
    char config[1024];
    path_config(config, sizeof config, path);
    compact_probe_t probe = { false, 0, 0, 0 };
    atoll_realm_t *realm = open_with_probe(config, &probe);
    CHECK(realm != NULL);
    CHECK_INT(probe.calls, 1);
    atoll_realm_close(realm);
    return probe;
}

/* MARK: - Copies */

static void test_write_copy_compacted_and_plain(void) {
    const char *path = make_fragmented("source");
    char compacted[1024], plain[1024];
    snprintf(compacted, sizeof compacted, "%s", atoll_tmp_realm_path("compacted"));
    snprintf(plain, sizeof plain, "%s", atoll_tmp_realm_path("plain"));
    atoll_realm_t *realm = atoll_test_open(path, NULL);
    if (!CHECK(realm != NULL)) return;
    CHECK(atoll_realm_write_copy(realm, compacted, true));
    CHECK_OK();
    CHECK(atoll_realm_write_copy(realm, plain, false));
    char *expected = all_dogs(realm);
    uint64_t version = version_of(realm);
    atoll_realm_close(realm);

    /* The plain copy has every page of the database; the compacted one lacks the free ones. */
    compact_probe_t source = usage(path);
    CHECK_INT(file_size(plain), (long long)source.total);
    CHECK(file_size(compacted) + FREED < file_size(plain));

    const char *copies[] = { compacted, plain };
    for (int i = 0; i < 2; i++) {
        atoll_realm_t *copy = atoll_test_open(copies[i], NULL);
        if (!CHECK(copy != NULL)) continue;
        CHECK_INT(count_dogs(copy, NULL), 100);
        char *got = all_dogs(copy);
        CHECK_STR(got, expected);
        atoll_free(got);
        CHECK_INT(version_of(copy), version);
        atoll_realm_close(copy);
    }
    atoll_free(expected);
}

static void test_write_copy_refusals(void) {
    const char *path = atoll_tmp_realm_path("refusals");
    atoll_realm_t *realm = atoll_test_open(path, NULL);
    if (!CHECK(realm != NULL)) return;
    CHECK(fill(realm, 0, 3));

    /* An existing destination is left alone. */
    CHECK(!atoll_realm_write_copy(realm, path, true));
    CHECK_ERR(ATOLL_ERR_FILE, "exists already");
    char taken[1024];
    snprintf(taken, sizeof taken, "%s", atoll_tmp_realm_path("taken"));
    FILE *f = fopen(taken, "w");
    fputs("keep me", f);
    fclose(f);
    CHECK(!atoll_realm_write_copy(realm, taken, false));
    CHECK_ERR(ATOLL_ERR_FILE, "exists already");
    CHECK_INT(file_size(taken), 7);

    /* Not inside a write transaction; the transaction stays usable. */
    char copy[1024];
    snprintf(copy, sizeof copy, "%s", atoll_tmp_realm_path("copy"));
    CHECK(atoll_realm_begin_write(realm));
    CHECK(!atoll_realm_write_copy(realm, copy, true));
    CHECK_ERR(ATOLL_ERR_ALREADY_IN_WRITE, "write transaction");
    CHECK(!file_exists(copy));
    CHECK(atoll_realm_cancel_write(realm));

    CHECK(!atoll_realm_write_copy(realm, NULL, true));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "path is NULL");
    CHECK(!atoll_realm_write_copy(realm, "", true));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "empty");
    CHECK(!atoll_realm_write_copy(realm, "/nonexistent-atoll-dir/copy.realm", true));
    CHECK_ERR(ATOLL_ERR_FILE, "cannot create");
    CHECK(!atoll_realm_write_copy(NULL, copy, true));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "realm is NULL");
    atoll_realm_close(realm);
    CHECK(!atoll_realm_write_copy(realm, copy, true));
    CHECK_ERR(ATOLL_ERR_CLOSED, "closed");
    CHECK(!file_exists(copy));
}

static void test_write_copy_in_memory_to_a_file(void) {
    atoll_realm_t *memory = atoll_test_open(NULL, NULL);
    if (!CHECK(memory != NULL)) return;
    CHECK(fill(memory, 0, 10));
    const char *copy = atoll_tmp_realm_path("from-memory");
    CHECK(atoll_realm_write_copy(memory, copy, true));
    atoll_realm_close(memory);
    atoll_realm_t *opened = atoll_test_open(copy, NULL);
    if (!CHECK(opened != NULL)) return;
    CHECK_INT(count_dogs(opened, NULL), 10);
    atoll_realm_close(opened);
}

static void test_write_copy_to_a_configuration(void) {
    const char *path = atoll_tmp_realm_path("to-config");
    atoll_realm_t *realm = atoll_test_open(path, NULL);
    if (!CHECK(realm != NULL)) return;
    CHECK(fill(realm, 0, 3));
    char copy[1024], config[4096];
    snprintf(copy, sizeof copy, "%s", atoll_tmp_realm_path("to-config-copy"));

    /* Dog.age as a string needs a migration; without a higher schemaVersion it is refused, and
     * no file is left. */
    static const char *const retyped =
        "[{\"name\": \"Dog\", \"primaryKey\": \"_id\", \"properties\": {\"_id\": \"int\", "
        "\"name\": \"string\", \"age\": \"string\"}}]";
    snprintf(config, sizeof config, "{\"path\": \"%s\", \"schema\": %s}", copy, retyped);
    CHECK(!atoll_realm_write_copy_to(realm, config));
    CHECK_ERR(ATOLL_ERR_SCHEMA_MISMATCH, "does not open with the configuration");
    CHECK(!any_file_left(copy));

    /* With a higher schemaVersion the copy is migrated (no callback: age takes its default). */
    char migrated[1024];
    snprintf(migrated, sizeof migrated, "%s", atoll_tmp_realm_path("to-config-migrated"));
    snprintf(config, sizeof config, "{\"path\": \"%s\", \"schemaVersion\": 1, \"schema\": %s}",
             migrated, retyped);
    CHECK(atoll_realm_write_copy_to(realm, config));
    CHECK_OK();
    atoll_realm_t *opened = atoll_realm_open(config);
    if (CHECK(opened != NULL)) {
        CHECK_INT(count_dogs(opened, "age == ''"), 3);
        uint64_t schema_version = 0;
        CHECK(atoll_realm_schema_version(opened, &schema_version));
        CHECK_INT(schema_version, 1);
        atoll_realm_close(opened);
    }

    /* A configuration the data fits: the copy opens with it. */
    snprintf(config, sizeof config, "{\"path\": \"%s\", \"schema\": %s}", copy, ATOLL_TEST_SCHEMA);
    CHECK(atoll_realm_write_copy_to(realm, config));
    CHECK_OK();
    opened = atoll_realm_open(config);
    if (CHECK(opened != NULL)) {
        CHECK_INT(count_dogs(opened, NULL), 3);
        atoll_realm_close(opened);
    }

    CHECK(!atoll_realm_write_copy_to(realm, "{\"inMemory\": true}"));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "in-memory");
    CHECK(!atoll_realm_write_copy_to(realm, "{}"));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "\"path\"");
    CHECK(!atoll_realm_write_copy_to(realm, "{\"path\": "));
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "");
    CHECK(!atoll_realm_write_copy_to(realm, NULL));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "config_json is NULL");
    atoll_realm_close(realm);
}

/* MARK: - Compaction */

static void test_compact(void) {
    const char *path = atoll_tmp_realm_path("compact");
    char wal[1024];
    snprintf(wal, sizeof wal, "%s-wal", path);
    atoll_realm_t *realm = atoll_test_open(path, NULL);
    if (!CHECK(realm != NULL)) return;
    CHECK(fill(realm, 0, 1000));
    CHECK(atoll_realm_begin_write(realm));
    atoll_results_t *doomed = atoll_results_query(realm, "Dog", "_id >= 100", NULL);
    CHECK(atoll_results_delete_all(doomed, NULL));
    atoll_results_free(doomed);
    CHECK(atoll_realm_commit(realm));
    char *before = all_dogs(realm);
    long long size_before = file_size(path) + file_size(wal);

    CHECK(atoll_realm_compact(realm));
    CHECK_OK();
    long long size_after = file_size(path) + file_size(wal);
    CHECK(size_after + FREED < size_before);
    CHECK_INT(file_size(wal), 0);
    char *after = all_dogs(realm);
    CHECK_STR(after, before);
    atoll_free(before);
    atoll_free(after);

    /* Refused in a write transaction; busy while another handle writes. */
    CHECK(atoll_realm_begin_write(realm));
    CHECK(!atoll_realm_compact(realm));
    CHECK_ERR(ATOLL_ERR_ALREADY_IN_WRITE, "compact");
    atoll_realm_t *impatient = atoll_test_open(path, "\"writeTimeoutMs\": 100");
    if (CHECK(impatient != NULL)) {
        CHECK(!atoll_realm_compact(impatient));
        CHECK_ERR(ATOLL_ERR_BUSY, "cannot compact");
        CHECK(atoll_realm_cancel_write(realm));
        CHECK(atoll_realm_compact(impatient));
        atoll_realm_close(impatient);
    }
    atoll_realm_close(realm);
    CHECK(!atoll_realm_compact(realm));
    CHECK_ERR(ATOLL_ERR_CLOSED, "closed");
    CHECK(!atoll_realm_compact(NULL));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "NULL");
}

static void test_should_compact_on_open(void) {
    const char *path = make_fragmented("launch");
    char config[1024];
    path_config(config, sizeof config, path);

    /* Told the sizes; answering no changes nothing. */
    compact_probe_t no = usage(path);
    CHECK(no.total % 4096 == 0);
    CHECK(no.total - no.used > FREED);
    CHECK(no.used > 100000);
    CHECK_INT(usage(path).total, no.total);

    /* Not while another handle has the file open. */
    atoll_realm_t *other = atoll_realm_open(config);
    compact_probe_t yes = { true, 0, 0, 0 };
    atoll_realm_t *realm = open_with_probe(config, &yes);
    CHECK(realm != NULL);
    CHECK_INT(yes.calls, 1);
    atoll_realm_close(realm);
    atoll_realm_close(other);
    CHECK_INT(usage(path).total, no.total);

    /* Alone and answering yes: compacted before the handle is returned, data kept. */
    yes.calls = 0;
    realm = open_with_probe(config, &yes);
    if (!CHECK(realm != NULL)) return;
    CHECK_INT(yes.calls, 1);
    CHECK_INT(yes.total, no.total);
    CHECK_INT(count_dogs(realm, NULL), 100);
    atoll_realm_close(realm);
    compact_probe_t after = usage(path);
    CHECK(after.total + FREED < no.total);
    CHECK_INT(after.used, after.total);
    CHECK(file_size(path) + FREED < (long long)no.total);

    /* Not asked for read-only or in-memory realms. */
    char read_only[1024];
    snprintf(read_only, sizeof read_only, "{\"path\": \"%s\", \"readOnly\": true}", path);
    yes.calls = 0;
    realm = open_with_probe(read_only, &yes);
    CHECK(realm != NULL);
    atoll_realm_close(realm);
    realm = open_with_probe("{\"inMemory\": true}", &yes);
    CHECK(realm != NULL);
    atoll_realm_close(realm);
    CHECK_INT(yes.calls, 0);
}

static void test_open_with_options(void) {
    const char *path = atoll_tmp_realm_path("options");
    char config[1024];
    path_config(config, sizeof config, path);

    atoll_realm_t *realm = atoll_realm_open_with(config, NULL); /* NULL options: a plain open */
    CHECK(realm != NULL);
    CHECK_OK();
    atoll_realm_close(realm);

    /* No callback: nothing asked. */
    atoll_open_options_t options;
    memset(&options, 0, sizeof options);
    options.size = sizeof options;
    realm = atoll_realm_open_with(config, &options);
    CHECK(realm != NULL);
    atoll_realm_close(realm);

    /* A size this library does not know is refused before anything is opened. */
    options.size = sizeof options - 1;
    CHECK(atoll_realm_open_with(config, &options) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "options->size");
    options.size = sizeof options + 8;
    CHECK(atoll_realm_open_with(config, &options) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "sizeof(atoll_open_options_t)");
    options.size = 0;
    CHECK(atoll_realm_open_with(config, &options) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "options->size");

    CHECK(atoll_realm_open_with(NULL, NULL) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "config_json is NULL");
    CHECK(atoll_realm_open_with("[", NULL) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "");
}

/* MARK: - Existence and deletion */

static void test_file_exists(void) {
    const char *path = atoll_tmp_realm_path("exists");
    char config[1024];
    path_config(config, sizeof config, path);
    bool exists = true;
    CHECK(atoll_realm_file_exists(config, &exists));
    CHECK_OK();
    CHECK(!exists);
    atoll_realm_t *realm = atoll_realm_open(config);
    CHECK(atoll_realm_file_exists(config, &exists));
    CHECK(exists);
    atoll_realm_close(realm);
    CHECK(atoll_realm_file_exists(config, &exists));
    CHECK(exists);

    CHECK(atoll_realm_file_exists("{\"inMemory\": true, \"path\": \"x\"}", &exists));
    CHECK(!exists);
    CHECK(!atoll_realm_file_exists(config, NULL));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "out_exists is NULL");
    CHECK(!atoll_realm_file_exists(NULL, &exists));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "config_json is NULL");
    CHECK(!atoll_realm_file_exists("{}", &exists));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "\"path\"");
    CHECK(!atoll_realm_file_exists("not json", &exists));
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "");
}

static void test_delete_files_in_this_process(void) {
    const char *path = atoll_tmp_realm_path("delete");
    char config[1024], wal[1024], shm[1024];
    path_config(config, sizeof config, path);
    snprintf(wal, sizeof wal, "%s-wal", path);
    snprintf(shm, sizeof shm, "%s-shm", path);
    atoll_realm_t *realm = atoll_test_open(path, NULL);
    if (!CHECK(realm != NULL)) return;
    CHECK(fill(realm, 0, 5));
    CHECK(file_exists(wal) && file_exists(shm));

    bool deleted = true;
    CHECK(!atoll_realm_delete_files(config, &deleted));
    CHECK_ERR(ATOLL_ERR_BUSY, "open in this process");
    CHECK_INT(count_dogs(realm, NULL), 5); /* nothing was deleted */

    atoll_realm_close(realm);
    CHECK(atoll_realm_delete_files(config, &deleted));
    CHECK_OK();
    CHECK(deleted);
    CHECK(!any_file_left(path));
    CHECK(atoll_realm_delete_files(config, &deleted)); /* nothing there: not an error */
    CHECK(!deleted);
    CHECK(atoll_realm_delete_files(config, NULL));

    CHECK(!atoll_realm_delete_files(NULL, &deleted));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "config_json is NULL");
    CHECK(!atoll_realm_delete_files("{\"schemaVersion\": 1}", &deleted));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "\"path\"");
}

/* Forks a child that opens the realm at path (read-only when read_only), writes one byte to
 * *ready_fd once it has, and closes it when a byte arrives on *release_fd. Returns its pid. */
static pid_t start_holder(const char *path, bool read_only, int *ready_fd, int *release_fd) {
    int ready[2], release[2];
    if (pipe(ready) != 0 || pipe(release) != 0) return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(ready[0]);
        close(release[1]);
        char config[1024];
        snprintf(config, sizeof config, "{\"path\": \"%s\", \"readOnly\": %s}", path,
                 read_only ? "true" : "false");
        atoll_realm_t *realm = atoll_realm_open(config);
        if (realm == NULL) _exit(10);
        size_t n = 0;
        atoll_results_t *all = atoll_results_query(realm, "Dog", NULL, NULL);
        if (!atoll_results_count(all, &n)) _exit(11);
        atoll_results_free(all);
        char byte = 'r';
        if (write(ready[1], &byte, 1) != 1) _exit(12);
        if (read(release[0], &byte, 1) != 1) _exit(13);
        atoll_realm_close(realm);
        _exit(0);
    }
    close(ready[1]);
    close(release[0]);
    *ready_fd = ready[0];
    *release_fd = release[1];
    return pid;
}

static void test_delete_files_while_open_in_another_process(void) {
    for (int read_only = 0; read_only < 2; read_only++) {
        const char *path = make_fragmented(read_only ? "other-reader" : "other-writer");
        char config[1024];
        path_config(config, sizeof config, path);
        int ready, release;
        pid_t child = start_holder(path, read_only, &ready, &release);
        if (!CHECK(child > 0)) return;
        char byte = 0;
        CHECK(read(ready, &byte, 1) == 1);

        bool deleted = true;
        char expected[64];
        snprintf(expected, sizeof expected, "open in another process (pid %ld)", (long)child);
        CHECK(!atoll_realm_delete_files(config, &deleted));
        CHECK_ERR(ATOLL_ERR_BUSY, expected);
        CHECK(file_exists(path));

        /* Nor is the file compacted at open while the child has it. */
        compact_probe_t before = usage(path);
        compact_probe_t yes = { true, 0, 0, 0 };
        atoll_realm_t *realm = open_with_probe(config, &yes);
        CHECK(realm != NULL);
        CHECK_INT(yes.calls, 1);
        atoll_realm_close(realm);
        CHECK_INT(usage(path).total, before.total);

        CHECK(write(release, "x", 1) == 1);
        int status = -1;
        waitpid(child, &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        close(ready);
        close(release);
        CHECK(atoll_realm_delete_files(config, &deleted));
        CHECK(deleted);
        CHECK(!any_file_left(path));
    }
}

/* MARK: - Read-only handles, several handles and processes */

static char *read_file(const char *path, long long *size) {
    *size = file_size(path);
    char *data = malloc((size_t)*size + 1);
    FILE *f = fopen(path, "rb");
    if (f == NULL || fread(data, 1, (size_t)*size, f) != (size_t)*size) *size = -1;
    if (f) fclose(f);
    return data;
}

static void test_read_only_cannot_write(void) {
    const char *path = make_fragmented("read-only");
    long long size_before = 0;
    char *before = read_file(path, &size_before);
    char config[1024];
    snprintf(config, sizeof config, "{\"path\": \"%s\", \"readOnly\": true}", path);
    atoll_realm_t *realm = atoll_realm_open(config);
    if (!CHECK(realm != NULL)) return;

    CHECK(!atoll_realm_begin_write(realm));
    CHECK_ERR(ATOLL_ERR_READ_ONLY, "read-only");
    CHECK(CREATE(realm, "Dog", "{\"_id\": 5000, \"name\": \"x\"}", ATOLL_UPDATE_ALL) == NULL);
    CHECK_ERR(ATOLL_ERR_READ_ONLY, "read-only");
    CHECK(!atoll_objects_create_many(realm, "Dog", "[{\"_id\": 5001, \"name\": \"y\"}]",
                                     ATOLL_UPDATE_ERROR, NULL));
    CHECK_ERR(ATOLL_ERR_READ_ONLY, "read-only");
    CHECK(!atoll_object_delete(realm, "Dog", "1"));
    CHECK_ERR(ATOLL_ERR_READ_ONLY, "read-only");
    atoll_results_t *all = atoll_results_query(realm, "Dog", NULL, NULL);
    CHECK(!atoll_results_delete_all(all, NULL));
    CHECK_ERR(ATOLL_ERR_READ_ONLY, "read-only");
    atoll_results_free(all);
    CHECK(!atoll_realm_compact(realm));
    CHECK_ERR(ATOLL_ERR_READ_ONLY, "read-only");
    CHECK_INT(count_dogs(realm, NULL), 100);

    /* Copying is reading: allowed. */
    const char *copy = atoll_tmp_realm_path("read-only-copy");
    CHECK(atoll_realm_write_copy(realm, copy, true));
    atoll_realm_close(realm);

    long long size_after = 0;
    char *after = read_file(path, &size_after);
    CHECK_INT(size_after, size_before);
    CHECK(size_before > 0 && memcmp(before, after, (size_t)size_before) == 0);
    free(before);
    free(after);
}

static void test_two_handles_one_file(void) {
    const char *path = atoll_tmp_realm_path("two-handles");
    atoll_realm_t *a = atoll_test_open(path, NULL);
    char config[1024];
    snprintf(config, sizeof config, "{\"path\": \"%s\", \"readOnly\": true}", path);
    atoll_realm_t *reader = atoll_realm_open(config);
    atoll_realm_t *b = atoll_test_open(path, NULL);
    if (!CHECK(a && b && reader)) return;
    for (int i = 0; i < 5; i++) {
        CHECK(fill(a, i * 10, 10));
        CHECK_INT(count_dogs(a, "_id >= 1000"), (size_t)i * 10);
        CHECK(fill(b, 1000 + i * 10, 10));
        /* The reader's snapshot holds until it refreshes (its first one starts at its first read,
         * or earlier: round 0 is not asserted). */
        if (i > 0) {
            CHECK_INT(count_dogs(reader, NULL), (size_t)i * 20);
            CHECK_INT(version_of(reader), (uint64_t)i * 2);
        }
        CHECK(atoll_realm_refresh(reader));
        CHECK_INT(count_dogs(reader, NULL), (size_t)(i + 1) * 20);
    }
    /* a last read before b's last commit: it sees b's 40 dogs until it refreshes. b began its
     * last write after a's last commit: it sees all of a's. */
    CHECK_INT(count_dogs(a, "_id >= 1000"), 40);
    CHECK(atoll_realm_refresh(a));
    CHECK_INT(count_dogs(a, "_id >= 1000"), 50);
    CHECK_INT(count_dogs(b, "_id < 1000"), 50);
    CHECK_INT(version_of(reader), 10);
    atoll_realm_close(a);
    atoll_realm_close(b);
    atoll_realm_close(reader);
}

static void test_two_processes_one_file(void) {
    const char *path = atoll_tmp_realm_path("two-processes");
    atoll_realm_t *creator = atoll_test_open(path, NULL);
    if (!CHECK(creator != NULL)) return;
    atoll_realm_close(creator);

    /* Fork before either side opens the realm. */
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        atoll_realm_t *realm = atoll_test_open(path, NULL);
        if (realm == NULL) _exit(10);
        for (int i = 0; i < 10; i++)
            if (!fill(realm, 1000 + i * 10, 10)) _exit(11);
        atoll_realm_close(realm);
        _exit(0);
    }
    if (!CHECK(child > 0)) return;
    atoll_realm_t *writer = atoll_test_open(path, NULL);
    char config[1024];
    snprintf(config, sizeof config, "{\"path\": \"%s\", \"readOnly\": true}", path);
    atoll_realm_t *reader = atoll_realm_open(config);
    if (!CHECK(writer && reader)) return;
    size_t last_seen = 0;
    bool never_went_back = true;
    for (int i = 0; i < 10; i++) {
        CHECK(fill(writer, i * 10, 10));
        CHECK(atoll_realm_refresh(reader));
        size_t seen = count_dogs(reader, NULL);
        if (seen < last_seen) never_went_back = false;
        last_seen = seen;
    }
    CHECK(never_went_back);
    CHECK(last_seen >= 100);
    int status = -1;
    waitpid(child, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* The reader reads its snapshot (as of its last refresh) until it refreshes again. */
    CHECK_INT(count_dogs(reader, NULL), last_seen);
    CHECK(atoll_realm_refresh(reader));
    CHECK_INT(count_dogs(reader, NULL), 200);
    CHECK(atoll_realm_refresh(writer));
    CHECK_INT(count_dogs(writer, "_id >= 1000"), 100);
    CHECK_INT(version_of(reader), 20);
    atoll_realm_close(writer);
    atoll_realm_close(reader);
}

int main(int argc, char **argv) {
    static const atoll_test_t tests[] = {
        ATOLL_TEST(test_write_copy_compacted_and_plain),
        ATOLL_TEST(test_write_copy_refusals),
        ATOLL_TEST(test_write_copy_in_memory_to_a_file),
        ATOLL_TEST(test_write_copy_to_a_configuration),
        ATOLL_TEST(test_compact),
        ATOLL_TEST(test_should_compact_on_open),
        ATOLL_TEST(test_open_with_options),
        ATOLL_TEST(test_file_exists),
        ATOLL_TEST(test_delete_files_in_this_process),
        ATOLL_TEST(test_delete_files_while_open_in_another_process),
        ATOLL_TEST(test_read_only_cannot_write),
        ATOLL_TEST(test_two_handles_one_file),
        ATOLL_TEST(test_two_processes_one_file),
    };
    return ATOLL_CHECK_MAIN(tests, argc, argv);
}
