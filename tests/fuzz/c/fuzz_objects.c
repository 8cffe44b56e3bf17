/* Fuzz target "objects": schema JSON and object JSON through the C ABI (docs/testing.md).
 *
 * An input is parts separated by lines "---":
 *
 *     <schema: a JSON array of object schemas; empty for the built-in schema>
 *     ---
 *     <class name>
 *     <a JSON object to create or update, or an array of them>
 *     ---
 *     ...
 *
 * A part's first line may name an operation instead of a create:
 *
 *     <class> <op> [<property> [<index, count or dictionary key>]]
 *     <the object's primary key, JSON>
 *     <the value, JSON (for the ops that take one)>
 *
 * with op one of get, delete, addInteger, listInsert, listSet, listErase, listMove,
 * setInsert, setErase, dictionarySet, dictionaryErase (the element calls of atoll.h).
 *
 * The schema opens an in-memory realm; the later parts run in one write transaction (a create
 * in part n with update policy n % 3), then the realm's schema, change log and each touched
 * class's objects are read back. Every call is checked with fuzz_check(). */
#include "fuzz_common.h"

#include <stdint.h>

/* Every type, optional and required, every collection, links, embedded objects. */
static const char *default_schema =
    "[{\"name\": \"All\", \"primaryKey\": \"_id\", \"properties\": {"
    "\"_id\": \"int\", \"b\": \"bool\", \"i\": \"int?\", \"f\": \"float\", \"d\": \"double?\","
    "\"s\": \"string\", \"bin\": \"data?\", \"date\": \"date\", \"oid\": \"objectId?\","
    "\"u\": \"uuid\", \"dec\": \"decimal128?\", \"m\": \"mixed\", \"link\": \"All?\","
    "\"emb\": \"Emb?\", \"list\": \"int[]\", \"slist\": \"string?[]\", \"links\": \"All[]\","
    "\"embs\": \"Emb[]\", \"set\": \"string<>\", \"lset\": \"All<>\", \"dict\": \"double?{}\","
    "\"mdict\": \"mixed{}\", \"mlist\": \"mixed[]\","
    "\"w\": {\"type\": \"double\", \"default\": 10.5}, \"idx\": {\"type\": \"string\", \"indexed\": true},"
    "\"back\": {\"type\": \"linkingObjects\", \"objectType\": \"All\", \"property\": \"links\"}}},"
    "{\"name\": \"Emb\", \"embedded\": true, \"properties\": {\"x\": \"int\", \"e\": \"Emb?\", \"to\": \"All?\"}},"
    "{\"name\": \"Str\", \"primaryKey\": \"name\", \"properties\": {\"name\": \"string\", \"v\": \"mixed\"}},"
    "{\"name\": \"Oid\", \"primaryKey\": \"_id\", \"properties\": {\"_id\": \"objectId\", \"u\": \"uuid?\"}},"
    "{\"name\": \"NoKey\", \"properties\": {\"n\": \"int\", \"tags\": \"string[]\"}}]";

#define MAX_CLASSES 16

/* One element or object operation: the key is the body's first line, the value the rest. */
static void run_operation(atoll_realm_t *realm, const char *class_name, const char *op,
                          const char *property, const char *argument, char *body) {
    char *value = strchr(body, '\n');
    if (value != NULL) *value++ = '\0';
    else value = body + strlen(body);
    const char *key = body;
    const char *prop = property ? property : "";
    const char *arg = argument ? argument : "";
    size_t index = (size_t)strtoull(arg, NULL, 10);
    bool flag = false, ok;
    if (strcmp(op, "get") == 0) {
        char *found = atoll_object_get(realm, class_name, key);
        FUZZ_CHECK("atoll_object_get", found != NULL);
        atoll_free(found);
        return;
    }
    if (strcmp(op, "delete") == 0) ok = atoll_object_delete(realm, class_name, key), op = "atoll_object_delete";
    else if (strcmp(op, "addInteger") == 0) ok = atoll_object_add_integer(realm, class_name, key, prop, strtoll(arg, NULL, 10)), op = "atoll_object_add_integer";
    else if (strcmp(op, "listInsert") == 0) ok = atoll_list_insert(realm, class_name, key, prop, index, value), op = "atoll_list_insert";
    else if (strcmp(op, "listSet") == 0) ok = atoll_list_set(realm, class_name, key, prop, index, value), op = "atoll_list_set";
    else if (strcmp(op, "listErase") == 0) ok = atoll_list_erase(realm, class_name, key, prop, index), op = "atoll_list_erase";
    else if (strcmp(op, "listMove") == 0) ok = atoll_list_move(realm, class_name, key, prop, index, (size_t)strtoull(value, NULL, 10)), op = "atoll_list_move";
    else if (strcmp(op, "setInsert") == 0) ok = atoll_set_insert(realm, class_name, key, prop, value, &flag), op = "atoll_set_insert";
    else if (strcmp(op, "setErase") == 0) ok = atoll_set_erase(realm, class_name, key, prop, value, &flag), op = "atoll_set_erase";
    else if (strcmp(op, "dictionarySet") == 0) ok = atoll_dictionary_set(realm, class_name, key, prop, arg, value), op = "atoll_dictionary_set";
    else if (strcmp(op, "dictionaryErase") == 0) ok = atoll_dictionary_erase(realm, class_name, key, prop, arg, &flag), op = "atoll_dictionary_erase";
    else return;
    FUZZ_CHECK(op, ok);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data, *end = text + size;
    const char *part_end;
    const char *next = fuzz_next_part(text, end, &part_end);

    char *schema = fuzz_strndup(text, (size_t)(part_end - text));
    const char *use = schema[0] != '\0' ? schema : default_schema;
    size_t config_size = strlen(use) + 64;
    char *config = malloc(config_size);
    if (config == NULL) abort();
    snprintf(config, config_size, "{\"inMemory\": true, \"notifications\": \"host\", \"changeLogValues\": true, \"schema\": %s}", use);
    atoll_realm_t *realm = atoll_realm_open(config);
    FUZZ_CHECK("atoll_realm_open", realm != NULL);
    free(config);
    free(schema);
    if (realm == NULL) return 0;

    char *touched[MAX_CLASSES];
    int ntouched = 0;
    bool ok = atoll_realm_begin_write(realm);
    FUZZ_CHECK("atoll_realm_begin_write", ok);
    for (int n = 1; next != NULL && ok; n++) {
        const char *part = next;
        next = fuzz_next_part(part, end, &part_end);
        const char *newline = memchr(part, '\n', (size_t)(part_end - part));
        const char *json = newline ? newline + 1 : part_end;
        char *header = fuzz_strndup(part, (size_t)((newline ? newline : part_end) - part));
        char *object = fuzz_strndup(json, (size_t)(part_end - json));
        char *class_name = NULL, *op = NULL, *property = NULL, *argument = NULL;
        char *save = NULL;
        class_name = strtok_r(header, " ", &save);
        if (class_name != NULL) op = strtok_r(NULL, " ", &save);
        if (op != NULL) property = strtok_r(NULL, " ", &save);
        if (property != NULL) argument = strtok_r(NULL, " ", &save);
        class_name = strdup(class_name ? class_name : "");
        if (op == NULL) {
            int policy = n % 3;
            if (object[0] == '[') {
                size_t count = 0;
                bool created = atoll_objects_create_many(realm, class_name, object, policy, &count);
                FUZZ_CHECK("atoll_objects_create_many", created);
            } else {
                char *stored = atoll_object_create(realm, class_name, object, policy);
                FUZZ_CHECK("atoll_object_create", stored != NULL);
                atoll_free(stored);
            }
        } else {
            run_operation(realm, class_name, op, property, argument, object);
        }
        free(header);
        if (ntouched < MAX_CLASSES) touched[ntouched++] = class_name;
        else free(class_name);
        free(object);
    }
    ok = atoll_realm_commit(realm);
    FUZZ_CHECK("atoll_realm_commit", ok);

    char *text_out = atoll_realm_schema(realm);
    FUZZ_CHECK("atoll_realm_schema", text_out != NULL);
    atoll_free(text_out);
    text_out = atoll_realm_changes(realm, 0, 0);
    FUZZ_CHECK("atoll_realm_changes", text_out != NULL);
    atoll_free(text_out);
    for (int i = 0; i < ntouched; i++) {
        atoll_results_t *all = atoll_results_query(realm, touched[i], NULL, NULL);
        FUZZ_CHECK("atoll_results_query", all != NULL);
        if (all != NULL) {
            char *objects = atoll_results_json(all, 0, 0);
            FUZZ_CHECK("atoll_results_json", objects != NULL);
            atoll_free(objects);
        }
        atoll_results_free(all);
        free(touched[i]);
    }
    atoll_realm_close(realm);
    return 0;
}
