/*
 * jansson_host.c — Atoll from a C program that already speaks jansson: the _j functions take
 * and return json_t values instead of JSON text.
 *
 *   jansson_host <path/to/file.realm>
 *
 * Ownership in jansson's words: arguments are borrowed references (the library neither keeps
 * nor modifies them); results are new references, released with json_decref().
 */
#include <atoll.h>
#include <jansson.h>

#include <stdio.h>
#include <stdlib.h>

static int die(const char *what) {
    atoll_error_t error;
    atoll_last_error(&error);
    fprintf(stderr, "jansson_host: %s failed: %s: %s\n", what, atoll_status_name(error.code),
            error.message);
    return 1;
}

/* Prints a label and a json_t on one line. */
static void show(const char *label, const json_t *value) {
    char *text = json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY);
    printf("%s %s\n", label, text ? text : "?");
    free(text);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s <path/to/file.realm>\n", argv[0]);
        return 2;
    }
    printf("Atoll %s with jansson %s\n", atoll_libversion(), JANSSON_VERSION);

    /* The configuration is JSON text in every case; build it with jansson too. */
    json_t *config = json_pack(
        "{s:s, s:[{s:s, s:s, s:{s:s, s:s, s:s}}, {s:s, s:s, s:{s:s, s:s, s:s, s:s}}]}",
        "path", argv[1], "schema",
        "name", "Person", "primaryKey", "name", "properties",
            "name", "string", "age", "int", "dogs", "Dog[]",
        "name", "Dog", "primaryKey", "_id", "properties",
            "_id", "int", "name", "string", "age", "int", "owner", "Person?");
    char *config_text = json_dumps(config, JSON_COMPACT);
    json_decref(config);
    atoll_realm_t *realm = atoll_realm_open(config_text);
    free(config_text);
    if (!realm) return die("atoll_realm_open");
    printf("opened %s\n", argv[1]);

    if (!atoll_realm_begin_write(realm)) return die("atoll_realm_begin_write");
    json_t *people = json_pack("[{s:s, s:i}, {s:s, s:i}]", "name", "Carol", "age", 41,
                               "name", "Dan", "age", 19);
    size_t written = 0;
    if (!atoll_objects_create_many_j(realm, "Person", people, ATOLL_UPDATE_MODIFIED, &written))
        return die("atoll_objects_create_many_j");
    json_decref(people);
    printf("wrote %zu people in one call\n", written);

    for (int i = 0; i < 3; i++) {
        static const char *const names[] = { "Luna", "Milo", "Nala" };
        json_t *dog = json_pack("{s:i, s:s, s:i, s:s}", "_id", 10 + i, "name", names[i],
                                "age", 2 + 3 * i, "owner", i % 2 ? "Dan" : "Carol");
        json_t *stored = atoll_object_create_j(realm, "Dog", dog, ATOLL_UPDATE_MODIFIED);
        json_decref(dog);
        if (!stored) return die("atoll_object_create_j");
        show("wrote Dog", stored);
        json_decref(stored);
    }
    if (!atoll_realm_commit(realm)) return die("atoll_realm_commit");
    printf("committed\n");

    json_t *key = json_integer(11);
    json_t *milo = atoll_object_get_j(realm, "Dog", key);
    json_decref(key);
    if (!milo) return die("atoll_object_get_j");
    printf("Dog 11 is %s, %lld years old, owned by %s\n",
           json_string_value(json_object_get(milo, "name")),
           (long long)json_integer_value(json_object_get(milo, "age")),
           json_string_value(json_object_get(milo, "owner")));
    json_decref(milo);

    json_t *args = json_pack("[s]", "Carol");
    atoll_results_t *carols = atoll_results_query_j(realm, "Dog", "owner.name == $0 SORT(age ASC)", args);
    json_decref(args);
    if (!carols) return die("atoll_results_query_j");
    json_t *page = atoll_results_json_j(carols, 0, 0);
    if (!page) return die("atoll_results_json_j");
    size_t i;
    json_t *dog;
    printf("Carol's dogs: %zu\n", json_array_size(page));
    json_array_foreach(page, i, dog) {
        printf("  %zu. %s (%lld)\n", i + 1, json_string_value(json_object_get(dog, "name")),
               (long long)json_integer_value(json_object_get(dog, "age")));
    }
    json_decref(page);
    atoll_results_free(carols);

    /* A wrong value type is refused, with a code and a message. */
    if (!atoll_realm_begin_write(realm)) return die("atoll_realm_begin_write");
    json_t *bad = json_pack("{s:i, s:s}", "_id", 99, "age", "old");
    json_t *stored = atoll_object_create_j(realm, "Dog", bad, ATOLL_UPDATE_ERROR);
    if (stored) {
        json_decref(stored);
    } else {
        atoll_error_t error;
        atoll_last_error(&error);
        printf("Dog with age \"old\": %s: %s\n", atoll_status_name(error.code), error.message);
    }
    json_decref(bad);
    atoll_realm_cancel_write(realm);

    atoll_realm_close(realm);
    printf("closed\n");
    return 0;
}
