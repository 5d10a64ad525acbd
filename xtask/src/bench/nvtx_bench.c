/* The NVTX benchmark's application: an NVTX3 program (headers of nvidia-nvtx 13.5.25) that
 * knows nothing of ingero. Driven by xtask/src/bench/nvtx.rs.
 *
 *   nvtx_bench tight N       N push+pop pairs in a tight loop; prints "ns_per_pair"
 *   nvtx_bench burst N B     N pairs in bursts of B (which fit the thread's ring), 5 ms apart;
 *                            only the bursts are timed; prints "ns_per_pair"
 *   nvtx_bench paced R S     R push+pop pairs per second for S seconds; prints "sent"
 *
 * When GATE_DIR is set it first waits for the agent stand-in to have read its hello (events
 * before a connection are discarded by design, which would not measure the recording path). */
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static unsigned long long now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static void gate(void) {
    const char *dir = getenv("GATE_DIR");
    if (!dir) return;
    char path[4096];
    snprintf(path, sizeof path, "%s/gate.%d.1", dir, (int)getpid());
    for (int i = 0; i < 20000; i++) {
        struct stat st;
        if (stat(path, &st) == 0) return;
        usleep(1000);
    }
    fprintf(stderr, "nvtx_bench: no gate\n");
    exit(3);
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    nvtxMarkA("warm-up"); /* loads the tool (if any) and starts its sender */
    gate();
    if (strcmp(argv[1], "tight") == 0) {
        long n = atol(argv[2]);
        /* Warm the thread up (its ring) before timing. */
        for (int i = 0; i < 1000; i++) { nvtxRangePushA("step"); nvtxRangePop(); }
        unsigned long long t0 = now();
        for (long i = 0; i < n; i++) {
            nvtxRangePushA("step");
            nvtxRangePop();
        }
        unsigned long long t1 = now();
        printf("ns_per_pair %.2f\n", (double)(t1 - t0) / (double)n);
        printf("sent %ld\n", n + 1000);
        return 0;
    }
    if (strcmp(argv[1], "burst") == 0 && argc > 3) {
        long n = atol(argv[2]), b = atol(argv[3]);
        for (int i = 0; i < 1000; i++) { nvtxRangePushA("step"); nvtxRangePop(); }
        unsigned long long busy = 0;
        long done = 0;
        while (done < n) {
            struct timespec nap = {0, 5000000};
            nanosleep(&nap, NULL);
            unsigned long long t0 = now();
            for (long i = 0; i < b; i++) {
                nvtxRangePushA("step");
                nvtxRangePop();
            }
            busy += now() - t0;
            done += b;
        }
        printf("ns_per_pair %.2f\n", (double)busy / (double)done);
        printf("sent %ld\n", done + 1000);
        return 0;
    }
    long rate = atol(argv[2]);
    double secs = atof(argv[3]);
    unsigned long long t0 = now();
    unsigned long long end = t0 + (unsigned long long)(secs * 1e9);
    long sent = 0;
    for (;;) {
        unsigned long long t = now();
        if (t >= end) break;
        long due = (long)((double)(t - t0) * (double)rate / 1e9);
        while (sent < due) {
            nvtxRangePushA("step");
            nvtxRangePop();
            sent++;
        }
        struct timespec nap = {0, 200000};
        nanosleep(&nap, NULL);
    }
    printf("sent %ld\n", sent);
    printf("seconds %.3f\n", (double)(now() - t0) / 1e9);
    return 0;
}
