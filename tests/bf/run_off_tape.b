Writes 1 into every cell from cell one on: the loop that moves right falls off the
end of the tape of 30000 cells
+[>+]
