/* The register machine of the articles as a plain switch interpreter in C, the way one
 * writes a bytecode interpreter without a JIT: fetch, switch, execute. It runs the square
 * program (examples/square.bc) with the accumulator given on the command line.
 *
 *     gcc -O2 -o regmachine regmachine.c && ./regmachine 10000000     # 100000000000000
 */
#include <stdio.h>
#include <stdlib.h>

enum {
    JUMP_IF_A, MOV_A_R0, MOV_A_R1, MOV_A_R2, MOV_R0_A, MOV_R1_A, MOV_R2_A,
    ADD_R0_TO_A, ADD_R1_TO_A, ADD_R2_TO_A, DECR_A, RETURN_A
};

/* The bytecode is read through a volatile copy, so that the compiler cannot specialize the
 * interpreter to it (that would be partial evaluation, the other contestant). */
static volatile long square_code[] = {
    MOV_A_R0, MOV_A_R1, MOV_R0_A, DECR_A, MOV_A_R0, MOV_R2_A, ADD_R1_TO_A,
    MOV_A_R2, MOV_R0_A, JUMP_IF_A, 2, MOV_R2_A, RETURN_A
};

static long run(const long *code, long a) {
    long pc = 0, r0 = 0, r1 = 0, r2 = 0;
    for (;;) {
        switch (code[pc++]) {
        case JUMP_IF_A: { long target = code[pc++]; if (a != 0) pc = target; break; }
        case MOV_A_R0: r0 = a; break;
        case MOV_A_R1: r1 = a; break;
        case MOV_A_R2: r2 = a; break;
        case MOV_R0_A: a = r0; break;
        case MOV_R1_A: a = r1; break;
        case MOV_R2_A: a = r2; break;
        case ADD_R0_TO_A: a += r0; break;
        case ADD_R1_TO_A: a += r1; break;
        case ADD_R2_TO_A: a += r2; break;
        case DECR_A: a -= 1; break;
        case RETURN_A: return a;
        default: fprintf(stderr, "bad opcode\n"); exit(1);
        }
    }
}

int main(int argc, char **argv) {
    long code[sizeof square_code / sizeof square_code[0]];
    for (size_t i = 0; i < sizeof code / sizeof code[0]; i++) code[i] = square_code[i];
    long a = argc > 1 ? atol(argv[1]) : 16;
    printf("%ld\n", run(code, a));
    return 0;
}
