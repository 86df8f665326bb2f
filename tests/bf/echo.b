Echoes its input
at the end of the input the cell is left unchanged
so clearing it first makes the loop end there
, [ . [-] , ]
