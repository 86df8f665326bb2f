//! The clean-up the articles say a good partial evaluator does itself.
//!
//! Partial evaluation leaves many blocks that do nothing but jump (every dispatch test on a
//! known opcode becomes one), and chains of blocks that follow each other. Clean-up:
//!
//! 1. threads jumps through blocks that only jump (and the entry, if it is one);
//! 2. merges a block into the one before it when that is its only predecessor and ends in a
//!    jump to it (a straight-line chain becomes one block);
//! 3. drops blocks that cannot be reached from the entry (or a call);
//! 4. folds, inside each block, what an interpreter specialized to its program repeats
//!    statement by statement ([`fold`]): `ptr = ptr + 1` three times is `ptr = ptr + 3`.
//!
//! A residual function's entry is where its calls go, so it is never merged away; a jump
//! to it may still be threaded past it.
//!
//! ```text
//! power1:     goto power_rec1                 power_rec1:
//! power_rec1: res = 1 * x; goto power_rec2        res = 1 * x
//! power_rec2: res = res * x; goto ...    =>       res = res * x
//! ...                                             ...
//! power_done1: print_and_stop(res)                print_and_stop(res)
//! ```

use flowjit_runtime::{Op, Value};

use super::{RBlock, RKind, RStmt, RTerm, Residual};
use crate::lang::{Operand, Slot};

fn targets(term: &RTerm) -> Vec<usize> {
    match term {
        RTerm::Goto(t) => vec![*t],
        RTerm::If { then, els, .. } => vec![*then, *els],
        RTerm::PrintAndStop(_) | RTerm::Return(_) => Vec::new(),
    }
}

/// The blocks `block` goes to: by jumps, and by calls.
fn successors(block: &RBlock) -> impl Iterator<Item = usize> + '_ {
    let calls = block.stmts.iter().filter_map(|s| match s.kind {
        RKind::Call(b) => Some(b),
        _ => None,
    });
    targets(&block.term).into_iter().chain(calls)
}

fn retarget(term: &mut RTerm, f: impl Fn(usize) -> usize) {
    match term {
        RTerm::Goto(t) => *t = f(*t),
        RTerm::If { then, els, .. } => {
            *then = f(*then);
            *els = f(*els);
        }
        RTerm::PrintAndStop(_) | RTerm::Return(_) => {}
    }
}

/// Where a jump to `b` ends up, following blocks that only jump (stopping at a cycle).
fn final_target(blocks: &[Option<RBlock>], b: usize) -> usize {
    let mut at = b;
    // The blocks of this chain so far: chains are short, and a cycle of jumps (a program
    // that loops doing nothing) ends it.
    let mut seen = Vec::new();
    while let Some(RBlock {
        stmts,
        term: RTerm::Goto(next),
        ..
    }) = &blocks[at]
    {
        if !stmts.is_empty() || seen.contains(&at) {
            break;
        }
        seen.push(at);
        at = *next;
    }
    at
}

fn drop_unreachable(r: &mut Residual) {
    let mut reached = vec![false; r.blocks.len()];
    let mut stack = vec![r.entry];
    while let Some(b) = stack.pop() {
        if std::mem::replace(&mut reached[b], true) {
            continue;
        }
        if let Some(block) = &r.blocks[b] {
            stack.extend(successors(block));
        }
    }
    for (b, block) in r.blocks.iter_mut().enumerate() {
        if !reached[b] {
            *block = None;
        }
    }
}

/// The residual program cleaned up.
pub fn clean(raw: Residual) -> Residual {
    let mut r = raw;
    // 1. Thread jumps through blocks that only jump.
    let finals: Vec<usize> = (0..r.blocks.len())
        .map(|b| final_target(&r.blocks, b))
        .collect();
    for block in r.blocks.iter_mut().flatten() {
        retarget(&mut block.term, |t| finals[t]);
    }
    r.entry = finals[r.entry];
    drop_unreachable(&mut r);
    // 2. Merge straight-line chains. Merging `b` into `a` moves `b`'s edges to `a` and
    // leaves the counts of predecessors as they were, so they are counted once.
    let mut preds = vec![0usize; r.blocks.len()];
    preds[r.entry] += 1;
    for block in r.blocks.iter().flatten() {
        for t in successors(block) {
            preds[t] += 1;
        }
    }
    for a in 0..r.blocks.len() {
        while let Some(RBlock {
            term: RTerm::Goto(b),
            ..
        }) = r.blocks[a]
        {
            if b == a || preds[b] != 1 {
                break;
            }
            let next = r.blocks[b].take().expect("a live block");
            let first = r.blocks[a].as_mut().expect("a live block");
            first.stmts.extend(next.stmts);
            first.term = next.term;
            first.term_origin = next.term_origin;
        }
    }
    // 3. Drop what cannot be reached.
    drop_unreachable(&mut r);
    // 4. Fold what repeats.
    for block in r.blocks.iter_mut().flatten() {
        fold(&mut block.stmts);
    }
    r
}

/// `x = x + c` (or `x - c`) as `(x, c)`: `x` moves by `c`.
fn step_of(s: &RStmt) -> Option<(Slot, i64)> {
    let (RKind::Op(op @ (Op::Add | Op::Sub)), Some(dst)) = (&s.kind, s.dst) else {
        return None;
    };
    match s.args.as_slice() {
        [Operand::Var(x), Operand::Const(Value::Int(c))] if *x == dst => match op {
            Op::Add => Some((dst, *c)),
            _ => c.checked_neg().map(|c| (dst, c)),
        },
        _ => None,
    }
}

/// `x = x & M` as `(x, M)`, for `M` of the form `2^k - 1`.
fn mask_of(s: &RStmt) -> Option<(Slot, i64)> {
    match (&s.kind, s.dst, s.args.as_slice()) {
        (RKind::Op(Op::And), Some(dst), [Operand::Var(x), Operand::Const(Value::Int(m))])
            if *x == dst && *m > 0 && m & m.wrapping_add(1) == 0 =>
        {
            Some((dst, *m))
        }
        _ => None,
    }
}

/// `like` (a step of `x`, see [`step_of`]) made a step of `c`: the same operation, so that
/// on a value that is not an integer it fails with the same message. `None` when `c` cannot
/// be written so (`x - c` of `i64::MIN`).
fn step(x: Slot, c: i64, like: &RStmt) -> Option<RStmt> {
    let (op, k) = match like.kind {
        RKind::Op(Op::Sub) => (Op::Sub, c.checked_neg()?),
        _ => (Op::Add, c),
    };
    Some(RStmt {
        dst: Some(x),
        kind: RKind::Op(op),
        args: vec![Operand::Var(x), Operand::Const(Value::Int(k))],
        origin: like.origin,
    })
}

/// Whether a statement before `k` reads or writes `arr[index]` with neither `arr` nor
/// `index` assigned since: then `arr[index]` is in bounds at `k` (arrays keep their length).
fn used_before(stmts: &[RStmt], k: usize, arr: Slot, index: &Operand) -> bool {
    for s in stmts[..k].iter().rev() {
        let place = s.args.first() == Some(&Operand::Var(arr)) && s.args.get(1) == Some(index);
        if place && matches!(s.kind, RKind::SetItem | RKind::Op(Op::Readlist)) {
            return true;
        }
        if s.dst.is_some_and(|d| d == arr || *index == Operand::Var(d)) {
            return false;
        }
    }
    false
}

/// Whether statement `j` of `stmts` leaves every array as it is and shows none: an
/// operation on values that reads no array, and that either cannot fail (`eq`, `ne`) or
/// has only integers for operands. An operation that fails stops the run, but its error
/// shows the operands it got: `x + t`, with `t` an array, prints the array's elements,
/// which a store before it must have written (`difftest --seed 9002` found such a store
/// dropped). An operand is known to be an integer when it is a constant or the block last
/// assigned it an operation's integer result.
fn blind_to_arrays(stmts: &[RStmt], j: usize) -> bool {
    let RKind::Op(op) = &stmts[j].kind else {
        return false;
    };
    if matches!(
        op,
        Op::Readlist | Op::Len | Op::ToList | Op::ToArray | Op::Same | Op::Array
    ) {
        return false;
    }
    if matches!(op, Op::Eq | Op::Ne) {
        return true;
    }
    let int = |v: Slot| {
        let def = stmts[..j].iter().rev().find(|s| s.dst == Some(v));
        matches!(def.map(|s| &s.kind), Some(RKind::Op(op)) if !matches!(
            op,
            Op::Readlist | Op::ToList | Op::ToArray | Op::Same | Op::Array
        ))
    };
    stmts[j].args.iter().all(|a| match a {
        Operand::Var(v) => int(*v),
        Operand::Const(_) => true,
    })
}

/// Folds, inside one block, the statements an interpreter specialized to its program repeats
/// (a Brainfuck interpreter's residual program has one group per command), each rewrite
/// exact for the language's integers of any size:
/// - `x = x + a; x = x + b` is `x = x + (a + b)` (`x - a; x - b` is `x - (a + b)`: the first
///   operation stays, so that one on something else than an integer fails as before);
/// - `x = x + a; x = x & M; x = x + b; x = x & M`, with `M = 2^k - 1`, is
///   `x = x + (a + b); x = x & M` (masking is arithmetic modulo `2^k`);
/// - `a[i] = v; y = a[i]` reads back `v`: `y = v` (nothing when `y` is `v`);
/// - `a[i] = v`, known to be in bounds (the block used `a[i]` before), then statements that
///   neither read nor change an array, `i` or `a`, then `a[i] = w`: the first store is never
///   seen (one that may fail stays, since its error comes first).
///
/// A statement folded may now leave 64 bits where the ones it replaces did not: machine code
/// then deoptimizes before it, and the interpreter computes it with big integers.
pub fn fold(stmts: &mut Vec<RStmt>) {
    let mut changed = true;
    while changed {
        changed = false;
        let mut k = 0;
        while k < stmts.len() {
            if let (Some((x, a)), Some((y, b))) =
                (step_of(&stmts[k]), stmts.get(k + 1).and_then(step_of))
            {
                if let Some(folded) = a
                    .checked_add(b)
                    .filter(|_| x == y)
                    .and_then(|sum| step(x, sum, &stmts[k]))
                {
                    stmts.splice(k..k + 2, [folded]);
                    changed = true;
                    continue;
                }
            }
            if let (Some((x, a)), Some((x2, m)), Some((x3, b)), Some((x4, m2))) = (
                step_of(&stmts[k]),
                stmts.get(k + 1).and_then(mask_of),
                stmts.get(k + 2).and_then(step_of),
                stmts.get(k + 3).and_then(mask_of),
            ) {
                if let Some(folded) = a
                    .checked_add(b)
                    .filter(|_| [x2, x3, x4] == [x; 3] && m == m2)
                    .and_then(|sum| step(x, sum, &stmts[k]))
                {
                    stmts.splice(k..k + 3, [folded]);
                    changed = true;
                    continue;
                }
            }
            if let RKind::SetItem = stmts[k].kind {
                let [Operand::Var(arr), index, value] = stmts[k].args.as_slice() else {
                    unreachable!("a store names its array")
                };
                let (arr, index, value) = (*arr, index.clone(), value.clone());
                let same_place = |s: &RStmt| {
                    s.args.first() == Some(&Operand::Var(arr)) && s.args.get(1) == Some(&index)
                };
                // Read back right after the store.
                if let Some(next) = stmts.get(k + 1) {
                    if next.kind == RKind::Op(Op::Readlist) && same_place(next) {
                        let dst = next.dst.expect("a read assigns");
                        if value == Operand::Var(dst) {
                            stmts.remove(k + 1);
                        } else {
                            stmts[k + 1].kind = RKind::Op(Op::Same);
                            stmts[k + 1].args = vec![value];
                        }
                        changed = true;
                        continue;
                    }
                }
                // Stored over before anything sees it.
                let untouched = |j: usize| {
                    let s = &stmts[j];
                    let writes = |v: &Operand| matches!(v, Operand::Var(x) if Some(*x) == s.dst);
                    blind_to_arrays(stmts, j) && !writes(&Operand::Var(arr)) && !writes(&index)
                };
                let later = (k + 1..stmts.len()).position(|j| !untouched(j));
                if let Some(j) = later.map(|j| k + 1 + j) {
                    if stmts[j].kind == RKind::SetItem
                        && same_place(&stmts[j])
                        && used_before(stmts, k, arr, &index)
                    {
                        stmts.remove(k);
                        changed = true;
                        continue;
                    }
                }
            }
            k += 1;
        }
    }
}
