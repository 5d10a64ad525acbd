/*
 * Test-only stand-in for a program with the CUDA runtime linked in: local (static) functions
 * under the runtime's names, as `libcudart_static.a` leaves them in a program's `.symtab`, and
 * a `.nv_fatbin` section where nvcc puts the device code (left out with -DNO_DEVICE_CODE).
 * Waits for a line on stdin so that a test can look at it running.
 */
#include <stdio.h>

#ifndef NO_DEVICE_CODE
__attribute__((section(".nv_fatbin"), used)) static const unsigned long long fatbin[2] = {1, 0};
#endif

__attribute__((noinline, used)) static int cudaMalloc(void **p, unsigned long n) {
    *p = 0;
    return (int)n;
}
__attribute__((noinline, used)) static int cudaLaunchKernel(const void *f, int grid) {
    return f ? grid : -grid;
}
__attribute__((noinline, used)) void __cudaRegisterFunction(void **handle, const char *name) {
    __asm__ volatile("" ::"r"(handle), "r"(name) : "memory");
}

int main(void) {
    void *p;
    int (*volatile malloc_fn)(void **, unsigned long) = cudaMalloc;
    int (*volatile launch_fn)(const void *, int) = cudaLaunchKernel;
    __cudaRegisterFunction(0, "kernel");
    printf("%d %d\n", malloc_fn(&p, 4), launch_fn(&p, 2));
    fflush(stdout);
    char line[16];
    return fgets(line, sizeof line, stdin) ? 0 : 1;
}
