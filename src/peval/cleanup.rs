//! The clean-up the articles say a good partial evaluator does itself.
//!
//! Partial evaluation leaves many blocks that do nothing but jump (every dispatch test on a
//! known opcode becomes one), and chains of blocks that follow each other. Clean-up:
//!
//! 1. threads jumps through blocks that only jump (and the entry, if it is one);
//! 2. merges a block into the one before it when that is its only predecessor and ends in a
//!    jump to it (a straight-line chain becomes one block);
//! 3. drops blocks that cannot be reached from the entry (or a call).
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

use super::{RBlock, RKind, RTerm, Residual};

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
pub fn clean(raw: &Residual) -> Residual {
    let mut r = raw.clone();
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
    r
}
