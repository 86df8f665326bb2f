Nested loops
cell two gets five times six times two which is sixty
+++++ [ > ++++++ [ > ++ < - ] < - ]
> > .       writes sixty
< < +++ [ > +++++ +++++ +++++ +++++ +++++ +++++ +++++ +++++ . [-] < - ]
            writes forty three times
++++++++++ .     then a newline
