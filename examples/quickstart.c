/*
 * quickstart.c — Atoll from C in one page: open a realm file, declare a schema, write objects in
 * a transaction, query them, read the change log, close.
 *
 *   quickstart <path/to/file.realm>
 *
 * Every call that can fail returns NULL or false; the reason is then in atoll_last_error().
 * Strings the library returns are freed with atoll_free().
 */
#include <atoll.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Prints the last error and returns 1, for `return die("what")`. */
static int die(const char *what) {
    atoll_error_t error;
    atoll_last_error(&error);
    fprintf(stderr, "quickstart: %s failed: %s: %s\n", what, atoll_status_name(error.code),
            error.message);
    return 1;
}

static const char *const SCHEMA =
    "["
    " {\"name\": \"Person\", \"primaryKey\": \"name\","
    "  \"properties\": {\"name\": \"string\", \"age\": \"int\", \"dogs\": \"Dog[]\"}},"
    " {\"name\": \"Dog\", \"primaryKey\": \"_id\","
    "  \"properties\": {\"_id\": \"int\", \"name\": \"string\", \"age\": \"int\","
    "                   \"owner\": \"Person?\"}}"
    "]";

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s <path/to/file.realm>\n", argv[0]);
        return 2;
    }
    printf("Atoll %s (header %s)\n", atoll_libversion(), ATOLL_VERSION);

    /* 1. Open (or create) the realm file with its schema; its change log keeps the values
     *    written (step 5 reads them). */
    char config[2048];
    snprintf(config, sizeof config, "{\"path\": \"%s\", \"schema\": %s, \"changeLogValues\": true}",
             argv[1], SCHEMA);
    atoll_realm_t *realm = atoll_realm_open(config);
    if (!realm) return die("atoll_realm_open");
    printf("opened %s\n", argv[1]);

    /* 2. Write in a transaction. ATOLL_UPDATE_MODIFIED updates objects that exist already, so
     *    running the example twice on one file is fine. */
    if (!atoll_realm_begin_write(realm)) return die("atoll_realm_begin_write");
    static const char *const people[] = {
        "{\"name\": \"Alice\", \"age\": 34}",
        "{\"name\": \"Bob\", \"age\": 27}",
    };
    static const char *const dogs[] = {
        "{\"_id\": 1, \"name\": \"Rex\", \"age\": 3, \"owner\": \"Alice\"}",
        "{\"_id\": 2, \"name\": \"Fido\", \"age\": 7, \"owner\": \"Bob\"}",
        "{\"_id\": 3, \"name\": \"Buddy\", \"age\": 1, \"owner\": \"Alice\"}",
    };
    for (size_t i = 0; i < sizeof people / sizeof people[0]; i++) {
        char *stored = atoll_object_create(realm, "Person", people[i], ATOLL_UPDATE_MODIFIED);
        if (!stored) return die("atoll_object_create(Person)");
        printf("wrote Person %s\n", stored);
        atoll_free(stored);
    }
    for (size_t i = 0; i < sizeof dogs / sizeof dogs[0]; i++) {
        char *stored = atoll_object_create(realm, "Dog", dogs[i], ATOLL_UPDATE_MODIFIED);
        if (!stored) return die("atoll_object_create(Dog)");
        printf("wrote Dog    %s\n", stored);
        atoll_free(stored);
    }
    /* Alice's list of dogs, by primary key. */
    char *alice = atoll_object_create(realm, "Person", "{\"name\": \"Alice\", \"dogs\": [1, 3]}",
                                      ATOLL_UPDATE_MODIFIED);
    if (!alice) return die("atoll_object_create(Alice's dogs)");
    printf("wrote Person %s\n", alice);
    atoll_free(alice);
    if (!atoll_realm_commit(realm)) return die("atoll_realm_commit");
    printf("committed\n");

    /* 3. Read one object by primary key. */
    char *rex = atoll_object_get(realm, "Dog", "1");
    if (!rex) return die("atoll_object_get");
    printf("Dog 1 is %s\n", rex);
    atoll_free(rex);

    /* 4. Query: arguments go in $0, $1... as a JSON array, never into the query text. */
    atoll_results_t *older = atoll_results_query(realm, "Dog", "age > $0 SORT(age DESC)", "[2]");
    if (!older) return die("atoll_results_query");
    size_t count = 0;
    if (!atoll_results_count(older, &count)) return die("atoll_results_count");
    char *page = atoll_results_json(older, 0, 10);
    if (!page) return die("atoll_results_json");
    printf("dogs older than 2: %zu: %s\n", count, page);
    atoll_free(page);
    atoll_results_free(older);

    atoll_results_t *alices = atoll_results_query(realm, "Dog", "owner.name == $0", "[\"Alice\"]");
    if (!alices || !atoll_results_count(alices, &count)) return die("query on owner.name");
    printf("dogs of Alice: %zu\n", count);
    atoll_results_free(alices);

    /* 5. The change log: one entry per commit that changed something. */
    uint64_t version = 0;
    if (!atoll_realm_version(realm, &version)) return die("atoll_realm_version");
    char *last = atoll_realm_changes(realm, version ? version - 1 : 0, 1);
    if (!last) return die("atoll_realm_changes");
    /* (Shortened here: it lists every instruction of the transaction.) */
    printf("realm version %llu; its change-log entry: %.150s%s\n", (unsigned long long)version,
           last, strlen(last) > 150 ? "..." : "");
    atoll_free(last);

    /* 6. Errors carry a stable code and a message. */
    if (!atoll_object_get(realm, "Dog", "42")) {
        atoll_error_t error;
        atoll_last_error(&error);
        printf("Dog 42: %s: %s\n", atoll_status_name(error.code), error.message);
    }

    atoll_realm_close(realm);
    printf("closed\n");
    return 0;
}
