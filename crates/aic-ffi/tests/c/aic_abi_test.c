/*
 * aic_abi_test: uses libaic through include/aic.h exactly as a C simulator would, and checks
 * both the answers and the misuse handling of the C ABI.
 *
 *   aic_abi_test SPEC_JSON BINARY_SPEC SYSTEMS_DIR QUERIES
 *
 * SPEC_JSON / BINARY_SPEC: the same engine spec in its two wire forms. SYSTEMS_DIR: the perf
 * data folder (data/systems). QUERIES: one estimate per line, written by tests/c_abi.rs from a
 * golden case:
 *
 *   ok  KIND A B C D E GOLDEN_MS RUST_BITS   the estimate must succeed, agree with the golden
 *                                            value to 1e-9 relative and have exactly the bits
 *                                            (hex) the Rust engine gives
 *   err KIND A B C D E STATUS MESSAGE...     the estimate must fail with STATUS and a last-error
 *                                            message containing MESSAGE
 *
 * KIND is prefill (A=batch B=isl C=prefix), decode (A=batch B=isl C=osl), decode_step
 * (A=requests B=isl C=osl) or mixed_step (A=ctx_tokens B=gen_requests C=isl D=osl E=prefix).
 * Prints one line per failed check and a summary; exits 0 only if every check passed.
 */
#include "aic.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int passed = 0;
static int failed = 0;

static void check(int ok, const char *what, const char *detail) {
    if (ok) {
        passed++;
    } else {
        failed++;
        printf("FAIL %s: %s\n", what, detail ? detail : "");
    }
}

/* The call returned `want` and left a last-error message containing `needle`. */
static void expect_status(const char *what, AicStatus got, AicStatus want, const char *needle) {
    char detail[1024];
    const char *message = aic_last_error_message();
    snprintf(detail, sizeof detail, "status %s (%d), expected %s (%d); last error: \"%s\"",
             aic_status_name(got), (int)got, aic_status_name(want), (int)want,
             message ? message : "(NULL)");
    check(got == want, what, detail);
    if (want == AIC_STATUS_OK) {
        check(message != NULL && message[0] == '\0' && aic_last_error_length() == 0, what,
              "a successful call must leave an empty last error");
        return;
    }
    check(message != NULL && strlen(message) == aic_last_error_length(), what,
          "aic_last_error_length() must be the length of aic_last_error_message()");
    check(message != NULL && needle != NULL && strstr(message, needle) != NULL, what, detail);
}

static double estimate(AicEngineHandle engine, const char *kind, const int64_t a[5],
                       AicStatus *status) {
    double ms = -12345.0; /* must stay untouched when the call fails */
    if (strcmp(kind, "prefill") == 0) {
        *status = aic_prefill_ms(engine, a[0], a[1], a[2], &ms);
    } else if (strcmp(kind, "decode") == 0) {
        *status = aic_decode_ms(engine, a[0], a[1], a[2], &ms);
    } else if (strcmp(kind, "decode_step") == 0) {
        *status = aic_decode_step_ms(engine, a[0], a[1], a[2], &ms);
    } else if (strcmp(kind, "mixed_step") == 0) {
        *status = aic_mixed_step_ms(engine, a[0], a[1], a[2], a[3], a[4], &ms);
    } else {
        printf("FAIL queries file: unknown kind \"%s\"\n", kind);
        failed++;
        *status = AIC_STATUS_INTERNAL;
    }
    return ms;
}

static double from_bits(uint64_t bits) {
    double value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

/* Replays every query of the file against `engine`; returns how many were run. */
static int replay_queries(AicEngineHandle engine, const char *path) {
    FILE *file = fopen(path, "r");
    char line[2048];
    int count = 0;
    if (!file) {
        printf("FAIL cannot open queries file %s\n", path);
        failed++;
        return 0;
    }
    while (fgets(line, sizeof line, file)) {
        char outcome[8], kind[32], what[sizeof line + 16];
        int64_t a[5];
        int used = 0;
        AicStatus status;
        line[strcspn(line, "\n")] = '\0';
        if (sscanf(line, "%7s %31s %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNd64 "%n",
                   outcome, kind, &a[0], &a[1], &a[2], &a[3], &a[4], &used) != 7) {
            printf("FAIL queries file: cannot parse \"%s\"\n", line);
            failed++;
            continue;
        }
        snprintf(what, sizeof what, "query \"%s\"", line);
        double ms = estimate(engine, kind, a, &status);
        if (strcmp(outcome, "ok") == 0) {
            double golden;
            uint64_t rust_bits;
            char detail[512];
            if (sscanf(line + used, "%lf %" SCNx64, &golden, &rust_bits) != 2) {
                printf("FAIL queries file: no expected values in \"%s\"\n", line);
                failed++;
                continue;
            }
            expect_status(what, status, AIC_STATUS_OK, NULL);
            snprintf(detail, sizeof detail, "got %.17g, golden %.17g, Rust engine %.17g", ms,
                     golden, from_bits(rust_bits));
            check(fabs(ms - golden) <= 1e-9 * fabs(golden), what, detail);
            check(memcmp(&ms, &(double){from_bits(rust_bits)}, sizeof ms) == 0, what, detail);
        } else {
            int want = 0, skip = 0;
            if (sscanf(line + used, "%d %n", &want, &skip) != 1) {
                printf("FAIL queries file: no expected status in \"%s\"\n", line);
                failed++;
                continue;
            }
            expect_status(what, status, (AicStatus)want, line + used + skip);
            check(ms == -12345.0, what, "a failed estimate must not write its out-pointer");
        }
        count++;
    }
    fclose(file);
    return count;
}

static unsigned char *read_file(const char *path, size_t *len) {
    FILE *file = fopen(path, "rb");
    unsigned char *data = NULL;
    long size;
    if (!file) return NULL;
    if (fseek(file, 0, SEEK_END) == 0 && (size = ftell(file)) >= 0 && fseek(file, 0, SEEK_SET) == 0) {
        data = malloc((size_t)size + 1);
        if (data && fread(data, 1, (size_t)size, file) != (size_t)size) {
            free(data);
            data = NULL;
        }
        *len = (size_t)size;
    }
    fclose(file);
    return data;
}

/* ----------------------------------------------------------------------------------------- */
/* Threads: one engine shared by several threads; the last error is per thread.              */

struct worker {
    AicEngineHandle engine;
    double expected;
    int mismatches;
    int error_isolated;
};

static void *worker_main(void *arg) {
    struct worker *w = arg;
    for (int i = 0; i < 20; i++) {
        double ms = 0.0;
        if (aic_prefill_ms(w->engine, 1, 1024, 0, &ms) != AIC_STATUS_OK || ms != w->expected) {
            w->mismatches++;
        }
    }
    /* The main thread's pending error must not be visible here. */
    w->error_isolated = aic_last_error_length() == 0;
    return NULL;
}

static void test_threads(AicEngineHandle engine) {
    double expected = 0.0;
    pthread_t threads[4];
    struct worker workers[4];
    check(aic_prefill_ms(engine, 1, 1024, 0, &expected) == AIC_STATUS_OK, "threads: reference", NULL);
    double ignored;
    aic_prefill_ms(engine, -1, 1024, 0, &ignored); /* leave an error on the main thread */
    for (int i = 0; i < 4; i++) {
        workers[i] = (struct worker){engine, expected, 0, 0};
        check(pthread_create(&threads[i], NULL, worker_main, &workers[i]) == 0, "threads: create", NULL);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(threads[i], NULL);
        check(workers[i].mismatches == 0, "threads: same bits from every thread", NULL);
        check(workers[i].error_isolated, "threads: last error is per thread", NULL);
    }
    check(strstr(aic_last_error_message(), "batch_size is -1") != NULL,
          "threads: main thread keeps its own last error", aic_last_error_message());
}

/* ----------------------------------------------------------------------------------------- */

static void test_last_error_copy(void) {
    double ms;
    char small[8], big[512];
    AicEngineHandle none = {0};
    aic_prefill_ms(none, 1, 1, 0, &ms);
    size_t full = aic_last_error_length();
    size_t n = aic_last_error_copy(small, sizeof small);
    check(n == full && full > sizeof small, "last_error_copy: returns the full length", NULL);
    check(strlen(small) == sizeof small - 1 &&
              strncmp(small, aic_last_error_message(), sizeof small - 1) == 0,
          "last_error_copy: truncates and terminates", small);
    check(aic_last_error_copy(NULL, 0) == full, "last_error_copy: NULL buffer gives the length", NULL);
    check(aic_last_error_copy(big, sizeof big) == full && strcmp(big, aic_last_error_message()) == 0,
          "last_error_copy: copies the whole message", big);
}

static void test_misuse(AicEngineHandle engine, const char *spec_path, const char *systems) {
    double ms = 0.0;
    AicEngineHandle none = {0};
    AicEngineHandle forged = {UINT64_C(0x00000007deadbeef)};
    AicEngineHandle out = {42};
    unsigned char garbage[] = {0xde, 0xad, 0xbe, 0xef, '{', 0x00, 0x13};

    expect_status("null engine", aic_prefill_ms(none, 1, 128, 0, &ms), AIC_STATUS_INVALID_HANDLE,
                  "engine handle is 0");
    expect_status("forged engine", aic_decode_ms(forged, 1, 128, 2, &ms), AIC_STATUS_INVALID_HANDLE,
                  "was not issued by this library");
    expect_status("free of a null engine", aic_engine_free(none), AIC_STATUS_INVALID_HANDLE,
                  "engine handle is 0");
    expect_status("null out pointer", aic_prefill_ms(engine, 1, 128, 0, NULL),
                  AIC_STATUS_NULL_POINTER, "aic_prefill_ms: out_ms is NULL");
    expect_status("null out pointer (mixed)", aic_mixed_step_ms(engine, 1, 1, 128, 2, 0, NULL),
                  AIC_STATUS_NULL_POINTER, "out_ms is NULL");

    expect_status("negative batch", aic_prefill_ms(engine, -1, 128, 0, &ms),
                  AIC_STATUS_INVALID_ARGUMENT, "batch_size is -1; it must be between 0 and 4294967295");
    expect_status("isl above u32", aic_decode_ms(engine, 1, INT64_C(4294967296), 2, &ms),
                  AIC_STATUS_INVALID_ARGUMENT, "isl is 4294967296");
    expect_status("most negative count", aic_decode_step_ms(engine, INT64_MIN, 128, 2, &ms),
                  AIC_STATUS_INVALID_ARGUMENT, "requests is -9223372036854775808");
    expect_status("negative prefix", aic_mixed_step_ms(engine, 128, 1, 128, 2, -5, &ms),
                  AIC_STATUS_INVALID_ARGUMENT, "prefix is -5");

    expect_status("null spec path", aic_engine_from_spec_file(NULL, systems, &out),
                  AIC_STATUS_NULL_POINTER, "spec_path is NULL");
    check(out.id == 0, "failed create zeroes the out handle", NULL);
    expect_status("null out engine", aic_engine_from_spec_file(spec_path, systems, NULL),
                  AIC_STATUS_NULL_POINTER, "out_engine is NULL");
    expect_status("invalid UTF-8 spec path", aic_engine_from_spec_file("spec-\xff\xfe.json", systems, &out),
                  AIC_STATUS_INVALID_UTF8, "spec_path is not valid UTF-8");
    expect_status("invalid UTF-8 systems path", aic_engine_from_spec_file(spec_path, "sys\xc3", &out),
                  AIC_STATUS_INVALID_UTF8, "systems_path is not valid UTF-8");
    expect_status("empty systems path", aic_engine_from_spec_file(spec_path, "", &out),
                  AIC_STATUS_INVALID_ARGUMENT, "systems_path is an empty string");
    expect_status("missing spec file",
                  aic_engine_from_spec_file("no/such/dir/spec.json", systems, &out), AIC_STATUS_IO,
                  "(no/such/dir/spec.json)");
    expect_status("spec path that is a device",
                  aic_engine_from_spec_file("/dev/zero", systems, &out), AIC_STATUS_IO,
                  "not a regular file");
    expect_status("missing systems folder",
                  aic_engine_from_spec_file(spec_path, "no/such/systems", &out),
                  AIC_STATUS_INVALID_ARGUMENT, "no/such/systems");
    check(out.id == 0, "failed create leaves a zero handle", NULL);

    expect_status("garbage spec bytes", aic_engine_from_spec_bytes(garbage, sizeof garbage, systems, &out),
                  AIC_STATUS_INVALID_SPEC, "engine spec wire-format error");
    expect_status("empty spec bytes", aic_engine_from_spec_bytes(garbage, 0, systems, &out),
                  AIC_STATUS_INVALID_SPEC, "engine spec wire-format error");
    expect_status("null spec bytes", aic_engine_from_spec_bytes(NULL, 10, systems, &out),
                  AIC_STATUS_NULL_POINTER, "spec is NULL");
    expect_status("absurd spec length", aic_engine_from_spec_bytes(garbage, SIZE_MAX, systems, &out),
                  AIC_STATUS_INVALID_ARGUMENT, "spec_len is");

    check(strcmp(aic_status_name(AIC_STATUS_FREED_HANDLE), "AIC_STATUS_FREED_HANDLE") == 0,
          "status name", aic_status_name(AIC_STATUS_FREED_HANDLE));
    check(strcmp(aic_status_name(99), "AIC_STATUS_UNKNOWN") == 0, "unknown status name", NULL);
}

static void test_free(const char *spec_path, const char *systems, double reference) {
    AicEngineHandle engine, copy, reused;
    double ms = 0.0;
    expect_status("create for free", aic_engine_from_spec_file(spec_path, systems, &engine),
                  AIC_STATUS_OK, NULL);
    copy = engine;
    expect_status("free", aic_engine_free(engine), AIC_STATUS_OK, NULL);
    expect_status("use after free", aic_prefill_ms(engine, 1, 1024, 0, &ms), AIC_STATUS_FREED_HANDLE,
                  "was already freed");
    expect_status("use of a copy after free", aic_decode_step_ms(copy, 8, 1024, 128, &ms),
                  AIC_STATUS_FREED_HANDLE, "was already freed");
    expect_status("double free", aic_engine_free(engine), AIC_STATUS_FREED_HANDLE,
                  "aic_engine_free: engine handle");
    /* A new engine may reuse the slot; the old handle must stay dead. */
    expect_status("create after free", aic_engine_from_spec_file(spec_path, systems, &reused),
                  AIC_STATUS_OK, NULL);
    check(reused.id != engine.id, "a new engine never gets a freed handle back", NULL);
    expect_status("stale handle after reuse", aic_prefill_ms(engine, 1, 1024, 0, &ms),
                  AIC_STATUS_FREED_HANDLE, "was already freed");
    expect_status("estimate on the reused slot", aic_prefill_ms(reused, 1, 1024, 0, &ms),
                  AIC_STATUS_OK, NULL);
    check(ms == reference, "reused slot gives the same answer", NULL);
    expect_status("free the reused engine", aic_engine_free(reused), AIC_STATUS_OK, NULL);
    expect_status("double free after reuse", aic_engine_free(reused), AIC_STATUS_FREED_HANDLE,
                  "was already freed");
}

static void test_spec_bytes(const char *path, const char *form, const char *systems,
                            double reference) {
    size_t len = 0;
    unsigned char *bytes = read_file(path, &len);
    AicEngineHandle engine = {0};
    double ms = 0.0;
    char what[128];
    snprintf(what, sizeof what, "engine from %s spec bytes", form);
    check(bytes != NULL, what, path);
    if (!bytes) return;
    expect_status(what, aic_engine_from_spec_bytes(bytes, len, systems, &engine), AIC_STATUS_OK, NULL);
    free(bytes); /* the engine keeps no reference to the bytes */
    expect_status(what, aic_prefill_ms(engine, 1, 1024, 0, &ms), AIC_STATUS_OK, NULL);
    check(ms == reference, what, "same prefill bits as the engine from the spec file");
    expect_status(what, aic_engine_free(engine), AIC_STATUS_OK, NULL);
}

int main(int argc, char **argv) {
    AicEngineHandle engine = {0}, by_default = {0};
    double reference = 0.0, ms = 0.0;
    if (argc != 5) {
        fprintf(stderr, "usage: %s SPEC_JSON BINARY_SPEC SYSTEMS_DIR QUERIES\n", argv[0]);
        return 2;
    }
    const char *spec_path = argv[1], *binary_spec = argv[2], *systems = argv[3], *queries = argv[4];

    check(aic_version() != NULL && aic_version()[0] != '\0', "aic_version", NULL);
    expect_status("engine from spec file", aic_engine_from_spec_file(spec_path, systems, &engine),
                  AIC_STATUS_OK, NULL);
    check(engine.id != 0, "a created engine has a non-zero handle", NULL);
    if (engine.id == 0) {
        printf("aic_abi_test: %d passed, %d failed (no engine, stopped)\n", passed, failed);
        return 1;
    }
    int replayed = replay_queries(engine, queries);
    check(replayed >= 15, "queries file has the golden queries", NULL);

    expect_status("reference prefill", aic_prefill_ms(engine, 1, 1024, 0, &reference), AIC_STATUS_OK, NULL);
    expect_status("engine with the default systems folder",
                  aic_engine_from_spec_file(spec_path, NULL, &by_default), AIC_STATUS_OK, NULL);
    expect_status("default systems folder estimate", aic_prefill_ms(by_default, 1, 1024, 0, &ms),
                  AIC_STATUS_OK, NULL);
    check(ms == reference, "default systems folder gives the same answer", NULL);
    expect_status("free default engine", aic_engine_free(by_default), AIC_STATUS_OK, NULL);

    test_spec_bytes(spec_path, "JSON", systems, reference);
    test_spec_bytes(binary_spec, "binary", systems, reference);
    test_misuse(engine, spec_path, systems);
    test_last_error_copy();
    test_free(spec_path, systems, reference);
    test_threads(engine);

    expect_status("free the first engine", aic_engine_free(engine), AIC_STATUS_OK, NULL);
    printf("aic_abi_test: %d queries replayed; %d checks passed, %d failed\n", replayed, passed, failed);
    return failed == 0 ? 0 : 1;
}
