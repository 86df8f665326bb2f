/* A plain Brainfuck interpreter: the program's commands in an array, each bracket's partner
 * found once before the run, a switch per command. The peer of flowjit's meta-traced
 * examples/bf.fg (benches/peers/bf.sh); gcc -O2.
 *
 *   bf FILE.b < input
 *
 * The tape has 30,000 cells of 8 bits, all 0 at first; ',' at the end of the input leaves
 * the cell as it is (as examples/bf.fg does). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: bf FILE.b\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 2;
    }
    size_t cap = 1 << 16, n = 0;
    char *prog = malloc(cap);
    int c;
    while ((c = fgetc(f)) != EOF) {
        if (!strchr("<>+-.,[]", c) || c == 0)
            continue;
        if (n == cap)
            prog = realloc(prog, cap *= 2);
        prog[n++] = (char)c;
    }
    fclose(f);
    size_t *partner = malloc(n * sizeof *partner + 1), *stack = malloc(n * sizeof *stack + 1);
    size_t depth = 0;
    for (size_t i = 0; i < n; i++) {
        if (prog[i] == '[') {
            stack[depth++] = i;
        } else if (prog[i] == ']') {
            if (depth == 0) {
                fprintf(stderr, "unbalanced ]\n");
                return 2;
            }
            size_t j = stack[--depth];
            partner[i] = j;
            partner[j] = i;
        }
    }
    if (depth) {
        fprintf(stderr, "unbalanced [\n");
        return 2;
    }
    static unsigned char tape[30000];
    size_t ptr = 0;
    for (size_t pc = 0; pc < n; pc++) {
        switch (prog[pc]) {
        case '>': ptr++; break;
        case '<': ptr--; break;
        case '+': tape[ptr]++; break;
        case '-': tape[ptr]--; break;
        case '.': putchar(tape[ptr]); break;
        case ',': {
            int ch = getchar();
            if (ch != EOF)
                tape[ptr] = (unsigned char)ch;
            break;
        }
        case '[': if (!tape[ptr]) pc = partner[pc]; break;
        case ']': if (tape[ptr]) pc = partner[pc]; break;
        }
    }
    return 0;
}
