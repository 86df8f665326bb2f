% The articles' code pasted as it is: rules, directives and other facts are skipped; only
% block/2 facts make the program.
% test: --entry power x=10 y=10 => 10000000000
% test: --entry power_rec res=1 x=10 y=20 => 100000000000000000000
:- dynamic block/2.

lookup(X, [], _) :- throw(key_not_found(X)).
lookup(Key, [Key/Value | _], Value) :- !.
lookup(Key, [_ | Rest], Value) :- lookup(Key, Rest, Value).
do_op(eq, X, Y, Z) :- X == Y -> Z = 1; Z = 0.
do_op(mul, X, Y, Z) :- Z is X * Y.
interp(jump(L), Env) :-
    block(L, Block),
    interp(Block, Env).
/* a block comment with block(nothing, jump(nowhere)). inside */
bytecode_square([mov_a_r0, mov_a_r1, mov_r0_a, decr_a, mov_a_r0, mov_r2_a,
                 add_r1_to_a, mov_a_r2, mov_r0_a, jump_if_a, 2, mov_r2_a, return_a]).
code(0'a, "a string. with a dot").

block(power, op1(res, same, const(1),
if(y, power_rec, power_done))).
block(power_rec, op2(res, mul, var(res), var(x),
op2(y, sub, var(y), const(1),
if(y, power_rec, power_done)))).
block(power_done, print_and_stop(var(res))).
