/* An outside program that uses an installed Atoll: only <atoll.h> from the prefix, linked
 * against the prefix's libatoll.so. It opens a realm, writes and reads one object, and exits
 * 0 only when everything it read back is right. */
#include <atoll.h>

#include <stdio.h>
#include <string.h>

static int fail(const char *what) {
    atoll_error_t e;
    atoll_last_error(&e);
    fprintf(stderr, "outside: %s failed: %s (%d) %s\n", what,
            atoll_status_name(e.code) ? atoll_status_name(e.code) : "?", e.code,
            e.message ? e.message : "");
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s <realm path>\n", argv[0]);
        return 2;
    }
    if (atoll_libversion_number() != ATOLL_VERSION_NUMBER) {
        fprintf(stderr, "outside: header %s but library %s\n", ATOLL_VERSION, atoll_libversion());
        return 1;
    }
    char config[1024];
    snprintf(config, sizeof config,
             "{\"path\": \"%s\", \"schema\": [{\"name\": \"Item\", \"primaryKey\": \"_id\","
             " \"properties\": {\"_id\": \"int\", \"label\": \"string\"}}]}",
             argv[1]);
    atoll_realm_t *realm = atoll_realm_open(config);
    if (!realm) return fail("atoll_realm_open");
    if (!atoll_realm_begin_write(realm)) return fail("atoll_realm_begin_write");
    char *item = atoll_object_create(realm, "Item", "{\"_id\": 1, \"label\": \"installed\"}",
                                     ATOLL_UPDATE_ERROR);
    if (!item) return fail("atoll_object_create");
    atoll_free(item);
    if (!atoll_realm_commit(realm)) return fail("atoll_realm_commit");
    char *got = atoll_object_get(realm, "Item", "1");
    if (!got) return fail("atoll_object_get");
    int ok = strstr(got, "installed") != NULL;
    printf("outside: libatoll %s read back %s\n", atoll_libversion(), got);
    atoll_free(got);
    atoll_realm_close(realm);
    return ok ? 0 : 1;
}
