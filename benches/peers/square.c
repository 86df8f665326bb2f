/* The square program's loop written directly in C: the limit for any implementation of the
 * register machine. r2 += r1 as many times as the counter runs down, as the bytecode does;
 * the empty asm keeps the compiler from replacing the loop by a multiplication.
 *
 *     gcc -O2 -o square square.c && ./square 10000000     # 100000000000000
 */
#include <stdio.h>
#include <stdlib.h>

static long square(long a) {
    long r0 = a, r1 = a, r2 = 0;
    do {
        r0 -= 1;
        r2 += r1;
        __asm__ volatile("" : "+r"(r2), "+r"(r0));
    } while (r0 != 0);
    return r2;
}

int main(int argc, char **argv) {
    long a = argc > 1 ? atol(argv[1]) : 16;
    printf("%ld\n", square(a));
    return 0;
}
