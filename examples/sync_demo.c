/* sync_demo.c — a C host on a shared atoll-server (make demo runs it with a Python and a Swift
 * host at the same time, each as its own user).
 *
 *   sync_demo BASE_URL APP_ID flexible|partition NAME WORKDIR
 *
 * It registers and logs in as NAME, opens a synced realm, writes a Message everyone may read
 * and (flexible) a private Note, tries to write a Message in someone else's name (refused by the
 * rules: a compensating write), then waits until the Messages of all three hosts are there. */
#define _XOPEN_SOURCE 700
#include <atoll.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *SCHEMA =
    "[{\"name\": \"Message\", \"primaryKey\": \"_id\", \"properties\": {\"_id\": \"string\", \"owner_id\": \"string\","
    "  \"room\": \"string\", \"author\": \"string\", \"text\": \"string\"}},"
    " {\"name\": \"Note\", \"primaryKey\": \"_id\", \"properties\": {\"_id\": \"string\", \"owner_id\": \"string\","
    "  \"room\": \"string\", \"text\": \"string\"}}]";

static void die(const char *what) {
    atoll_error_t e;
    atoll_last_error(&e);
    fprintf(stderr, "[c] %s: %s (%s)\n", what, e.message, atoll_status_name(e.code));
    exit(1);
}

static void on_error(void *userdata, const char *json) {
    (void)userdata;
    if (strstr(json, "writeRejected") != NULL) printf("[c] the server refused a write: %s\n", json);
}

static size_t count(atoll_realm_t *realm, const char *cls, const char *query) {
    atoll_realm_refresh(realm);
    atoll_results_t *r = atoll_results_query(realm, cls, query, NULL);
    size_t n = 0;
    if (r == NULL || !atoll_results_count(r, &n)) die("count");
    atoll_results_free(r);
    return n;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: sync_demo BASE_URL APP_ID flexible|partition NAME WORKDIR\n");
        return 2;
    }
    const char *url = argv[1], *app_id = argv[2], *mode = argv[3], *name = argv[4], *dir = argv[5];
    char buf[4096], email[256];
    snprintf(buf, sizeof buf, "{\"appId\": \"%s\", \"baseUrl\": \"%s\", \"metadataDir\": \"%s/c-%s\"}", app_id, url, dir, mode);
    atoll_app_t *app = atoll_app_new(buf);
    if (app == NULL) die("app");
    snprintf(email, sizeof email, "%s@example.com", name);
    atoll_app_register_email(app, email, "demo-password"); /* the second run finds it registered */
    snprintf(buf, sizeof buf, "{\"provider\": \"emailPassword\", \"email\": \"%s\", \"password\": \"demo-password\"}", email);
    atoll_user_t *user = atoll_app_login(app, buf);
    if (user == NULL) die("login");
    char *user_json = atoll_user_json(user);
    char id[64] = "";
    const char *at = strstr(user_json, "\"id\":\"");
    if (at != NULL) sscanf(at + 6, "%63[^\"]", id);
    atoll_free(user_json);
    atoll_token_t *errors = atoll_app_observe_errors(app, on_error, NULL, NULL);

    bool flexible = strcmp(mode, "flexible") == 0;
    if (flexible) {
        snprintf(buf, sizeof buf,
                 "{\"path\": \"%s/c-%s.realm\", \"schema\": %s, \"sync\": {\"mode\": \"flexible\", \"downloadBeforeOpen\": \"always\","
                 " \"timeoutMs\": 20000, \"initialSubscriptions\": [{\"name\": \"messages\", \"class\": \"Message\"},"
                 " {\"name\": \"my notes\", \"class\": \"Note\", \"query\": \"owner_id == $0\", \"args\": [\"%s\"]}]}}",
                 dir, mode, SCHEMA, id);
    } else {
        snprintf(buf, sizeof buf,
                 "{\"path\": \"%s/c-%s.realm\", \"schema\": %s, \"sync\": {\"mode\": \"partition\", \"partitionValue\": \"lobby\","
                 " \"downloadBeforeOpen\": \"always\", \"timeoutMs\": 20000}}", dir, mode, SCHEMA);
    }
    atoll_realm_t *realm = atoll_realm_open_synced(user, buf);
    if (realm == NULL) die("open");

    atoll_realm_begin_write(realm);
    snprintf(buf, sizeof buf, "{\"_id\": \"%s-%s\", \"owner_id\": \"%s\", \"room\": \"lobby\", \"author\": \"%s\", \"text\": \"hello from C\"}",
             name, mode, id, name);
    atoll_free(atoll_object_create(realm, "Message", buf, ATOLL_UPDATE_MODIFIED));
    snprintf(buf, sizeof buf, "{\"_id\": \"%s-note-%s\", \"owner_id\": \"%s\", \"room\": \"lobby\", \"text\": \"C's private note\"}", name, mode, id);
    atoll_free(atoll_object_create(realm, "Note", buf, ATOLL_UPDATE_MODIFIED));
    /* Someone else's name: the rules refuse it, the session undoes it here. */
    snprintf(buf, sizeof buf, "{\"_id\": \"%s-forged-%s\", \"owner_id\": \"somebody-else\", \"room\": \"lobby\", \"author\": \"mallory\", \"text\": \"forged\"}",
             name, mode);
    atoll_free(atoll_object_create(realm, "Message", buf, ATOLL_UPDATE_MODIFIED));
    if (!atoll_realm_commit(realm)) die("commit");

    atoll_sync_session_t *session = atoll_realm_sync_session(realm);
    if (!atoll_sync_session_wait_for_upload(session, 20000)) die("upload");
    /* Live: the other hosts write at the same time. */
    size_t messages = 0;
    for (int i = 0; i < 400 && messages < 3; i++) {
        atoll_sync_session_wait_for_download(session, 20000);
        messages = count(realm, "Message", "room == 'lobby' AND NOT _id CONTAINS 'forged'");
        if (messages < 3) nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = 50 * 1000 * 1000}, NULL);
    }
    size_t forged = count(realm, "Message", "_id CONTAINS 'forged'");
    size_t notes = count(realm, "Note", "TRUEPREDICATE");
    atoll_results_t *all = atoll_results_query(realm, "Message", "room == 'lobby' SORT(author ASC)", NULL);
    char *page = atoll_results_json(all, 0, 10);
    printf("[c] %s (%s): %zu messages %s; forged ones: %zu; notes I can see: %zu (my own)\n", name, mode, messages,
           page != NULL ? page : "", forged, notes);
    atoll_free(page);
    atoll_results_free(all);
    atoll_sync_session_free(session);
    atoll_token_free(errors);
    atoll_realm_close(realm);
    atoll_user_free(user);
    atoll_app_free(app);
    return messages >= 3 && forged == 0 && notes == 1 ? 0 : 1;
}
