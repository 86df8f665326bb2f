% promotion.pl -- the promotion example of the articles (seed 000), the article's
% Prolog blocks as they are. Same program as promotion.fg.
%   flowjit run examples/promotion.pl --entry b i=100 x=5     -> -10
%   flowjit trace examples/promotion.pl --from b i=100 x=5    -> -10
%
% test: --entry b i=100 x=5 => -10

block(l, op2(c, ge, var(i), const(0),
if(c, b, l_done))).
block(l_done, print_and_stop(var(i))).
block(b, promote(x, b2)).
block(b2, op2(x2, mul, var(x), const(2),
op2(x3, add, var(x2), const(1),
op2(i, sub, var(i), var(x3),
jump(l))))).
