Hello World from the Wikipedia article on Brainfuck
nested loops set up the codes of the letters
++++++++[>++++[>++>+++>+++>+<<<<-]>+>+>->>+[<]<-]>>.>---.+++++++..+++.>>.<-.<.+++.------.--------.>>+.>++.
