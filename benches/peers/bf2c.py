#!/usr/bin/env python3
"""Translates a Brainfuck program to C, command by command (the limit of the Brainfuck
benchmarks in benches/peers/bf.sh): each command becomes one C statement, brackets become
while loops, nothing is combined or recognized. The semantics are flowjit's (SPEC.md §6):
30,000 cells of 8 bits that wrap, `,` leaves the cell unchanged at the end of the input.
Cells outside the tape are not checked.

    python3 bf2c.py PROGRAM.b > program.c && gcc -O2 -o program program.c

`--cells` and `--checks` translate the same program with the representation flowjit's
machine code works with, one cost at a time, so that gcc shows what each costs by itself:

    --cells byte    unsigned char cells (the default: the translation above)
    --cells word    64-bit cells, each step masked with `& 255` (a flowgraph integer)
    --cells value   16-byte cells, a tag word and the 64-bit payload (a flowgraph `Value`
                    in an array: an element's address is the index scaled by 16)
    --checks        each access checks its index against the tape's length first (abort()
                    where it fails); the pointer is an index, not an address
"""
import argparse

BYTE = {
    ">": "++p;",
    "<": "--p;",
    "+": "++*p;",
    "-": "--*p;",
    ".": "putchar(*p);",
    ",": "{ int c = getchar(); if (c != EOF) *p = (unsigned char)c; }",
    "[": "while (*p) {",
    "]": "}",
}


def indexed(cells, checks):
    """The statements of a translation whose pointer is an index `i` into `tape`."""
    cell = "tape[i].v" if cells == "value" else "tape[i]"
    read = f"({{ CHECK(i); {cell}; }})" if checks else cell
    # An unsigned char wraps by itself; a 64-bit cell is masked, as flowjit's `v & 255`.
    mask = "" if cells == "byte" else " & 255"
    return {
        ">": "++i;",
        "<": "--i;",
        "+": f"{cell} = ({read} + 1){mask};",
        "-": f"{cell} = ({read} - 1){mask};",
        ".": f"putchar({read});",
        ",": f"{{ int c = getchar(); if (c != EOF) {{ CHECK(i); {cell} = c; }} }}",
        "[": f"while ({read}) {{",
        "]": "}",
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("program")
    parser.add_argument("--cells", choices=["byte", "word", "value"], default="byte")
    parser.add_argument("--checks", action="store_true")
    args = parser.parse_args()
    with open(args.program, "rb") as f:
        text = f.read().decode("latin-1")
    if args.cells == "byte" and not args.checks:
        out = ["#include <stdio.h>", "static unsigned char tape[30000];",
               "int main(void) {", "unsigned char *p = tape;"]
        statements = BYTE
    else:
        cells = args.cells
        tape = {
            "byte": "static unsigned char tape[30000];",
            "word": "static long tape[30000];",
            "value": "static struct { long tag; long v; } tape[30000];",
        }[cells]
        check = ("if (__builtin_expect((unsigned long)(i) >= 30000, 0)) abort();"
                 if args.checks else "")
        out = ["#include <stdio.h>", "#include <stdlib.h>", tape,
               f"#define CHECK(i) do {{ {check} }} while (0)",
               "int main(void) {", "long i = 0;"]
        statements = indexed(cells, args.checks)
    out += [statements[c] for c in text if c in statements]
    out += ["return 0;", "}"]
    print("\n".join(out))


if __name__ == "__main__":
    main()
