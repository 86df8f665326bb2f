% power.pl -- the power program of the articles (seed 001) in Prolog-term form,
% the same program as power.fg: prints x ** y (needs y >= 0).
%   flowjit run examples/power.pl x=10 y=20    -> 100000000000000000000
%   flowjit run examples/power.pl x=2 y=10     -> 1024
%
% test: --entry power_rec res=1 x=10 y=20 => 100000000000000000000
% test: x=2 y=10 => 1024
% test: x=3 y=64 => 3433683820292512484657849089281

block(power, op1(res, same, const(1), if(y, power_rec, power_done))).
block(power_rec, op2(res, mul, var(res), var(x),
                 op2(y, sub, var(y), const(1), if(y, power_rec, power_done)))).
block(power_done, print_and_stop(var(res))).
