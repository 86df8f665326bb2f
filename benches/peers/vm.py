"""The stack machine of benches/recursion/vm.fg written in Python: each guest call is a call
of `exec_` with an operand stack of its own, and `ret` is its return. Runs guest fib(n)."""
import sys

CODE = ["arg", "push", 2, "lt", "jump_if_false", 8, "arg", "ret", "arg", "push", 1, "sub",
        "call", 0, "arg", "push", 2, "sub", "call", 0, "add", "ret"]


def exec_(code, pc, a):
    stack = [0] * 8
    sp = 0
    while True:
        op = code[pc]
        pc += 1
        if op == "arg":
            stack[sp] = a
            sp += 1
        elif op == "push":
            stack[sp] = code[pc]
            pc += 1
            sp += 1
        elif op == "add":
            sp -= 1
            stack[sp - 1] = stack[sp - 1] + stack[sp]
        elif op == "sub":
            sp -= 1
            stack[sp - 1] = stack[sp - 1] - stack[sp]
        elif op == "lt":
            sp -= 1
            stack[sp - 1] = 1 if stack[sp - 1] < stack[sp] else 0
        elif op == "jump_if_false":
            t = code[pc]
            pc += 1
            sp -= 1
            if not stack[sp]:
                pc = t
        elif op == "jump":
            pc = code[pc]
        elif op == "call":
            t = code[pc]
            pc += 1
            stack[sp - 1] = exec_(code, t, stack[sp - 1])
        else:
            sp -= 1
            return stack[sp]


print(exec_(CODE, 0, int(sys.argv[1]) if len(sys.argv) > 1 else 30))
