-- The register machine of the articles as a plain Lua interpreter (run by LuaJIT). It runs
-- the square program (examples/square.bc) with the accumulator given on the command line.
--
--     luajit regmachine.lua 10000000     -- 100000000000000

local JUMP_IF_A, MOV_A_R0, MOV_A_R1, MOV_A_R2, MOV_R0_A, MOV_R1_A, MOV_R2_A,
      ADD_R0_TO_A, ADD_R1_TO_A, ADD_R2_TO_A, DECR_A, RETURN_A = 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11

-- Lua arrays start at 1; the bytecode's jump targets are 0-based, as in the articles.
local square = { MOV_A_R0, MOV_A_R1, MOV_R0_A, DECR_A, MOV_A_R0, MOV_R2_A, ADD_R1_TO_A,
                 MOV_A_R2, MOV_R0_A, JUMP_IF_A, 2, MOV_R2_A, RETURN_A }

local function run(code, a)
  local pc, r0, r1, r2 = 0, 0, 0, 0
  while true do
    local op = code[pc + 1]
    pc = pc + 1
    if op == JUMP_IF_A then
      local target = code[pc + 1]
      pc = pc + 1
      if a ~= 0 then pc = target end
    elseif op == MOV_A_R0 then r0 = a
    elseif op == MOV_A_R1 then r1 = a
    elseif op == MOV_A_R2 then r2 = a
    elseif op == MOV_R0_A then a = r0
    elseif op == MOV_R1_A then a = r1
    elseif op == MOV_R2_A then a = r2
    elseif op == ADD_R0_TO_A then a = a + r0
    elseif op == ADD_R1_TO_A then a = a + r1
    elseif op == ADD_R2_TO_A then a = a + r2
    elseif op == DECR_A then a = a - 1
    elseif op == RETURN_A then return a
    else error("bad opcode " .. tostring(op)) end
  end
end

print(string.format("%d", run(square, tonumber(arg[1] or "16"))))
