/* The articles' direct flowgraph loops written in C, to compare flowjit's machine code for
 * them with: `power` (res = res * x, y times; x = 1 keeps res in 64 bits) and the promotion
 * example (i = i - (x * 2 + 1) while i >= 0). Empty asm statements keep the compiler from
 * replacing the loops by their closed forms.
 *
 *     gcc -O2 -o loops loops.c && ./loops power 1 100000000 && ./loops promotion 5 1000000000
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long power(long x, long y) {
    long res = 1;
    while (y != 0) {
        res *= x;
        y -= 1;
        __asm__ volatile("" : "+r"(res), "+r"(y));
    }
    return res;
}

static long promotion(long x, long i) {
    while (i >= 0) {
        long x2 = x * 2, x3 = x2 + 1;
        i -= x3;
        __asm__ volatile("" : "+r"(i));
    }
    return i;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: loops power X Y | loops promotion X I\n");
        return 2;
    }
    long a = atol(argv[2]), b = atol(argv[3]);
    printf("%ld\n", strcmp(argv[1], "power") == 0 ? power(a, b) : promotion(a, b));
    return 0;
}
