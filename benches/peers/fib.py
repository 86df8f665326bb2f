"""fib(n) by double recursion, as benches/recursion/fib.fg."""
import sys


def fib(k):
    if k < 2:
        return k
    return fib(k - 1) + fib(k - 2)


print(fib(int(sys.argv[1]) if len(sys.argv) > 1 else 32))
