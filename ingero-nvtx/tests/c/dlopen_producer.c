/* Drives an NVTX library that exports the API (libnvToolsExt.so.1, v2, one table per process;
 * or libnvtx3interop.so.1, NVTX3 built with exported symbols) through dlopen/dlsym, as a
 * program linked against it would. Knows nothing of ingero; waits for the test's gate file
 * (see producer.c) before emitting. Usage: dlopen_producer <library path>. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>

/* nvtxEventAttributes_t, version 2/3 layout (48 bytes). */
typedef struct {
    uint16_t version, size;
    uint32_t category;
    int32_t colorType;
    uint32_t color;
    int32_t payloadType, reserved0;
    union { uint64_t u; int64_t ll; double d; uint32_t ui; int32_t i; float f; } payload;
    int32_t messageType;
    union { const char *ascii; const wchar_t *unicode; void *registered; } message;
} attrs_t;

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
    fprintf(stderr, "dlopen_producer: no gate\n");
    exit(3);
}

static void *lib;
static void *sym(const char *name) {
    void *p = dlsym(lib, name);
    if (!p) { fprintf(stderr, "no %s\n", name); exit(2); }
    return p;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 2; }
    void (*nameThread)(uint32_t, const char *) = sym("nvtxNameOsThreadA");
    int (*pushA)(const char *) = sym("nvtxRangePushA");
    int (*pushW)(const wchar_t *) = sym("nvtxRangePushW");
    int (*pushEx)(const attrs_t *) = sym("nvtxRangePushEx");
    int (*pop)(void) = sym("nvtxRangePop");
    void (*markA)(const char *) = sym("nvtxMarkA");
    uint64_t (*startA)(const char *) = sym("nvtxRangeStartA");
    void (*end)(uint64_t) = sym("nvtxRangeEnd");
    void *(*domainCreate)(const char *) = sym("nvtxDomainCreateA");
    void *(*registerString)(void *, const char *) = sym("nvtxDomainRegisterStringA");
    int (*domainPush)(void *, const attrs_t *) = sym("nvtxDomainRangePushEx");
    int (*domainPop)(void *) = sym("nvtxDomainRangePop");

    int tid = (int)syscall(SYS_gettid);
    printf("pid %d\nmain_tid %d\n", (int)getpid(), tid);
    nameThread((uint32_t)tid, "dl main"); /* the first call: NVTX loads the tool */
    gate();
    printf("t1 %llu\n", now());
    printf("d_outer %d\n", pushA("v outer"));
    printf("d_inner %d\n", pushW(L"v inner"));
    markA("v mark");
    printf("p_inner %d\n", pop());
    printf("p_outer %d\n", pop());
    uint64_t id = startA("v range");
    printf("range_id %llu\n", (unsigned long long)id);
    end(id);
    void *dom = domainCreate("v domain");
    void *reg = registerString(dom, "v registered");
    printf("domain %llu\nreg %llu\n", (unsigned long long)(uintptr_t)dom, (unsigned long long)(uintptr_t)reg);
    attrs_t a;
    memset(&a, 0, sizeof a);
    a.version = 3;
    a.size = sizeof a;
    a.messageType = 3;
    a.message.registered = reg;
    printf("dd_push %d\n", domainPush(dom, &a));
    printf("dd_pop %d\n", domainPop(dom));
    memset(&a, 0, sizeof a);
    a.version = 2;
    a.size = sizeof a;
    a.payloadType = 5;
    a.payload.i = -3;
    a.messageType = 1;
    a.message.ascii = "v ex";
    pushEx(&a);
    pop();
    printf("t2 %llu\n", now());
    return 0;
}
