A loop whose two ways alternate: cell C is a flag that each iteration flips
(set when it was clear and cleared when it was set) so the way an iteration takes
is never the way the next one takes; each set flag adds one to cell D
Cells: D at 0 and B at 5 and C at 6 and A at 9 (the counter: seventy)
The output is D: thirty five (the character hash)
>>>>>>+>>>++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++
[-<<<<+>[<->-<<<<<<+>>>>>>]<[->+<]>>>>]
<<<<<<<<<.
