Writes the byte 69 then moves left of cell zero and changes it
which is a runtime error naming the index
+++++ +++++ +++++ +++++ +++++ +++++ +++++ +++++ +++++ +++++ +++++ +++++ +++++ ++++ .
< +
