/* check.c — see check.h. */
#define _XOPEN_SOURCE 700
#include "check.h"

#include <ctype.h>
#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static atomic_uint passed_count;
static atomic_uint failed_count;
static const char *current_test = "?";
static char tmp_dir[512];
static pid_t tmp_dir_owner;

void atoll_check_counts(unsigned *passed, unsigned *failed) {
    *passed = atomic_load(&passed_count);
    *failed = atomic_load(&failed_count);
}

/* Prints the calling thread's last error without disturbing it for later checks: only
 * atoll_last_error() is called before the message is copied. */
static void print_last_error(FILE *out) {
    atoll_error_t e = { -1, NULL };
    bool has = atoll_last_error(&e);
    char message[1024];
    snprintf(message, sizeof message, "%s", e.message ? e.message : "(NULL message)");
    int code = e.code;
    const char *name = atoll_status_name(code);
    fprintf(out, "        last error: %s, %s (%d) \"%s\"\n", has ? "set" : "not set",
            name ? name : "unknown code", code, message);
}

/* Failures print their details up to this many per process (a failing check in a loop would
 * otherwise bury everything else); all are counted. */
enum { MAX_PRINTED_FAILURES = 40 };

static FILE *fail_stream(void) {
    static FILE *null_stream;
    unsigned failed = atomic_load(&failed_count);
    if (failed <= MAX_PRINTED_FAILURES) return stdout;
    if (failed == MAX_PRINTED_FAILURES + 1)
        fprintf(stdout, "    (more failures in %s: not printed)\n", current_test);
    if (null_stream == NULL) null_stream = fopen("/dev/null", "w");
    return null_stream ? null_stream : stdout;
}

static void fail_header(FILE *out, const char *file, int line) {
    const char *base = strrchr(file, '/');
    fprintf(out, "    FAIL %s:%d [%s]: ", base ? base + 1 : file, line, current_test);
}

bool atoll_check_(bool ok, const char *expr, const char *file, int line) {
    if (ok) {
        atomic_fetch_add(&passed_count, 1);
        return true;
    }
    atomic_fetch_add(&failed_count, 1);
    FILE *out = fail_stream();
    flockfile(out);
    fail_header(out, file, line);
    fprintf(out, "CHECK(%s)\n", expr);
    print_last_error(out);
    funlockfile(out);
    fflush(out);
    return false;
}

bool atoll_check_err_(int code, const char *code_expr, const char *substring, const char *file,
                      int line) {
    atoll_error_t e = { -1, NULL };
    bool has = atoll_last_error(&e);
    bool ok = has && e.code == code && e.message != NULL &&
              (substring == NULL || atoll_contains_ci(e.message, substring));
    if (ok) {
        atomic_fetch_add(&passed_count, 1);
        return true;
    }
    char message[1024];
    snprintf(message, sizeof message, "%s", e.message ? e.message : "(NULL message)");
    int got = e.code;
    const char *got_name = atoll_status_name(got);
    atomic_fetch_add(&failed_count, 1);
    FILE *out = fail_stream();
    flockfile(out);
    fail_header(out, file, line);
    fprintf(out, "CHECK_ERR(%s, \"%s\")\n", code_expr, substring ? substring : "");
    fprintf(out, "        last error: %s, %s (%d) \"%s\"\n", has ? "set" : "NOT SET",
            got_name ? got_name : "unknown code", got, message);
    funlockfile(out);
    fflush(out);
    return false;
}

bool atoll_check_ok_(const char *file, int line) {
    atoll_error_t e = { -1, NULL };
    bool has = atoll_last_error(&e);
    bool ok = !has && e.code == ATOLL_OK && e.message != NULL && e.message[0] == '\0';
    if (ok) {
        atomic_fetch_add(&passed_count, 1);
        return true;
    }
    char message[1024];
    snprintf(message, sizeof message, "%s", e.message ? e.message : "(NULL message)");
    int got = e.code;
    const char *got_name = atoll_status_name(got);
    atomic_fetch_add(&failed_count, 1);
    FILE *out = fail_stream();
    flockfile(out);
    fail_header(out, file, line);
    fprintf(out, "CHECK_OK()\n        last error: %s, %s (%d) \"%s\"\n",
            has ? "set" : "not set", got_name ? got_name : "unknown code", got, message);
    funlockfile(out);
    fflush(out);
    return false;
}

bool atoll_check_str_(const char *got, const char *expected, const char *expr, const char *file,
                      int line) {
    bool ok = (got == NULL && expected == NULL) ||
              (got != NULL && expected != NULL && strcmp(got, expected) == 0);
    if (ok) {
        atomic_fetch_add(&passed_count, 1);
        return true;
    }
    atomic_fetch_add(&failed_count, 1);
    FILE *out = fail_stream();
    flockfile(out);
    fail_header(out, file, line);
    fprintf(out, "CHECK_STR(%s)\n        expected: %s%s%s\n        got:      %s%s%s\n", expr,
            expected ? "\"" : "", expected ? expected : "NULL", expected ? "\"" : "",
            got ? "\"" : "", got ? got : "NULL", got ? "\"" : "");
    print_last_error(out);
    funlockfile(out);
    fflush(out);
    return false;
}

bool atoll_check_int_(long long got, long long expected, const char *expr, const char *file,
                      int line) {
    if (got == expected) {
        atomic_fetch_add(&passed_count, 1);
        return true;
    }
    atomic_fetch_add(&failed_count, 1);
    FILE *out = fail_stream();
    flockfile(out);
    fail_header(out, file, line);
    fprintf(out, "CHECK_INT(%s)\n        expected: %lld\n        got:      %lld\n", expr,
            expected, got);
    print_last_error(out);
    funlockfile(out);
    fflush(out);
    return false;
}

bool atoll_contains_ci(const char *haystack, const char *needle) {
    if (haystack == NULL) return false;
    if (needle == NULL || needle[0] == '\0') return true;
    size_t n = strlen(needle);
    for (const char *h = haystack; *h; h++) {
        size_t i = 0;
        while (i < n && h[i] &&
               tolower((unsigned char)h[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (i == n) return true;
    }
    return false;
}

/* MARK: - Temporary realms */

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)flag; (void)ftw;
    return remove(path);
}

static void remove_tmp_dir(void) {
    if (tmp_dir[0] && getpid() == tmp_dir_owner && getenv("ATOLL_TEST_KEEP") == NULL)
        nftw(tmp_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void make_tmp_dir(void) {
    if (tmp_dir[0]) return;
    const char *base = getenv("TMPDIR");
    snprintf(tmp_dir, sizeof tmp_dir, "%s/atoll-ctest-XXXXXX", base && *base ? base : "/tmp");
    if (mkdtemp(tmp_dir) == NULL) {
        perror("mkdtemp");
        exit(2);
    }
    tmp_dir_owner = getpid();
}

const char *atoll_tmp_realm_path(const char *name) {
    static char slots[8][640];
    static atomic_uint next_slot;
    static atomic_uint counter;
    make_tmp_dir();
    unsigned slot = atomic_fetch_add(&next_slot, 1) % 8;
    snprintf(slots[slot], sizeof slots[slot], "%s/%s-%ld-%u.realm", tmp_dir, name,
             (long)getpid(), atomic_fetch_add(&counter, 1));
    return slots[slot];
}

const char *const ATOLL_TEST_SCHEMA =
    "["
    "{\"name\": \"Dog\", \"primaryKey\": \"_id\", \"properties\": {"
    "  \"_id\": \"int\", \"name\": \"string\", \"age\": \"int\", \"owner\": \"Person?\"}},"
    "{\"name\": \"Person\", \"primaryKey\": \"name\", \"properties\": {"
    "  \"name\": \"string\", \"age\": \"int\", \"dogs\": \"Dog[]\"}},"
    "{\"name\": \"Note\", \"properties\": {\"text\": \"string\"}}"
    "]";

atoll_realm_t *atoll_test_open(const char *path, const char *extra) {
    char config[4096];
    if (path)
        snprintf(config, sizeof config, "{\"path\": \"%s\", \"schema\": %s%s%s}", path,
                 ATOLL_TEST_SCHEMA, extra ? ", " : "", extra ? extra : "");
    else
        snprintf(config, sizeof config, "{\"inMemory\": true, \"schema\": %s%s%s}",
                 ATOLL_TEST_SCHEMA, extra ? ", " : "", extra ? extra : "");
    return atoll_realm_open(config);
}

/* MARK: - JSON */

json_t *atoll_take_json(char *text, const char *file, int line) {
    if (text == NULL) return NULL;
    json_error_t error;
    json_t *value = json_loads(text, JSON_DECODE_ANY, &error);
    if (value == NULL) {
        atomic_fetch_add(&failed_count, 1);
        fail_header(stdout, file, line);
        fprintf(stdout, "the library returned text that is not JSON (%s): %s\n", error.text,
                text);
        fflush(stdout);
    }
    atoll_free(text);
    return value;
}

json_t *atoll_parse(const char *text) {
    json_error_t error;
    json_t *value = json_loads(text, JSON_DECODE_ANY, &error);
    if (value == NULL) {
        fprintf(stdout, "test bug: JSON does not parse (%s): %s\n", error.text, text);
        exit(2);
    }
    return value;
}

const char *atoll_quotes(const char *text) {
    static _Thread_local char slots[16][4096];
    static _Thread_local unsigned next;
    char *out = slots[next++ % 16];
    snprintf(out, sizeof slots[0], "%s", text);
    for (char *p = out; *p; p++)
        if (*p == '\'') *p = '"';
    return out;
}

bool atoll_check_json_(const json_t *got, const char *expected, const char *expr, const char *file, int line) {
    json_t *want = atoll_parse(atoll_quotes(expected));
    bool ok = got != NULL && json_equal((json_t *)got, want);
    if (!atoll_check_(ok, expr, file, line)) {
        char *g = got ? json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY) : NULL;
        char *w = json_dumps(want, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
        printf("        expected: %s\n        got:      %s\n", w, g ? g : "NULL");
        free(g);
        free(w);
    }
    json_decref(want);
    return ok;
}

const char *atoll_jstr(const json_t *obj, const char *key) {
    json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
    return json_is_string(v) ? json_string_value(v) : NULL;
}

long long atoll_jint(const json_t *obj, const char *key) {
    json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
    return json_is_integer(v) ? (long long)json_integer_value(v) : -999999;
}

/* MARK: - Time */

double atoll_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void atoll_sleep_ms(unsigned ms) {
    struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

/* MARK: - Runner */

static bool selected(const char *name, int argc, char **argv) {
    if (argc <= 1) return true;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], name) == 0) return true;
    return false;
}

int atoll_check_main(const char *file, const atoll_test_t *tests, size_t count, int argc,
                     char **argv) {
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    bool fork_each = getenv("ATOLL_TEST_NOFORK") == NULL;
    const char *timeout_env = getenv("ATOLL_TEST_TIMEOUT");
    unsigned timeout = timeout_env ? (unsigned)atoi(timeout_env) : 60;
    unsigned total_passed = 0, total_failed = 0, tests_passed = 0, tests_failed = 0;

    setvbuf(stdout, NULL, _IOLBF, 0);
    make_tmp_dir();
    atexit(remove_tmp_dir);
    printf("%s: library %s (header %s)\n", base, atoll_libversion(), ATOLL_VERSION);

    for (size_t i = 0; i < count; i++) {
        if (!selected(tests[i].name, argc, argv)) continue;
        current_test = tests[i].name;
        unsigned passed = 0, failed = 0;
        const char *problem = NULL;
        char problem_text[128];

        if (fork_each) {
            int fds[2];
            if (pipe(fds) != 0) { perror("pipe"); return 2; }
            fflush(stdout);
            fflush(stderr);
            pid_t pid = fork();
            if (pid < 0) { perror("fork"); return 2; }
            if (pid == 0) {
                close(fds[0]);
                alarm(timeout);
                tests[i].fn();
                unsigned counts[2];
                atoll_check_counts(&counts[0], &counts[1]);
                fflush(stdout);
                if (write(fds[1], counts, sizeof counts) != (ssize_t)sizeof counts) _exit(3);
                _exit(0);
            }
            close(fds[1]);
            unsigned counts[2] = { 0, 0 };
            ssize_t got = read(fds[0], counts, sizeof counts);
            close(fds[0]);
            int status = 0;
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
            }
            passed = counts[0];
            failed = counts[1];
            if (WIFSIGNALED(status)) {
                if (WTERMSIG(status) == SIGALRM)
                    snprintf(problem_text, sizeof problem_text, "TIMED OUT after %u s", timeout);
                else
                    snprintf(problem_text, sizeof problem_text, "CRASHED: %s",
                             strsignal(WTERMSIG(status)));
                problem = problem_text;
            } else if (got != (ssize_t)sizeof counts || !WIFEXITED(status) ||
                       WEXITSTATUS(status) != 0) {
                snprintf(problem_text, sizeof problem_text, "exited early (status %d)",
                         WIFEXITED(status) ? WEXITSTATUS(status) : -1);
                problem = problem_text;
            }
        } else {
            unsigned p0, f0;
            atoll_check_counts(&p0, &f0);
            tests[i].fn();
            atoll_check_counts(&passed, &failed);
            passed -= p0;
            failed -= f0;
        }

        if (problem) failed++;
        total_passed += passed;
        total_failed += failed;
        if (failed) tests_failed++; else tests_passed++;
        printf("  %-4s %s (%u checks%s%s)\n", failed ? "FAIL" : "ok", tests[i].name,
               passed + failed, problem ? "; " : "", problem ? problem : "");
    }
    printf("%s: %u tests passed, %u failed; %u checks passed, %u failed\n", base, tests_passed,
           tests_failed, total_passed, total_failed);
    return total_failed ? 1 : 0;
}
