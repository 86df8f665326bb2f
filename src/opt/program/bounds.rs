//! Bounds checks of a whole program, gathered at the start of blocks and kept out of loops.
//!
//! A residual program of an interpreter moves a pointer by constants and indexes an array
//! with it. Brainfuck's `[->>>>>>>>>+<<<<<<<<<]` becomes one block that reads and writes
//! `tape[ptr]`, moves `ptr` nine cells right, reads and writes there, moves it back, and
//! reads `tape[ptr]` again to decide whether to go round: three checks per iteration, each
//! where its index is used. Here each index a block uses is seen as `base + offset`,
//! `base` the value a variable held where the block started, and the block checks at its
//! start, once per array and base, its lowest and its highest offset (every index in
//! between is then in bounds too: an array's indexes are contiguous), in one unsigned
//! comparison. A failed check deoptimizes at the block's first statement: the interpreter
//! runs the block from there and fails where the program fails, if it fails at all (an
//! earlier statement may leave the block first).
//!
//! What a block checked is carried on, a must-analysis over the blocks: the fact
//! `(array, base) → lo..=hi` holds at a point when `base + k` is an index of `array` for
//! every `k` in `lo..=hi`. A block entered only where its indexes are known checks
//! nothing. A block that a loop comes back to is entered two ways: from before the loop,
//! through a block of its own holding its checks, and round the loop, straight to its
//! statements, where what the loop's way back knows is all that is known. The loop above
//! keeps `ptr` where it was: from its second iteration on it checks nothing.

use std::collections::BTreeMap;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use flowjit_runtime::abi::Repr;
use flowjit_runtime::{Op, Value};

use super::Slots;
use crate::lang::{BlockId, Inst, Operand, Program, Slot};
use crate::opt::interval::near;

/// `base + offset`: a value relative to the one `base` held where the block started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Rel {
    base: Slot,
    offset: i64,
}

/// What is in bounds at a point: per array variable and base variable, the offsets `k`,
/// `lo..=hi`, for which `base + k` is an index of the array.
pub type Known = BTreeMap<(Slot, Slot), (i64, i64)>;

/// A check at a block's start: `base + k` is an index of `array` for each `k` in `lo..=hi`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Check {
    /// The array variable.
    pub array: Slot,
    /// The index variable, as the block starts.
    pub base: Slot,
    /// The lowest offset used.
    pub lo: i64,
    /// The highest offset used.
    pub hi: i64,
}

/// Passes over the blocks after which a program whose facts still change gets none (each
/// pass can only narrow them, so they settle; this bounds how long that may take).
const MAX_PASSES: usize = 64;

/// What a block uses and what it leaves.
#[derive(Default)]
struct Summary {
    /// The offsets its accesses use, per array and base.
    needs: Known,
    /// The statements whose access `needs` holds.
    covered: Vec<usize>,
    /// Each variable it assigns, with its value at the block's end when it is relative to
    /// a base.
    ends: HashMap<Slot, Option<Rel>>,
}

/// Walks a block, statement by statement, knowing each variable relative to the block's
/// start.
struct Walk<'a> {
    kinds: &'a [Option<Repr>],
    defined: &'a Slots,
    ints: bool,
    /// The variables assigned so far, and their value relative to a base if it is one.
    assigned: HashMap<Slot, Option<Rel>>,
}

impl Walk<'_> {
    fn rel(&self, o: &Operand) -> Option<Rel> {
        let Operand::Var(s) = o else { return None };
        match self.assigned.get(s) {
            Some(r) => *r,
            None => (self.kinds[s.index()] == Some(Repr::Int) && self.defined.contains(*s))
                .then_some(Rel {
                    base: *s,
                    offset: 0,
                }),
        }
    }

    /// An array variable that still holds the array it held where the block started.
    fn array(&self, o: &Operand) -> Option<Slot> {
        let Operand::Var(s) = o else { return None };
        (self.kinds[s.index()] == Some(Repr::Array)
            && self.defined.contains(*s)
            && !self.assigned.contains_key(s))
        .then_some(*s)
    }

    /// The array and the index relative to a base that `inst` uses, if it is an access the
    /// checks at the block's start can cover: a read of an array of integers (`ints`), a
    /// write of an integer index.
    fn access(&self, inst: &Inst) -> Option<(Slot, Rel)> {
        let (array, index) = match inst {
            Inst::Op2 {
                op: Op::Readlist,
                a,
                b,
                ..
            } if self.ints => (a, b),
            Inst::SetItem { array, index, .. } => (&Operand::Var(*array), index),
            _ => return None,
        };
        Some((self.array(array)?, self.rel(index)?))
    }

    /// Goes past `inst`: what it assigns.
    fn step(&mut self, inst: &Inst) {
        let Some(dst) = inst.written() else { return };
        let shifted = |r: Option<Rel>, by: i64| {
            let r = r?;
            let offset = r.offset.checked_add(by)?;
            near(offset).then_some(Rel { offset, ..r })
        };
        let rel = match inst {
            Inst::Op1 {
                op: Op::Same, a, ..
            } => self.rel(a),
            Inst::Op2 {
                op: Op::Add,
                a,
                b: Operand::Const(Value::Int(c)),
                ..
            }
            | Inst::Op2 {
                op: Op::Add,
                a: Operand::Const(Value::Int(c)),
                b: a,
                ..
            } => shifted(self.rel(a), *c),
            Inst::Op2 {
                op: Op::Sub,
                a,
                b: Operand::Const(Value::Int(c)),
                ..
            } => c.checked_neg().and_then(|c| shifted(self.rel(a), c)),
            _ => None,
        };
        self.assigned.insert(dst, rel);
    }
}

/// Where a program's bounds checks go ([`plan`]).
#[derive(Default)]
pub struct Plan {
    /// Per block: the checks on the ways in from before its loop, in a block of their own.
    pub entry: Vec<Vec<Check>>,
    /// Per block: the checks where its statements start, on every way in.
    pub body: Vec<Vec<Check>>,
    /// Per block: what is in bounds where its statements start, its checks passed.
    pub known: Vec<Known>,
    /// Per block: the statements (their positions) whose index the checks cover.
    pub covered: Vec<HashSet<usize>>,
    /// The jumps `(from, to)` that come back round a loop: they go to the statements of
    /// `to`, past its entry checks.
    back: HashSet<(usize, usize)>,
}

impl Plan {
    /// Whether the jump from `from` to `to` goes past `to`'s entry checks.
    pub fn round(&self, from: BlockId, to: BlockId) -> bool {
        self.back.contains(&(from.index(), to.index()))
    }
}

/// `known` with the offsets of `needs` added: a fact's range grows to the hull of both
/// (the two ends in bounds, every index between them is).
fn with(mut known: Known, needs: &Known) -> Known {
    for (pair, &(lo, hi)) in needs {
        let range = known.entry(*pair).or_insert((lo, hi));
        *range = (range.0.min(lo), range.1.max(hi));
    }
    known
}

/// What both know: the facts of both, each on the offsets both hold.
fn meet(a: &Known, b: &Known) -> Known {
    a.iter()
        .filter_map(|(pair, &(lo, hi))| {
            let &(blo, bhi) = b.get(pair)?;
            let (lo, hi) = (lo.max(blo), hi.min(bhi));
            (lo <= hi).then_some((*pair, (lo, hi)))
        })
        .collect()
}

/// The meet of every known `fact` (`None` stands for a way not yet analyzed, which knows
/// everything); `None` if there is none.
fn meet_all<'a>(facts: impl Iterator<Item = &'a Option<Known>>) -> Option<Known> {
    facts.flatten().fold(None, |acc, k| match acc {
        None => Some(k.clone()),
        Some(a) => Some(meet(&a, k)),
    })
}

/// The checks that make `needs` hold where `known` holds.
fn checks(needs: &Known, known: &Known) -> Vec<Check> {
    needs
        .iter()
        .filter(|(pair, &(lo, hi))| {
            known
                .get(pair)
                .is_none_or(|&(klo, khi)| lo < klo || hi > khi)
        })
        .map(|(&(array, base), &(lo, hi))| Check {
            array,
            base,
            lo,
            hi,
        })
        .collect()
}

/// What `known` at a block's start becomes at its end: facts on a reassigned array are
/// forgotten, and so are those on a base that no longer holds its value plus a constant;
/// a base moved by `d` moves its offsets by `-d`.
fn through(known: &Known, ends: &HashMap<Slot, Option<Rel>>) -> Known {
    known
        .iter()
        .filter_map(|(&(array, base), &(lo, hi))| {
            if ends.contains_key(&array) {
                return None;
            }
            let d = match ends.get(&base) {
                None => 0,
                Some(Some(r)) if r.base == base => r.offset,
                Some(_) => return None,
            };
            let (lo, hi) = (lo.checked_sub(d)?, hi.checked_sub(d)?);
            (near(lo) && near(hi)).then_some(((array, base), (lo, hi)))
        })
        .collect()
}

/// The blocks reachable from `entry` in reverse postorder, and the jumps that go back to a
/// block on the way to them (the back edges of a depth-first search).
fn order(program: &Program, entry: BlockId) -> (Vec<usize>, HashSet<(usize, usize)>) {
    let n = program.blocks.len();
    let targets = |b: usize| -> Vec<usize> {
        program.blocks[b]
            .term
            .jumps()
            .map(|j| j.target.index())
            .collect()
    };
    // 0: not seen, 1: on the path, 2: done.
    let mut state = vec![0u8; n];
    let mut post = Vec::with_capacity(n);
    let mut back = HashSet::default();
    let mut stack: Vec<(usize, Vec<usize>)> = vec![(entry.index(), targets(entry.index()))];
    state[entry.index()] = 1;
    while let Some((b, next)) = stack.last_mut() {
        let b = *b;
        match next.pop() {
            Some(t) => match state[t] {
                0 => {
                    state[t] = 1;
                    stack.push((t, targets(t)));
                }
                1 => {
                    back.insert((b, t));
                }
                _ => {}
            },
            None => {
                state[b] = 2;
                post.push(b);
                stack.pop();
            }
        }
    }
    post.reverse();
    (post, back)
}

/// Where the checks of `program`'s array accesses go, from `entry`: `kinds` and `defined`
/// as [`super::analyze`] found them; `ints` whether reads of arrays are of integers (the
/// only reads checked here).
pub fn plan(
    program: &Program,
    entry: BlockId,
    kinds: &[Option<Repr>],
    defined: &[Slots],
    ints: bool,
) -> Plan {
    let n = program.blocks.len();
    let summaries: Vec<Summary> = program
        .blocks
        .iter()
        .zip(defined)
        .map(|(block, defined)| {
            let mut walk = Walk {
                kinds,
                defined,
                ints,
                assigned: HashMap::default(),
            };
            let mut summary = Summary::default();
            for (k, inst) in block.insts.iter().enumerate() {
                if let Some((array, rel)) = walk.access(inst) {
                    summary.covered.push(k);
                    let range = summary
                        .needs
                        .entry((array, rel.base))
                        .or_insert((rel.offset, rel.offset));
                    *range = (range.0.min(rel.offset), range.1.max(rel.offset));
                }
                walk.step(inst);
            }
            summary.ends = walk.assigned;
            summary
        })
        .collect();
    let (rpo, back) = order(program, entry);
    let mut forward_preds: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut back_preds: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &b in &rpo {
        for j in program.blocks[b].term.jumps() {
            let t = j.target.index();
            let preds = if back.contains(&(b, t)) {
                &mut back_preds[t]
            } else {
                &mut forward_preds[t]
            };
            if !preds.contains(&b) {
                preds.push(b);
            }
        }
    }
    // Each reachable block's state in the last pass: what its ways from before the loop
    // know, what its statements start with before and after its own checks, and what it
    // ends with (`None` for the end: not analyzed yet).
    let mut befores: Vec<Known> = vec![Known::new(); n];
    let mut arrivings: Vec<Known> = vec![Known::new(); n];
    let mut starts: Vec<Known> = vec![Known::new(); n];
    let mut ends: Vec<Option<Known>> = vec![None; n];
    let mut settled = false;
    for _ in 0..MAX_PASSES {
        let mut changed = false;
        for &b in &rpo {
            let from_before = if b == entry.index() {
                // The function's own start brings nothing.
                Some(Known::new())
            } else {
                meet_all(forward_preds[b].iter().map(|&p| &ends[p]))
            };
            // Every reachable block but the entry has a forward predecessor before it in
            // reverse postorder (its parent in the search), analyzed in this pass.
            let from_before = from_before.expect("a way in from before");
            let after_entry = with(from_before.clone(), &summaries[b].needs);
            let arriving = match meet_all(back_preds[b].iter().map(|&p| &ends[p])) {
                Some(around) => meet(&after_entry, &around),
                None => after_entry,
            };
            let start = with(arriving.clone(), &summaries[b].needs);
            let end = Some(through(&start, &summaries[b].ends));
            changed |= ends[b] != end;
            ends[b] = end;
            befores[b] = from_before;
            arrivings[b] = arriving;
            starts[b] = start;
        }
        if !changed {
            settled = true;
            break;
        }
    }
    let mut plan = Plan {
        entry: vec![Vec::new(); n],
        body: vec![Vec::new(); n],
        known: vec![Known::new(); n],
        covered: summaries
            .iter()
            .map(|s| s.covered.iter().copied().collect())
            .collect(),
        back: HashSet::default(),
    };
    if !settled {
        // Each block checks what it uses, at its start, every time.
        for (b, s) in summaries.iter().enumerate() {
            plan.body[b] = checks(&s.needs, &Known::new());
            plan.known[b] = s.needs.clone();
        }
        return plan;
    }
    let reachable: HashSet<usize> = rpo.iter().copied().collect();
    for (b, s) in summaries.iter().enumerate() {
        if !reachable.contains(&b) {
            plan.body[b] = checks(&s.needs, &Known::new());
            plan.known[b] = s.needs.clone();
            continue;
        }
        // What the statements start with, their own checks not counted, and what the
        // ways from before the loop bring.
        let body = checks(&s.needs, &arrivings[b]);
        let entry_checks = checks(&s.needs, &befores[b]);
        if back_preds[b].is_empty() {
            // No way round a loop: the ways in are all the ways in.
            plan.body[b] = entry_checks;
        } else {
            // A check the statements make anyway need not be made on the way in.
            plan.entry[b] = entry_checks
                .into_iter()
                .filter(|c| !body.iter().any(|d| (d.array, d.base) == (c.array, c.base)))
                .collect();
            plan.body[b] = body;
        }
        plan.known[b] = starts[b].clone();
    }
    plan.back = back;
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lang::{self, Syntax};

    fn plan_of(src: &str) -> (Program, Plan) {
        let (_, program) = lang::load(src, Syntax::Fg).expect("a valid program");
        let n = program.frame_size();
        let mut kinds = vec![Some(Repr::Int); n];
        kinds[program.slot("tape").expect("tape").index()] = Some(Repr::Array);
        let defined = vec![Slots::all(n); program.blocks.len()];
        let plan = plan(&program, BlockId(0), &kinds, &defined, true);
        (program, plan)
    }

    fn check(program: &Program, base: &str, lo: i64, hi: i64) -> Check {
        Check {
            array: program.slot("tape").expect("tape"),
            base: program.slot(base).expect("base"),
            lo,
            hi,
        }
    }

    /// Brainfuck's `[->>>>>>>>>+<<<<<<<<<]` at a pointer the residual program does not
    /// know: checked on the way into the loop, and not round it.
    #[test]
    fn a_loop_that_keeps_its_pointer_checks_on_the_way_in() {
        let (program, plan) = plan_of(
            "start:\n  goto loop\n\
             loop:\n  v = tape[ptr]\n  v = v - 1\n  tape[ptr] = v\n  ptr = ptr + 9\n  \
             v = tape[ptr]\n  v = v + 1\n  tape[ptr] = v\n  ptr = ptr - 9\n  v = tape[ptr]\n  \
             if v goto loop else goto out\n\
             out:\n  print_and_stop(v)\n",
        );
        assert_eq!(plan.entry[1], vec![check(&program, "ptr", 0, 9)]);
        assert!(plan.body[1].is_empty());
        assert_eq!(plan.covered[1].len(), 5);
        assert!(plan.round(BlockId(1), BlockId(1)));
        assert!(!plan.round(BlockId(0), BlockId(1)));
    }

    /// `[>>>>>>>>>]`: the pointer moves each time round, and each time its new cell is
    /// checked.
    #[test]
    fn a_loop_that_moves_its_pointer_checks_each_time_round() {
        let (program, plan) = plan_of(
            "start:\n  goto loop\n\
             loop:\n  ptr = ptr + 9\n  v = tape[ptr]\n  if v goto loop else goto out\n\
             out:\n  v = tape[ptr]\n  print_and_stop(v)\n",
        );
        assert!(plan.entry[1].is_empty());
        assert_eq!(plan.body[1], vec![check(&program, "ptr", 9, 9)]);
        // Where the loop ends, the cell it stopped on is known in bounds.
        assert!(plan.body[2].is_empty() && plan.entry[2].is_empty());
    }

    /// What one way into a block does not know, the block checks, even where the other
    /// way knows it.
    #[test]
    fn a_block_checks_what_one_of_its_ways_in_does_not_know() {
        let (program, plan) = plan_of(
            "start:\n  v = tape[ptr]\n  if v goto a else goto b\n\
             a:\n  ptr = ptr + 1\n  goto join\n\
             b:\n  goto join\n\
             join:\n  v = tape[ptr]\n  print_and_stop(v)\n",
        );
        assert_eq!(plan.body[0], vec![check(&program, "ptr", 0, 0)]);
        assert_eq!(plan.body[3], vec![check(&program, "ptr", 0, 0)]);
        // After `b`, which does not move the pointer, alone, nothing is checked.
        let (_, plan) = plan_of(
            "start:\n  v = tape[ptr]\n  if v goto a else goto b\n\
             a:\n  goto join\n\
             b:\n  goto join\n\
             join:\n  v = tape[ptr]\n  print_and_stop(v)\n",
        );
        assert!(plan.body[3].is_empty() && plan.entry[3].is_empty());
    }

    /// Offsets far from 64 bits' ends only: `ptr + 9223372036854775807` and `ptr +
    /// -9223372036854775808` are left to their own checks (the absolute value of the second
    /// overflowed while planning).
    #[test]
    fn huge_offsets_are_not_covered() {
        let (_, plan) = plan_of(
            "start:\n  i = ptr + 9223372036854775807\n  v = tape[i]\n  \
             j = ptr + -9223372036854775808\n  v = tape[j]\n  \
             k = ptr - -9223372036854775808\n  v = tape[k]\n  print_and_stop(v)\n",
        );
        assert!(plan.covered[0].is_empty());
        assert!(plan.body[0].is_empty());
    }

    /// An index the block computes otherwise, or an array it assigns first, is left to
    /// the check where it is used.
    #[test]
    fn other_indexes_are_not_covered() {
        let (_, plan) = plan_of(
            "start:\n  i = ptr * 2\n  v = tape[i]\n  tape = array(3, 0)\n  v = tape[ptr]\n  \
             print_and_stop(v)\n",
        );
        assert!(plan.covered[0].is_empty());
        assert!(plan.body[0].is_empty());
    }
}
