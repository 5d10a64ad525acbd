/* An NVTX3 program that knows nothing of ingero: compiled against the headers of the PyPI wheel
 * nvidia-nvtx 13.5.25 by tests/nvtx3_headers.rs. It prints "key value" lines (its own clock,
 * tids, the values NVTX returned) for the test to compare with what the receiver got.
 *
 * The only test plumbing: before emitting, it waits until the test's receiver has seen this
 * process's hello (a file $GATE_DIR/gate.<pid>.<n> appears), because events made before a
 * connection are discarded by design. With GATE_DIR unset it does not wait.
 *
 * Modes (argv[1]): full, absent, late, reconnect. */
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>

static unsigned long long now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static int tid(void) { return (int)syscall(SYS_gettid); }

static void touch(const char *name) {
    const char *dir = getenv("GATE_DIR");
    if (!dir) return;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (f) fclose(f);
}

/* Waits for the receiver to have read the n-th hello of this process. */
static void gate(int n) {
    const char *dir = getenv("GATE_DIR");
    if (!dir) return;
    char path[4096];
    snprintf(path, sizeof path, "%s/gate.%d.%d", dir, (int)getpid(), n);
    for (int i = 0; i < 20000; i++) {
        struct stat st;
        if (stat(path, &st) == 0) return;
        usleep(1000);
    }
    fprintf(stderr, "producer: no gate %s\n", path);
    exit(3);
}

static nvtxEventAttributes_t attrs(void) {
    nvtxEventAttributes_t a;
    memset(&a, 0, sizeof a);
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    return a;
}

static void *ender(void *arg) {
    printf("ender_tid %d\n", tid());
    nvtxRangeEnd(*(nvtxRangeId_t *)arg);
    return NULL;
}

static void *exiting(void *arg) {
    (void)arg;
    printf("exiting_tid %d\n", tid());
    nvtxRangePushA("in thread");
    nvtxMarkA("thread mark");
    nvtxRangePop();
    return NULL;
}

static void payloads(void) {
    static const char *names[] = {"u64", "i64", "f64", "u32", "i32", "f32"};
    for (int t = 1; t <= 6; t++) {
        nvtxEventAttributes_t a = attrs();
        a.colorType = NVTX_COLOR_ARGB;
        a.color = 0xFF112233;
        a.category = 7;
        a.payloadType = t;
        switch (t) {
        case NVTX_PAYLOAD_TYPE_UNSIGNED_INT64: a.payload.ullValue = 18446744073709551615ull; break;
        case NVTX_PAYLOAD_TYPE_INT64: a.payload.llValue = -42; break;
        case NVTX_PAYLOAD_TYPE_DOUBLE: a.payload.dValue = 2.5; break;
        case NVTX_PAYLOAD_TYPE_UNSIGNED_INT32: a.payload.uiValue = 4000000000u; break;
        case NVTX_PAYLOAD_TYPE_INT32: a.payload.iValue = -7; break;
        case NVTX_PAYLOAD_TYPE_FLOAT: a.payload.fValue = 0.5f; break;
        }
        char msg[32];
        snprintf(msg, sizeof msg, "ex %s", names[t - 1]);
        a.messageType = NVTX_MESSAGE_TYPE_ASCII;
        a.message.ascii = msg;
        nvtxRangePushEx(&a);
        nvtxRangePop();
    }
}

static int full(void) {
    printf("t1 %llu\n", now());
    printf("d_outer %d\n", nvtxRangePushA("outer"));
    printf("d_inner %d\n", nvtxRangePushW(L"inner \u2713"));
    nvtxMarkA("mark a");
    nvtxMarkW(L"mark w");
    printf("p_inner %d\n", nvtxRangePop());
    printf("p_outer %d\n", nvtxRangePop());
    printf("p_under %d\n", nvtxRangePop());
    payloads();
    nvtxNameCategoryA(7, "cat seven");

    nvtxDomainHandle_t dom = nvtxDomainCreateA("my domain");
    nvtxStringHandle_t reg = nvtxDomainRegisterStringA(dom, "registered msg");
    nvtxDomainNameCategoryA(dom, 3, "dom cat");
    printf("domain %llu\n", (unsigned long long)(size_t)dom);
    printf("reg %llu\n", (unsigned long long)(size_t)reg);
    nvtxEventAttributes_t a = attrs();
    a.category = 3;
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = reg;
    printf("dd_push %d\n", nvtxDomainRangePushEx(dom, &a));
    nvtxDomainMarkEx(dom, &a);
    printf("dd_pop %d\n", nvtxDomainRangePop(dom));

    nvtxRangeId_t id = nvtxRangeStartA("process range");
    printf("range_id %llu\n", (unsigned long long)id);
    pthread_t t;
    pthread_create(&t, NULL, ender, &id);
    pthread_join(t, NULL);
    nvtxRangeId_t id2 = nvtxDomainRangeStartEx(dom, &a);
    printf("range_id2 %llu\n", (unsigned long long)id2);
    nvtxDomainRangeEnd(dom, id2);

    pthread_create(&t, NULL, exiting, NULL);
    pthread_join(t, NULL);

    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        printf("child_pid %d\nchild_tid %d\n", (int)getpid(), tid());
        fflush(stdout);
        nvtxMarkA("child warm-up"); /* starts the child's sender; discarded */
        gate(1);
        printf("child_t1 %llu\n", now());
        printf("child_d %d\n", nvtxRangePushA("child range"));
        nvtxMarkA("child mark");
        nvtxRangePop();
        printf("child_t2 %llu\n", now());
        fflush(stdout);
        exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    printf("child_status %d\n", status);

    nvtxDomainDestroy(dom);
    printf("d_open %d\n", nvtxRangePushA("left open"));
    printf("t2 %llu\n", now());
    return 0;
}

/* No agent: the program must run and exit at once. */
static int absent(void) {
    for (int i = 0; i < 1000; i++) {
        nvtxRangePushA("x");
        nvtxRangePop();
    }
    printf("depth %d\n", nvtxRangePushA("open at exit"));
    return 0;
}

/* Definitions made before any agent exists, then events once one has connected. */
static int late(void) {
    nvtxDomainHandle_t dom = nvtxDomainCreateA("early domain");
    nvtxStringHandle_t reg = nvtxDomainRegisterStringA(dom, "early string");
    nvtxNameOsThreadA((uint32_t)tid(), "early thread");
    printf("domain %llu\nreg %llu\nmain_tid %d\n", (unsigned long long)(size_t)dom,
           (unsigned long long)(size_t)reg, tid());
    fflush(stdout);
    touch("defined");
    gate(1);
    nvtxEventAttributes_t a = attrs();
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = reg;
    nvtxDomainRangePushEx(dom, &a);
    nvtxDomainRangePop(dom);
    return 0;
}

/* Emits, loses its agent, keeps running, and reconnects when the socket is back. */
static int reconnect(void) {
    nvtxDomainHandle_t dom = nvtxDomainCreateA("kept domain");
    gate(1);
    nvtxRangePushA("before");
    nvtxRangePop();
    touch("first");
    /* The test closes the receiver and binds a new one; meanwhile the program goes on. */
    const char *dir = getenv("GATE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/gate.%d.2", dir ? dir : ".", (int)getpid());
    int marks = 0;
    for (int i = 0; i < 20000; i++) {
        struct stat st;
        if (stat(path, &st) == 0) break;
        nvtxMarkA("meanwhile");
        marks++;
        usleep(1000);
    }
    gate(2);
    printf("marks %d\n", marks);
    nvtxEventAttributes_t a = attrs();
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = "after";
    nvtxDomainRangePushEx(dom, &a);
    nvtxDomainRangePop(dom);
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "full";
    printf("pid %d\nmain_tid %d\n", (int)getpid(), tid());
    /* The first NVTX call loads the tool and starts its sender. */
    nvtxNameOsThreadA((uint32_t)tid(), "main thread");
    if (strcmp(mode, "absent") == 0) return absent();
    if (strcmp(mode, "late") == 0) return late();
    if (strcmp(mode, "reconnect") == 0) return reconnect();
    gate(1);
    return full();
}
