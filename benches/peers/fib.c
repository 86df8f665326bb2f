/* fib(n) by double recursion, as benches/recursion/fib.fg. */
#include <stdio.h>
#include <stdlib.h>

static long fib(long k) { return k < 2 ? k : fib(k - 1) + fib(k - 2); }

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 32;
    printf("%ld\n", fib(n));
    return 0;
}
