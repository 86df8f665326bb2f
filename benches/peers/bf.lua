-- A plain Brainfuck interpreter, the peer of benches/peers/bf.c under LuaJIT: the commands
-- in an array of bytes, each bracket's partner found once before the run, one branch per
-- command. The tape has 30,000 cells of 8 bits; ',' at the end of the input leaves the cell.
--
--   luajit bf.lua FILE.b < input
local f = assert(io.open(arg[1], "rb"))
local text = f:read("*a")
f:close()
local program, n = {}, 0
for i = 1, #text do
  local c = text:byte(i)
  if c == 60 or c == 62 or c == 43 or c == 45 or c == 46 or c == 44 or c == 91 or c == 93 then
    n = n + 1
    program[n] = c
  end
end
local partner, stack, depth = {}, {}, 0
for i = 1, n do
  if program[i] == 91 then
    depth = depth + 1
    stack[depth] = i
  elseif program[i] == 93 then
    local j = stack[depth]
    depth = depth - 1
    partner[i], partner[j] = j, i
  end
end
local tape = {}
for i = 0, 29999 do tape[i] = 0 end
local ptr, pc = 0, 1
local out, k = {}, 0
local char, write = string.char, io.write
while pc <= n do
  local c = program[pc]
  if c == 62 then ptr = ptr + 1
  elseif c == 60 then ptr = ptr - 1
  elseif c == 43 then tape[ptr] = (tape[ptr] + 1) % 256
  elseif c == 45 then tape[ptr] = (tape[ptr] - 1) % 256
  elseif c == 46 then
    k = k + 1
    out[k] = char(tape[ptr])
    if k >= 4096 then write(table.concat(out, "", 1, k)); k = 0 end
  elseif c == 44 then
    local b = io.read(1)
    if b then tape[ptr] = b:byte() end
  elseif c == 91 then
    if tape[ptr] == 0 then pc = partner[pc] end
  elseif tape[ptr] ~= 0 then pc = partner[pc]
  end
  pc = pc + 1
end
write(table.concat(out, "", 1, k))
