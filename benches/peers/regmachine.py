"""The register machine of the articles as a plain Python interpreter (run by CPython and
by PyPy). It runs the square program (examples/square.bc) with the accumulator given on the
command line.

    python3 regmachine.py 10000000     # 100000000000000
"""
import sys

(JUMP_IF_A, MOV_A_R0, MOV_A_R1, MOV_A_R2, MOV_R0_A, MOV_R1_A, MOV_R2_A,
 ADD_R0_TO_A, ADD_R1_TO_A, ADD_R2_TO_A, DECR_A, RETURN_A) = range(12)

SQUARE = [MOV_A_R0, MOV_A_R1, MOV_R0_A, DECR_A, MOV_A_R0, MOV_R2_A, ADD_R1_TO_A,
          MOV_A_R2, MOV_R0_A, JUMP_IF_A, 2, MOV_R2_A, RETURN_A]


def run(code, a):
    pc = r0 = r1 = r2 = 0
    while True:
        op = code[pc]
        pc += 1
        if op == JUMP_IF_A:
            target = code[pc]
            pc += 1
            if a != 0:
                pc = target
        elif op == MOV_A_R0:
            r0 = a
        elif op == MOV_A_R1:
            r1 = a
        elif op == MOV_A_R2:
            r2 = a
        elif op == MOV_R0_A:
            a = r0
        elif op == MOV_R1_A:
            a = r1
        elif op == MOV_R2_A:
            a = r2
        elif op == ADD_R0_TO_A:
            a += r0
        elif op == ADD_R1_TO_A:
            a += r1
        elif op == ADD_R2_TO_A:
            a += r2
        elif op == DECR_A:
            a -= 1
        elif op == RETURN_A:
            return a
        else:
            raise ValueError(op)


if __name__ == "__main__":
    print(run(SQUARE, int(sys.argv[1]) if len(sys.argv) > 1 else 16))
