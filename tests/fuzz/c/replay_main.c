/* A main for the C fuzz targets without libFuzzer: runs each file given, or each file of each
 * directory given, through LLVMFuzzerTestOneInput once. ctest uses it to replay the corpora
 * (tests/fuzz/corpus, with the regressions in it) against the normal library; a broken
 * contract aborts, as under libFuzzer. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *data = malloc(size > 0 ? (size_t)size : 1);
    if (data == NULL || (size > 0 && fread(data, 1, (size_t)size, f) != (size_t)size)) {
        fprintf(stderr, "%s: cannot read\n", path);
        fclose(f);
        free(data);
        return 1;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(data, (size_t)size);
    free(data);
    return 0;
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    int ran = 0, failed = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            return 2;
        }
        if (!S_ISDIR(st.st_mode)) {
            failed += run_file(argv[i]);
            ran++;
            continue;
        }
        DIR *dir = opendir(argv[i]);
        if (dir == NULL) {
            perror(argv[i]);
            return 2;
        }
        char **names = NULL;
        size_t count = 0;
        for (struct dirent *e; (e = readdir(dir)) != NULL;) {
            if (e->d_name[0] == '.') continue;
            names = realloc(names, (count + 1) * sizeof *names);
            size_t length = strlen(argv[i]) + strlen(e->d_name) + 2;
            names[count] = malloc(length);
            snprintf(names[count++], length, "%s/%s", argv[i], e->d_name);
        }
        closedir(dir);
        qsort(names, count, sizeof *names, by_name);
        for (size_t n = 0; n < count; n++) {
            failed += run_file(names[n]);
            ran++;
            free(names[n]);
        }
        free(names);
    }
    printf("%s: %d inputs ran\n", argv[0], ran);
    return failed ? 1 : 0;
}
