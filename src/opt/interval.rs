//! Integer intervals known for SSA values, learnt from constants, from what operations
//! produce, and from guards on comparisons with constants.
//!
//! A ref with an interval is known to hold an integer in it; `None` bounds are unbounded
//! (the value may be a big integer). An interval is only ever learnt for a value that is
//! known to be an integer: a guard on `lt(x, 4)` that held means `x` was an integer.

use rustc_hash::FxHashMap as HashMap;

use flowjit_runtime::{Op, Value};

use crate::trace::{Inst, Kind, KnownRange, Opnd, Ref};

/// The largest offset from its base that an access or a check is grouped, widened or
/// hoisted by: far from the ends of 64 bits, so that sums of offsets stay far from them and
/// a widened check fails only for values that are themselves near them. The optimizer, the
/// trees' code and the whole-program compiler share it.
pub const MAX_OFFSET: i64 = 1 << 32;

/// Whether `offset` is within [`MAX_OFFSET`] of its base (`i64::MIN` is not: its absolute
/// value does not fit).
pub fn near(offset: i64) -> bool {
    offset.unsigned_abs() <= MAX_OFFSET.unsigned_abs()
}

/// An interval of integers, `lo..=hi`; `None` is unbounded on that side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    /// The least value, if bounded below.
    pub lo: Option<i128>,
    /// The greatest value, if bounded above.
    pub hi: Option<i128>,
}

impl Range {
    /// Exactly `n`.
    pub fn exactly(n: i128) -> Range {
        Range {
            lo: Some(n),
            hi: Some(n),
        }
    }

    /// `lo..=hi`.
    pub fn new(lo: i128, hi: i128) -> Range {
        Range {
            lo: Some(lo),
            hi: Some(hi),
        }
    }

    /// Any integer.
    pub const ANY: Range = Range { lo: None, hi: None };

    /// Whether every value in the interval fits in 64 bits.
    pub fn fits_i64(self) -> bool {
        matches!((self.lo, self.hi), (Some(lo), Some(hi)) if lo >= i64::MIN as i128 && hi <= i64::MAX as i128)
    }

    /// The smallest interval holding both.
    pub fn hull(self, other: Range) -> Range {
        let lo = match (self.lo, other.lo) {
            (Some(a), Some(b)) => Some(a.min(b)),
            _ => None,
        };
        let hi = match (self.hi, other.hi) {
            (Some(a), Some(b)) => Some(a.max(b)),
            _ => None,
        };
        Range { lo, hi }
    }

    /// Whether every value of `self` lies in `other`.
    pub fn within(self, other: Range) -> bool {
        let below = match (other.lo, self.lo) {
            (None, _) => true,
            (Some(a), Some(b)) => a <= b,
            (Some(_), None) => false,
        };
        let above = match (other.hi, self.hi) {
            (None, _) => true,
            (Some(a), Some(b)) => b <= a,
            (Some(_), None) => false,
        };
        below && above
    }

    /// The interval a trace records as known of a variable ([`KnownRange`]): bounds past
    /// 64 bits are dropped (`None`), which only widens it.
    pub fn known(self) -> KnownRange {
        let fit = |b: Option<i128>| b.and_then(|b| i64::try_from(b).ok());
        KnownRange {
            lo: fit(self.lo),
            hi: fit(self.hi),
        }
    }

    /// The interval of a [`KnownRange`].
    pub fn from_known(k: KnownRange) -> Range {
        Range {
            lo: k.lo.map(i128::from),
            hi: k.hi.map(i128::from),
        }
    }

    /// Every 64-bit integer.
    pub fn i64() -> Range {
        Range::new(i64::MIN as i128, i64::MAX as i128)
    }

    /// The interval of `x & y` for operands in `ranges` (`None` where nothing is known of
    /// one): a mask by a non-negative integer keeps at most its bits, so the result lies
    /// between 0 and the least upper bound of the operands known to be non-negative.
    pub fn mask(ranges: &[Option<Range>]) -> Option<Range> {
        let top = ranges
            .iter()
            .flatten()
            .filter(|r| r.lo.is_some_and(|lo| lo >= 0))
            .filter_map(|r| r.hi)
            .min()?;
        Some(Range::new(0, top))
    }

    /// The values in both.
    pub fn meet(self, other: Range) -> Range {
        let max = |a: Option<i128>, b: Option<i128>| match (a, b) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, None) => a,
            (None, b) => b,
        };
        let min = |a: Option<i128>, b: Option<i128>| match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, None) => a,
            (None, b) => b,
        };
        Range {
            lo: max(self.lo, other.lo),
            hi: min(self.hi, other.hi),
        }
    }
}

/// The interval of `x + y` for `x` in one and `y` in the other.
impl std::ops::Add for Range {
    type Output = Range;

    fn add(self, other: Range) -> Range {
        let sum = |a: Option<i128>, b: Option<i128>| a?.checked_add(b?);
        Range {
            lo: sum(self.lo, other.lo),
            hi: sum(self.hi, other.hi),
        }
    }
}

/// The interval of `x - y` for `x` in one and `y` in the other.
impl std::ops::Sub for Range {
    type Output = Range;

    fn sub(self, other: Range) -> Range {
        let difference = |a: Option<i128>, b: Option<i128>| a?.checked_sub(b?);
        Range {
            lo: difference(self.lo, other.hi),
            hi: difference(self.hi, other.lo),
        }
    }
}

/// What is known of the values of a trace.
#[derive(Default)]
pub struct Facts {
    ranges: HashMap<Ref, Range>,
}

/// Whether `op` is a comparison whose result is 0 or 1.
pub fn is_comparison(op: Op) -> bool {
    matches!(op, Op::Lt | Op::Le | Op::Gt | Op::Ge | Op::Eq | Op::Ne)
}

impl Facts {
    /// The interval of an operand, if one is known.
    pub fn of(&self, o: &Opnd) -> Option<Range> {
        match o {
            Opnd::Const(Value::Int(n)) => Some(Range::exactly(*n as i128)),
            Opnd::Const(_) => None,
            Opnd::Ref(r) => self.ranges.get(r).copied(),
        }
    }

    /// Records that `r` lies in `range` (as well as in what was known).
    pub fn narrow(&mut self, r: Ref, range: Range) {
        let now = self.ranges.get(&r).map_or(range, |old| old.meet(range));
        self.ranges.insert(r, now);
    }

    /// Records that `r` lies in `range`, and what follows for the values `r` was computed
    /// from by adding or subtracting a constant (`r = x + 3` in `0..10`: `x` in `-3..7`),
    /// through a few such steps. `def` gives a value's defining instruction. Sound for the
    /// rest of a trace, which is one straight path: from here on, `r` did lie in `range`.
    pub fn narrow_back<'t>(&mut self, r: Ref, range: Range, def: impl Fn(Ref) -> &'t Inst) {
        let (mut r, mut range) = (r, range);
        for _ in 0..8 {
            self.narrow(r, range);
            let inst = def(r);
            let (x, shift) = match (inst.kind, inst.args.as_slice()) {
                (Kind::Op(Op::Add), [Opnd::Ref(x), Opnd::Const(Value::Int(c))])
                | (Kind::Op(Op::Add), [Opnd::Const(Value::Int(c)), Opnd::Ref(x)]) => {
                    (*x, -(*c as i128))
                }
                (Kind::Op(Op::Sub), [Opnd::Ref(x), Opnd::Const(Value::Int(c))]) => (*x, *c as i128),
                _ => return,
            };
            let moved = |b: Option<i128>| b.map(|b| b + shift);
            (r, range) = (
                x,
                Range {
                    lo: moved(range.lo),
                    hi: moved(range.hi),
                },
            );
        }
    }

    /// Learns that `index` was accepted by a `readlist`, `getitem` or `setitem`: it lies in
    /// `0..MAX_INDEX`, and so do the values it was computed from, shifted
    /// ([`Facts::narrow_back`]).
    pub fn learn_index<'t>(&mut self, index: &Opnd, def: impl Fn(Ref) -> &'t Inst) {
        if let Opnd::Ref(i) = index {
            let range = Range::new(0, flowjit_runtime::value::MAX_INDEX as i128 - 1);
            self.narrow_back(*i, range, def);
        }
    }

    /// The index operand of an instruction that indexes a list or an array, if `inst`
    /// is one.
    pub fn index_of(inst: &Inst) -> Option<&Opnd> {
        match (inst.kind, inst.args.as_slice()) {
            (Kind::GetItem | Kind::SetItem | Kind::Op(Op::Readlist), [_, i, ..]) => Some(i),
            _ => None,
        }
    }

    /// Learns from a guard that comparison `cond` came out `holds`.
    pub fn learn(&mut self, cond: &Inst, holds: bool) {
        let Kind::Op(op) = cond.kind else { return };
        if !is_comparison(op) {
            return;
        }
        let op = if holds {
            op
        } else {
            op.negated().unwrap_or(op)
        };
        let (x, op, k) = match cond.args.as_slice() {
            [Opnd::Ref(x), Opnd::Const(Value::Int(k))] => (*x, op, *k as i128),
            [Opnd::Const(Value::Int(k)), Opnd::Ref(x)] => {
                (*x, op.flipped().unwrap_or(op), *k as i128)
            }
            _ => return,
        };
        let range = match op {
            Op::Lt => Range {
                lo: None,
                hi: Some(k - 1),
            },
            Op::Le => Range {
                lo: None,
                hi: Some(k),
            },
            Op::Gt => Range {
                lo: Some(k + 1),
                hi: None,
            },
            Op::Ge => Range {
                lo: Some(k),
                hi: None,
            },
            Op::Eq => Range::exactly(k),
            // `x != k` narrows an interval only at its ends (an integer known in `0..=9`
            // and not 0 is in `1..=9`); a value not known to be an integer learns nothing.
            Op::Ne => match self.ranges.get(&x) {
                Some(now) if now.lo == Some(k) && now.hi != Some(k) => Range {
                    lo: Some(k + 1),
                    hi: None,
                },
                Some(now) if now.hi == Some(k) && now.lo != Some(k) => Range {
                    lo: None,
                    hi: Some(k - 1),
                },
                _ => Range::ANY,
            },
            _ => Range::ANY,
        };
        self.narrow(x, range);
    }

    /// The outcome of comparison `op` on operands with these intervals, if they decide it.
    pub fn decide(&self, op: Op, a: &Opnd, b: &Opnd) -> Option<bool> {
        let (a, b) = (self.of(a)?, self.of(b)?);
        let always = |x: Range, y: Range, strict: bool| match (x.hi, y.lo) {
            // x < y for all values when max(x) < min(y).
            (Some(xh), Some(yl)) => {
                if strict {
                    xh < yl
                } else {
                    xh <= yl
                }
            }
            _ => false,
        };
        let lt = |x, y| {
            if always(x, y, true) {
                Some(true)
            } else if always(y, x, false) {
                Some(false)
            } else {
                None
            }
        };
        let le = |x, y| {
            if always(x, y, false) {
                Some(true)
            } else if always(y, x, true) {
                Some(false)
            } else {
                None
            }
        };
        match op {
            Op::Lt => lt(a, b),
            Op::Le => le(a, b),
            Op::Gt => lt(b, a),
            Op::Ge => le(b, a),
            Op::Eq | Op::Ne => {
                let disjoint = always(a, b, true) || always(b, a, true);
                let same = a.lo.is_some() && a.lo == a.hi && a == b;
                let eq = if disjoint {
                    Some(false)
                } else if same {
                    Some(true)
                } else {
                    None
                };
                eq.map(|e| e == (op == Op::Eq))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Range;

    #[test]
    fn a_mask_by_a_non_negative_operand_keeps_at_most_its_bits() {
        let byte = Some(Range::new(0, 255));
        let any = Some(Range::ANY);
        assert_eq!(Range::mask(&[any, byte]), Some(Range::new(0, 255)));
        assert_eq!(Range::mask(&[None, byte]), Some(Range::new(0, 255)));
        // The least upper bound of the non-negative operands.
        let small = Some(Range::new(3, 9));
        assert_eq!(Range::mask(&[small, byte]), Some(Range::new(0, 9)));
        // An operand that may be negative bounds nothing: -1 & x is x.
        let signed = Some(Range::new(-1, 5));
        assert_eq!(Range::mask(&[signed, any]), None);
        assert_eq!(Range::mask(&[signed, small]), Some(Range::new(0, 9)));
        assert_eq!(Range::mask(&[None, None]), None);
    }

    #[test]
    fn sums_and_differences_of_intervals_are_exact_or_unbounded() {
        let a = Range::new(-5, 10);
        let b = Range::new(1, 2);
        assert_eq!(a + b, Range::new(-4, 12));
        assert_eq!(a - b, Range::new(-7, 9));
        let above = Range {
            lo: Some(0),
            hi: None,
        };
        assert_eq!(
            a - above,
            Range {
                lo: None,
                hi: Some(10)
            }
        );
        assert_eq!(
            a + above,
            Range {
                lo: Some(-5),
                hi: None
            }
        );
    }
}
