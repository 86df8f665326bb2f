#!/usr/bin/env python3
# Usage: python3 scripts/fn-lengths.py [DIR ...]  (from the repository root; default src runtime/src)
"""Lists every `fn` in src/ and runtime/src with its length in lines, longest first."""
import os, re, sys
FN = re.compile(r'^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(unsafe\s+)?(extern\s+"C"\s+)?fn\s+(\w+)')
def strip(line):
    # drop strings and line comments, roughly
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])'", "''", line)
    i = line.find('//')
    return line if i < 0 else line[:i]
out = []
for root in sys.argv[1:] or ['src', 'runtime/src']:
    for d, _, fs in os.walk(root):
        for f in fs:
            if not f.endswith('.rs'): continue
            p = os.path.join(d, f)
            lines = open(p).read().split('\n')
            i = 0
            while i < len(lines):
                m = FN.match(lines[i])
                if m:
                    depth = 0; started = False; j = i
                    while j < len(lines):
                        s = strip(lines[j])
                        if not started and ';' in s and '{' not in s: break
                        depth += s.count('{') - s.count('}')
                        if '{' in s: started = True
                        if started and depth <= 0: break
                        j += 1
                    if started:
                        out.append((j - i + 1, p, i + 1, m.group(6)))
                i += 1
out.sort(reverse=True)
over150 = [o for o in out if o[0] > 150]; over80 = [o for o in out if o[0] > 80]
for n, p, l, name in over80: print(f'{n:5} {p}:{l} {name}')
print(f'{len(out)} functions, {len(over150)} over 150 lines, {len(over80)} over 80')
