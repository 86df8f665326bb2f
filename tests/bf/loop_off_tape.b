Leaves the pointer where nothing in the program knows it: three cells of 1
then a scan left to the zero cell before them (cell zero)
>+>+>+<<<[<]
Cell zero becomes 69 (E) then a loop that keeps its pointer prints it and changes the
cell left of cell zero: a runtime error in the loop's first pass after its output
+++++ +++++ +++++ +++++ +++++ +++++ +++++ +++++ +++++ +++++ +++++ +++++ +++++ ++++
[.<+>-]
