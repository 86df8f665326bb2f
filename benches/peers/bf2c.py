#!/usr/bin/env python3
"""Translates a Brainfuck program to C, command by command (the limit of the Brainfuck
benchmarks in benches/peers/bf.sh): each command becomes one C statement, brackets become
while loops, nothing is combined or recognized. The semantics are flowjit's (SPEC.md §6):
30,000 cells of 8 bits that wrap, `,` leaves the cell unchanged at the end of the input.
Cells outside the tape are not checked.

    python3 bf2c.py PROGRAM.b > program.c && gcc -O2 -o program program.c
"""
import sys

STATEMENTS = {
    ">": "++p;",
    "<": "--p;",
    "+": "++*p;",
    "-": "--*p;",
    ".": "putchar(*p);",
    ",": "{ int c = getchar(); if (c != EOF) *p = (unsigned char)c; }",
    "[": "while (*p) {",
    "]": "}",
}


def main():
    with open(sys.argv[1], "rb") as f:
        text = f.read().decode("latin-1")
    out = ["#include <stdio.h>", "static unsigned char tape[30000];",
           "int main(void) {", "unsigned char *p = tape;"]
    out += [STATEMENTS[c] for c in text if c in STATEMENTS]
    out += ["return 0;", "}"]
    print("\n".join(out))


if __name__ == "__main__":
    main()
