"""A plain Brainfuck interpreter, the peer of benches/peers/bf.c under PyPy (and CPython):
the commands in a list, each bracket's partner found once before the run, one branch per
command. The tape has 30,000 cells of 8 bits; ',' at the end of the input leaves the cell.

    pypy3 bf.py FILE.b < input
"""
import os
import sys


def main(path):
    with open(path, "rb") as f:
        program = [c for c in f.read().decode("latin-1") if c in "<>+-.,[]"]
    partner = [0] * len(program)
    stack = []
    for i, c in enumerate(program):
        if c == "[":
            stack.append(i)
        elif c == "]":
            j = stack.pop()
            partner[i], partner[j] = j, i
    tape = [0] * 30000
    ptr = 0
    pc = 0
    n = len(program)
    out = []
    while pc < n:
        c = program[pc]
        if c == ">":
            ptr += 1
        elif c == "<":
            ptr -= 1
        elif c == "+":
            tape[ptr] = (tape[ptr] + 1) & 255
        elif c == "-":
            tape[ptr] = (tape[ptr] - 1) & 255
        elif c == ".":
            out.append(tape[ptr])
            if len(out) >= 4096:
                os.write(1, bytes(out))
                out = []
        elif c == ",":
            b = os.read(0, 1)
            if b:
                tape[ptr] = b[0]
        elif c == "[":
            if tape[ptr] == 0:
                pc = partner[pc]
        elif tape[ptr] != 0:
            pc = partner[pc]
        pc += 1
    os.write(1, bytes(out))


if __name__ == "__main__":
    main(sys.argv[1])
