/* test_sync.c — sync from C against a real atoll-server started by each test on a free
 * loopback port: users, synced realms sharing data, owner-only rules with a compensating write,
 * partition sync, subscriptions and their errors, AsyncOpen, timeouts, copies, bad input.
 * The server is ATOLL_SERVER, or the one built beside this library. */
#define _XOPEN_SOURCE 700
#include "support/check.h"

#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

extern char **environ;

static const char *const TASKS =
    "[{'name': 'Task', 'primaryKey': '_id', 'properties': {'_id': 'string', 'owner_id': 'string?', "
    "'name': 'string?', 'priority': 'int'}}]";

static const char *const OWNERS_CONFIG =
    "{'apps': [{'id': 'owners', 'developmentMode': true, 'sync': {'mode': 'flexible', 'partitionKey': 'owner_id'},"
    " 'rules': {'Task': {'roles': [{'name': 'owner', 'read': 'owner_id == %user.id', 'write': 'owner_id == %user.id'}]}}},"
    " {'id': 'parts', 'developmentMode': true, 'sync': {'mode': 'partition', 'partitionKey': 'owner_id'},"
    " 'rules': {'default': {'roles': [{'name': 'owner', 'read': 'owner_id == %user.id', 'write': 'owner_id == %user.id'}]}}}]}";

typedef struct server {
    pid_t pid;
    char url[128];
    char dir[512];
} server_t;

/* Starts atoll-server on a free port with its data in `dir` (with a config, if given); false
 * when it cannot. */
static bool server_start_in(server_t *s, const char *config, const char *dir) {
    const char *binary = getenv("ATOLL_SERVER");
    if (binary == NULL) binary = ATOLL_SERVER_DEFAULT;
    snprintf(s->dir, sizeof s->dir, "%s", dir);
    char config_path[600] = "";
    if (config != NULL) {
        snprintf(config_path, sizeof config_path, "%s.json", s->dir);
        FILE *f = fopen(config_path, "w");
        if (!CHECK(f != NULL)) return false;
        fputs(J(config), f);
        fclose(f);
    }
    int out[2];
    if (!CHECK(pipe(out) == 0)) return false;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    char *argv[12];
    int n = 0;
    argv[n++] = (char *)binary;
    argv[n++] = "--port";
    argv[n++] = "0";
    argv[n++] = "--data";
    argv[n++] = s->dir;
    argv[n++] = "--log-level";
    argv[n++] = "error";
    if (config != NULL) {
        argv[n++] = "--config";
        argv[n++] = config_path;
    }
    argv[n] = NULL;
    int rc = posix_spawn(&s->pid, binary, &actions, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    if (!CHECK(rc == 0)) {
        fprintf(stderr, "cannot start %s (set ATOLL_SERVER)\n", binary);
        close(out[0]);
        return false;
    }
    /* The first line: "listening on http://HOST:PORT". */
    char line[256];
    size_t len = 0;
    while (len + 1 < sizeof line) {
        ssize_t got = read(out[0], line + len, 1);
        if (got <= 0 || line[len] == '\n') break;
        len++;
    }
    line[len] = '\0';
    close(out[0]);
    const char *prefix = "listening on ";
    if (!CHECK(strncmp(line, prefix, strlen(prefix)) == 0)) {
        fprintf(stderr, "atoll-server said: '%s'\n", line);
        return false;
    }
    snprintf(s->url, sizeof s->url, "%s", line + strlen(prefix));
    return true;
}

/* Starts atoll-server with a fresh data directory. */
static bool server_start(server_t *s, const char *config) {
    return server_start_in(s, config, atoll_tmp_realm_path("server"));
}

static void server_stop(server_t *s) {
    if (s->pid <= 0) return;
    kill(s->pid, SIGTERM);
    int status = 0;
    waitpid(s->pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    s->pid = 0;
}

/* An app whose users file lives in <tmpdir>/<name>.users (the same for the same name). */
static atoll_app_t *new_app(const char *app_id, const char *base_url, const char *name) {
    char dir[600];
    const char *tmp = atoll_tmp_realm_path("meta");
    const char *slash = strrchr(tmp, '/');
    snprintf(dir, sizeof dir, "%.*s/%s.users", (int)(slash ? slash - tmp : 1), slash ? tmp : ".", name);
    char config[1200];
    snprintf(config, sizeof config, "{\"appId\": \"%s\", \"baseUrl\": \"%s\", \"metadataDir\": \"%s\", \"connectTimeoutMs\": 2000}",
             app_id, base_url, dir);
    atoll_app_t *app = atoll_app_new(config);
    CHECK_OK();
    return app;
}

static atoll_user_t *login_anonymous(atoll_app_t *app) {
    atoll_user_t *user = atoll_app_login(app, "{\"provider\": \"anonymous\"}");
    CHECK_OK();
    return user;
}

static char *user_id(atoll_user_t *user) {
    json_t *j = TAKE_JSON(atoll_user_json(user));
    char *id = strdup(j != NULL && atoll_jstr(j, "id") ? atoll_jstr(j, "id") : "");
    json_decref(j);
    return id;
}

/* A synced realm at a fresh path; `sync` is the "sync" object's members. */
static atoll_realm_t *open_synced(atoll_user_t *user, const char *name, const char *sync) {
    char config[4096];
    snprintf(config, sizeof config, "{\"path\": \"%s\", \"schema\": %s, \"sync\": {%s}}", atoll_tmp_realm_path(name), J(TASKS), sync);
    return atoll_realm_open_synced(user, config);
}

static const char *const ALL_TASKS =
    "\"mode\": \"flexible\", \"downloadBeforeOpen\": \"always\", \"timeoutMs\": 10000,"
    " \"initialSubscriptions\": [{\"name\": \"all\", \"class\": \"Task\"}]";

static bool sync_round(atoll_realm_t *writer, atoll_realm_t *reader) {
    atoll_sync_session_t *w = atoll_realm_sync_session(writer);
    atoll_sync_session_t *r = atoll_realm_sync_session(reader);
    bool ok = CHECK(atoll_sync_session_wait_for_upload(w, 10000)) && CHECK(atoll_sync_session_wait_for_download(r, 10000))
              && CHECK(atoll_realm_refresh(reader));
    atoll_sync_session_free(w);
    atoll_sync_session_free(r);
    return ok;
}

static void write_task(atoll_realm_t *realm, const char *json) {
    CHECK(atoll_realm_begin_write(realm));
    atoll_free(atoll_object_create(realm, "Task", J(json), ATOLL_UPDATE_MODIFIED));
    CHECK_OK();
    CHECK(atoll_realm_commit(realm));
}

/* MARK: - Sharing */

static void test_two_users_share_data(void) {
    server_t s = {0};
    if (!server_start(&s, NULL)) return;
    atoll_app_t *app_a = new_app("default", s.url, "meta-a"), *app_b = new_app("default", s.url, "meta-b");
    atoll_user_t *ann = login_anonymous(app_a), *bob = login_anonymous(app_b);
    atoll_realm_t *a = open_synced(ann, "a", ALL_TASKS);
    CHECK_OK();
    atoll_realm_t *b = open_synced(bob, "b", ALL_TASKS);
    CHECK_OK();
    if (a != NULL && b != NULL) {
        write_task(a, "{'_id': 't1', 'name': 'from C', 'priority': 3}");
        if (sync_round(a, b)) {
            json_t *t = GET(b, "Task", "\"t1\"");
            CHECK(t != NULL && atoll_jstr(t, "name") != NULL && strcmp(atoll_jstr(t, "name"), "from C") == 0);
            json_decref(t);
        }
        /* A counter: increments on both sides add up. */
        CHECK(atoll_realm_begin_write(a));
        CHECK(atoll_object_add_integer(a, "Task", "\"t1\"", "priority", 10));
        CHECK(atoll_realm_commit(a));
        CHECK(atoll_realm_begin_write(b));
        CHECK(atoll_object_add_integer(b, "Task", "\"t1\"", "priority", 100));
        CHECK(atoll_realm_commit(b));
        sync_round(a, b);
        sync_round(b, a);
        json_t *t = GET(a, "Task", "\"t1\"");
        CHECK_INT(atoll_jint(t, "priority"), 113);
        json_decref(t);
        t = GET(b, "Task", "\"t1\"");
        CHECK_INT(atoll_jint(t, "priority"), 113);
        json_decref(t);
        /* Session state, and a pause that holds writes back until resume. */
        atoll_sync_session_t *sa = atoll_realm_sync_session(a);
        json_t *st = TAKE_JSON(atoll_sync_session_state_json(sa));
        CHECK_STR(atoll_jstr(st, "state"), "active");
        json_decref(st);
        CHECK(atoll_sync_session_pause(sa));
        write_task(a, "{'_id': 't2', 'name': 'offline'}");
        CHECK(!atoll_sync_session_wait_for_upload(sa, 300));
        CHECK_ERR(ATOLL_ERR_TIMEOUT, "upload");
        CHECK(atoll_sync_session_resume(sa));
        if (sync_round(a, b)) {
            json_t *t = GET(b, "Task", "\"t2\"");
            CHECK(t != NULL);
            json_decref(t);
        }
        atoll_sync_session_free(sa);
    }
    atoll_realm_close(a);
    atoll_realm_close(b);
    /* The user is kept: a new app object on the same metadata finds it. */
    atoll_app_free(app_a);
    app_a = new_app("default", s.url, "meta-a");
    atoll_user_t *again = atoll_app_current_user(app_a);
    CHECK(again != NULL);
    char *id1 = user_id(ann), *id2 = again ? user_id(again) : strdup("");
    CHECK_STR(id2, id1);
    free(id1);
    free(id2);
    CHECK(atoll_user_logout(ann));
    atoll_user_t *after = atoll_app_current_user(app_a);
    CHECK(after == NULL);
    CHECK_OK();
    atoll_user_free(after);
    atoll_user_free(again);
    atoll_user_free(ann);
    atoll_user_free(bob);
    atoll_app_free(app_a);
    atoll_app_free(app_b);
    server_stop(&s);
}

/* MARK: - Rules */

typedef struct errors {
    pthread_mutex_t lock;
    char last[2048];
    int count;
} errors_t;

static void on_error(void *userdata, const char *json) {
    errors_t *e = userdata;
    pthread_mutex_lock(&e->lock);
    if (strstr(json, "writeRejected") != NULL) snprintf(e->last, sizeof e->last, "%s", json);
    e->count++;
    pthread_mutex_unlock(&e->lock);
}

static void test_owner_rules_and_compensating_writes(void) {
    server_t s = {0};
    if (!server_start(&s, OWNERS_CONFIG)) return;
    atoll_app_t *app_a = new_app("owners", s.url, "own-a"), *app_b = new_app("owners", s.url, "own-b");
    atoll_user_t *ann = login_anonymous(app_a), *bob = login_anonymous(app_b);
    errors_t errors = {PTHREAD_MUTEX_INITIALIZER, "", 0};
    atoll_token_t *token = atoll_app_observe_errors(app_a, on_error, &errors, NULL);
    CHECK(token != NULL);
    atoll_realm_t *a = open_synced(ann, "own-a", ALL_TASKS);
    atoll_realm_t *b = open_synced(bob, "own-b", ALL_TASKS);
    char *ann_id = user_id(ann), *bob_id = user_id(bob);
    if (CHECK(a != NULL && b != NULL)) {
        char json[512];
        snprintf(json, sizeof json, "{'_id': 'mine', 'owner_id': '%s'}", bob_id);
        write_task(b, json);
        snprintf(json, sizeof json, "{'_id': 'forged', 'owner_id': '%s'}", bob_id);
        write_task(a, json);
        sync_round(b, a);
        sync_round(a, b);
        sync_round(a, a);
        atoll_results_t *all = atoll_results_query(a, "Task", "TRUEPREDICATE", NULL);
        size_t n = 99;
        CHECK(atoll_results_count(all, &n));
        CHECK_INT(n, 0); /* Bob's task is not Ann's to see; her forged one was undone */
        atoll_results_free(all);
        json_t *forged = GET(b, "Task", "\"forged\"");
        CHECK(forged == NULL);
        json_decref(forged);
        pthread_mutex_lock(&errors.lock);
        CHECK(strstr(errors.last, "\"forged\"") != NULL);
        CHECK(strstr(errors.last, "\"fatal\":false") != NULL);
        pthread_mutex_unlock(&errors.lock);
    }
    free(ann_id);
    free(bob_id);
    atoll_token_free(token);
    atoll_realm_close(a);
    atoll_realm_close(b);
    atoll_user_free(ann);
    atoll_user_free(bob);
    atoll_app_free(app_a);
    atoll_app_free(app_b);
    server_stop(&s);
}

static void test_partition_sync(void) {
    server_t s = {0};
    if (!server_start(&s, OWNERS_CONFIG)) return;
    atoll_app_t *app = new_app("parts", s.url, "parts");
    atoll_user_t *ann = login_anonymous(app);
    char *id = user_id(ann);
    char sync[512];
    snprintf(sync, sizeof sync, "\"mode\": \"partition\", \"partitionValue\": \"%s\", \"downloadBeforeOpen\": \"always\", \"timeoutMs\": 10000", id);
    atoll_realm_t *one = open_synced(ann, "part1", sync);
    atoll_realm_t *two = open_synced(ann, "part2", sync);
    if (CHECK(one != NULL && two != NULL)) {
        char json[512];
        snprintf(json, sizeof json, "{'_id': 'p1', 'owner_id': '%s'}", id);
        write_task(one, json);
        sync_round(one, two);
        json_t *t = GET(two, "Task", "\"p1\"");
        CHECK(t != NULL);
        json_decref(t);
        /* No subscriptions in partition sync. */
        CHECK(!atoll_subscriptions_update(one, "{\"removeAll\": true}", NULL));
        CHECK_ERR(ATOLL_ERR_SYNC, "partition");
        /* Out as a local realm: no sync metadata. */
        const char *copy = atoll_tmp_realm_path("local-copy");
        char config[1024];
        snprintf(config, sizeof config, "{\"path\": \"%s\"}", copy);
        CHECK(atoll_realm_write_copy_synced(one, config, NULL));
        atoll_realm_t *local = atoll_realm_open(config);
        CHECK(local != NULL);
        json_t *p = GET(local, "Task", "\"p1\"");
        CHECK(p != NULL);
        json_decref(p);
        CHECK(atoll_realm_sync_session(local) == NULL);
        CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "not synced");
        atoll_realm_close(local);
    }
    free(id);
    atoll_realm_close(one);
    atoll_realm_close(two);
    atoll_user_free(ann);
    atoll_app_free(app);
    server_stop(&s);
}

/* MARK: - Subscriptions */

static void test_subscriptions(void) {
    server_t s = {0};
    if (!server_start(&s, NULL)) return;
    atoll_app_t *app = new_app("default", s.url, "subs");
    atoll_user_t *user = login_anonymous(app);
    atoll_realm_t *r = open_synced(user, "subs", ALL_TASKS);
    if (CHECK(r != NULL)) {
        uint64_t v = 0;
        CHECK(!atoll_subscriptions_update(r, "{\"add\": [{\"name\": \"all\", \"class\": \"Task\"}]}", &v));
        CHECK_ERR(ATOLL_ERR_SUBSCRIPTION_EXISTS, "all");
        CHECK(atoll_subscriptions_update(r, "{\"add\": [{\"name\": \"high\", \"class\": \"Task\", \"query\": \"priority > $0\", \"args\": [5]}]}", &v));
        CHECK(atoll_subscriptions_wait(r, v, 10000));
        json_t *set = TAKE_JSON(atoll_subscriptions_json(r));
        CHECK_STR(atoll_jstr(set, "state"), "complete");
        CHECK_INT(json_array_size(json_object_get(set, "subscriptions")), 2);
        json_decref(set);
        CHECK(atoll_subscriptions_update(r, "{\"add\": [{\"name\": \"sorted\", \"class\": \"Task\", \"query\": \"priority > 0 SORT(priority ASC)\"}]}", &v));
        CHECK(!atoll_subscriptions_wait(r, v, 10000));
        CHECK_ERR(ATOLL_ERR_SUBSCRIPTION, "SORT");
        set = TAKE_JSON(atoll_subscriptions_json(r));
        CHECK_STR(atoll_jstr(set, "state"), "error");
        json_decref(set);
        CHECK(!atoll_subscriptions_update(r, "{\"update\": [{\"name\": \"nope\", \"query\": \"TRUEPREDICATE\"}]}", &v));
        CHECK_ERR(ATOLL_ERR_NOT_FOUND, "nope");
        CHECK(!atoll_subscriptions_update(r, "{\"bogus\": 1}", &v));
        CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "bogus");
    }
    atoll_realm_close(r);
    atoll_user_free(user);
    atoll_app_free(app);
    server_stop(&s);
}

/* MARK: - AsyncOpen and timeouts */

typedef struct opening {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    char last[512];
    bool done;
    bool freed;
} opening_t;

static void on_open(void *userdata, const char *json) {
    opening_t *o = userdata;
    pthread_mutex_lock(&o->lock);
    snprintf(o->last, sizeof o->last, "%s", json);
    if (strstr(json, "\"open\"") != NULL || strstr(json, "\"error\"") != NULL) o->done = true;
    pthread_cond_broadcast(&o->changed);
    pthread_mutex_unlock(&o->lock);
}

static void opening_freed(void *userdata) { ((opening_t *)userdata)->freed = true; }

static void wait_done(opening_t *o) {
    pthread_mutex_lock(&o->lock);
    double until = atoll_now() + 20;
    while (!o->done && atoll_now() < until) {
        pthread_mutex_unlock(&o->lock);
        atoll_sleep_ms(20);
        pthread_mutex_lock(&o->lock);
    }
    pthread_mutex_unlock(&o->lock);
}

static void test_async_open_and_timeouts(void) {
    server_t s = {0};
    if (!server_start(&s, NULL)) return;
    atoll_app_t *app = new_app("default", s.url, "async");
    atoll_user_t *user = login_anonymous(app);
    char config[4096];
    snprintf(config, sizeof config, "{\"path\": \"%s\", \"schema\": %s, \"sync\": {%s}}", atoll_tmp_realm_path("async"), J(TASKS), ALL_TASKS);
    opening_t o = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, "", false, false};
    atoll_async_open_t *task = atoll_realm_async_open(user, config, on_open, &o, opening_freed);
    CHECK(task != NULL);
    wait_done(&o);
    CHECK(strstr(o.last, "\"open\"") != NULL);
    atoll_realm_t *r = atoll_async_open_take_realm(task);
    CHECK(r != NULL);
    CHECK(atoll_async_open_take_realm(task) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "taken");
    atoll_async_open_free(task);
    CHECK(o.freed);
    atoll_realm_close(r);

    /* The same user through an app whose server is gone: a timeout, or the local data. */
    server_stop(&s);
    atoll_app_t *gone = new_app("default", s.url, "async");
    atoll_user_t *kept = atoll_app_current_user(gone);
    if (CHECK(kept != NULL)) {
        char sync[512];
        snprintf(sync, sizeof sync, "\"downloadBeforeOpen\": \"always\", \"timeoutMs\": 1000, \"initialSubscriptions\": [{\"name\": \"all\", \"class\": \"Task\"}]");
        CHECK(open_synced(kept, "async-offline", sync) == NULL);
        CHECK_ERR(ATOLL_ERR_TIMEOUT, "");
        snprintf(sync, sizeof sync, "\"downloadBeforeOpen\": \"always\", \"timeoutMs\": 500, \"offlineFallback\": true");
        atoll_realm_t *offline = open_synced(kept, "async-offline", sync);
        CHECK(offline != NULL);
        atoll_realm_close(offline);
        opening_t o2 = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, "", false, false};
        snprintf(config, sizeof config, "{\"path\": \"%s\", \"schema\": %s, \"sync\": {\"timeoutMs\": 800}}", atoll_tmp_realm_path("async2"), J(TASKS));
        atoll_async_open_t *t2 = atoll_realm_async_open(kept, config, on_open, &o2, NULL);
        wait_done(&o2);
        CHECK(strstr(o2.last, "ATOLL_ERR_TIMEOUT") != NULL);
        atoll_async_open_free(t2);
    }
    atoll_user_free(kept);
    atoll_user_free(user);
    atoll_app_free(gone);
    atoll_app_free(app);
}

/* MARK: - Client reset */

static void test_client_reset_recovers_unsynced_changes(void) {
    server_t s = {0};
    if (!server_start(&s, NULL)) return;
    atoll_app_t *app = new_app("default", s.url, "reset");
    atoll_user_t *user = login_anonymous(app);
    const char *path = atoll_tmp_realm_path("reset");
    char config[4096];
    snprintf(config, sizeof config, "{\"path\": \"%s\", \"schema\": %s, \"sync\": {%s, \"clientResetMode\": \"recoverUnsyncedChanges\"}}",
             path, J(TASKS), ALL_TASKS);
    atoll_realm_t *r = atoll_realm_open_synced(user, config);
    if (!CHECK(r != NULL)) return;
    write_task(r, "{'_id': 'synced'}");
    atoll_sync_session_t *session = atoll_realm_sync_session(r);
    CHECK(atoll_sync_session_wait_for_upload(session, 10000));
    CHECK(atoll_sync_session_pause(session));
    write_task(r, "{'_id': 'unsynced'}");
    atoll_sync_session_free(session);
    atoll_realm_close(r);

    /* The server loses its data (not its users): the client's file is unknown to it. */
    server_stop(&s);
    char data[700];
    snprintf(data, sizeof data, "%s/default/data.realm", s.dir);
    CHECK(unlink(data) == 0);
    char old_dir[512];
    snprintf(old_dir, sizeof old_dir, "%s", s.dir);
    /* Started again on the same data directory (a new port). */
    server_t again = {0};
    if (!server_start_in(&again, NULL, old_dir)) return;
    atoll_app_t *app2 = new_app("default", again.url, "reset");
    atoll_user_t *kept = atoll_app_current_user(app2);
    CHECK(kept != NULL);
    errors_t errors = {PTHREAD_MUTEX_INITIALIZER, "", 0};
    atoll_token_t *token = atoll_app_observe_errors(app2, on_error, &errors, NULL);
    r = atoll_realm_open_synced(kept, config);
    CHECK_OK();
    if (r != NULL) {
        /* The reset happened (or is happening): wait until the recovered change is on the server. */
        atoll_sync_session_t *s2 = atoll_realm_sync_session(r);
        for (int i = 0; i < 100; i++) {
            atoll_sync_session_wait_for_upload(s2, 2000);
            atoll_sync_session_wait_for_download(s2, 2000);
            atoll_realm_refresh(r);
            json_t *u = GET(r, "Task", "\"unsynced\"");
            bool there = u != NULL;
            json_decref(u);
            if (there) break;
            atoll_sleep_ms(50);
        }
        json_t *u = GET(r, "Task", "\"unsynced\"");
        CHECK(u != NULL);
        json_decref(u);
        json_t *gone = GET(r, "Task", "\"synced\"");
        CHECK(gone == NULL);                /* the server lost it; the reset follows the server */
        json_decref(gone);
        atoll_sync_session_free(s2);
        /* Another client sees the recovered change. */
        atoll_app_t *other_app = new_app("default", again.url, "reset-other");
        atoll_user_t *other = login_anonymous(other_app);
        atoll_realm_t *o = open_synced(other, "reset-other", ALL_TASKS);
        if (CHECK(o != NULL)) {
            json_t *seen = GET(o, "Task", "\"unsynced\"");
            CHECK(seen != NULL);
            json_decref(seen);
        }
        atoll_realm_close(o);
        atoll_user_free(other);
        atoll_app_free(other_app);
    }
    atoll_token_free(token);
    CHECK(errors.count > 0);                /* the clientReset error was reported */
    atoll_realm_close(r);
    atoll_user_free(kept);
    atoll_user_free(user);
    atoll_app_free(app2);
    atoll_app_free(app);
    server_stop(&again);
}

/* MARK: - Bad input */

static void test_bad_input(void) {
    CHECK(atoll_app_new(NULL) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "NULL");
    CHECK(atoll_app_new("{") == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "");
    CHECK(atoll_app_new("{\"appId\": \"a b\"}") == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "appId");
    CHECK(atoll_app_new("{\"appId\": \"x\", \"baseUrl\": \"ftp://x\"}") == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "baseUrl");
    CHECK(atoll_app_new("{\"appId\": \"x\", \"colour\": 1}") == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "colour");
    CHECK(atoll_app_login(NULL, "{\"provider\": \"anonymous\"}") == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "app");
    atoll_app_t *app = new_app("default", "http://127.0.0.1:9", "bad");
    CHECK(atoll_app_login(app, "{\"provider\": \"telepathy\"}") == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "telepathy");
    CHECK(atoll_app_login(app, "{\"provider\": \"emailPassword\"}") == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "email");
    CHECK(atoll_app_login(app, "{\"provider\": \"anonymous\"}") == NULL);
    CHECK_ERR(ATOLL_ERR_NETWORK, "");
    CHECK(atoll_app_current_user(app) == NULL);
    CHECK_OK();
    CHECK(atoll_realm_open_synced(NULL, "{}") == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "user");
    CHECK(atoll_realm_open_synced((atoll_user_t *)app, "{}") == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "user");
    CHECK(atoll_user_json(NULL) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "user");
    CHECK(atoll_sync_session_state_json(NULL) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "session");
    CHECK(atoll_subscriptions_json(NULL) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "realm");
    atoll_user_free(NULL);
    atoll_app_free(NULL);
    atoll_sync_session_free(NULL);
    atoll_async_open_free(NULL);
    atoll_app_free(app);

    server_t s = {0};
    if (!server_start(&s, NULL)) return;
    app = new_app("default", s.url, "bad2");
    CHECK(atoll_app_register_email(app, "ann@example.com", "secret-1"));
    CHECK(!atoll_app_register_email(app, "ann@example.com", "secret-1"));
    CHECK_ERR(ATOLL_ERR_AUTH, "");
    CHECK(atoll_app_login(app, "{\"provider\": \"emailPassword\", \"email\": \"ann@example.com\", \"password\": \"wrong-pw\"}") == NULL);
    CHECK_ERR(ATOLL_ERR_AUTH, "");
    atoll_user_t *ann = atoll_app_login(app, "{\"provider\": \"emailPassword\", \"email\": \"ann@example.com\", \"password\": \"secret-1\"}");
    CHECK(ann != NULL);
    CHECK(atoll_realm_open_synced(ann, "{\"path\": \"x.realm\"}") == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "sync");
    CHECK(atoll_realm_open_synced(ann, "{\"path\": \"x.realm\", \"sync\": {\"mode\": \"sideways\"}}") == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "mode");
    CHECK(atoll_realm_open_synced(ann, "{\"path\": \"x.realm\", \"sync\": {\"mode\": \"partition\"}}") == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "partitionValue");
    atoll_user_free(ann);
    atoll_app_free(app);
    server_stop(&s);
}

static const atoll_test_t tests[] = {
    ATOLL_TEST(test_two_users_share_data),
    ATOLL_TEST(test_owner_rules_and_compensating_writes),
    ATOLL_TEST(test_partition_sync),
    ATOLL_TEST(test_subscriptions),
    ATOLL_TEST(test_async_open_and_timeouts),
    ATOLL_TEST(test_client_reset_recovers_unsynced_changes),
    ATOLL_TEST(test_bad_input),
};

int main(int argc, char **argv) { return ATOLL_CHECK_MAIN(tests, argc, argv); }
