/* Fixture for the ELF fallback tests (kernels/elf_tests.rs): functions named like CUDA host
 * stubs, one local (internal linkage, `.symtab` only) and one exported (kept in `.dynsym`
 * when linked with -rdynamic), plus a long string for reading another process's memory.
 * Prints "<local stub> <exported stub> <string>" addresses and waits for stdin to close. */
#include <stdio.h>

static void scale_stub(float *x, float a, int n) __asm__("_ZN4demoL5scaleILi4EEEvPffi");
void my_kernel_stub(float *x) __asm__("_Z9my_kernelPf");

__attribute__((noinline, used)) static void scale_stub(float *x, float a, int n) {
    for (int i = 0; i < n; i++) x[i] *= a;
}

__attribute__((noinline, used)) void my_kernel_stub(float *x) {
    x[0] += 1.0f;
}

static const char long_name[] =
    "_ZN2at6native29vectorized_elementwise_kernelILi4E"
    "NS0_10AbsFunctorIfEENS0_10AbsFunctorIfEENS0_10AbsFunctorIfEENS0_10AbsFunctorIfEE"
    "NS0_10AbsFunctorIfEENS0_10AbsFunctorIfEENS0_10AbsFunctorIfEENS0_10AbsFunctorIfEE"
    "NS0_10AbsFunctorIfEENS0_10AbsFunctorIfEENS0_10AbsFunctorIfEENS0_10AbsFunctorIfEE"
    "NS0_10AbsFunctorIfEENS0_10AbsFunctorIfEENS0_10AbsFunctorIfEENS0_10AbsFunctorIfEE"
    "St5arrayIPcLm2EELb0EEEviT0_T1_";

int main(void) {
    printf("%p %p %p\n", (void *)scale_stub, (void *)my_kernel_stub, (void *)long_name);
    fflush(stdout);
    while (getchar() != EOF) {
    }
    return 0;
}
