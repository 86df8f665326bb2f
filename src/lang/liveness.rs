//! Which variables are *live* where: read, on some path from there, before they are
//! written. A variable that is not live at a position is never read again before it is
//! overwritten, so its value there cannot change what the program does: resume data need not
//! restore it (LuaJIT's snapshots and PyPy's resume data hold live variables only), and an
//! exit from machine code writes back less.
//!
//! The analysis is the classic backward one over the blocks of the program, computed once
//! when the program loads ([`Liveness::new`]): for each block, the variables live where it
//! starts; then, walking each block backwards from its end, those live before each of its
//! statements, kept in a table (the recorder asks at every snapshot).
//! A function's blocks form their own graph (a call is a statement of its caller; `return`
//! ends a block with no successor).
//!
//! Reads include the hints that read: `promote(v)` reads `v`, and `jit_merge_point(greens)`
//! reads its greens, which the JIT looks up traces by.

use super::program::{Block, BlockId, Inst, Operand, Slot, Terminator};

/// A set of slots, as bits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vars(Vec<u64>);

impl Vars {
    fn empty(n: usize) -> Vars {
        Vars(vec![0; n.div_ceil(64)])
    }

    /// Whether `slot` is in the set.
    pub fn contains(&self, slot: Slot) -> bool {
        let i = slot.index();
        self.0.get(i / 64).is_some_and(|w| w >> (i % 64) & 1 == 1)
    }

    fn insert(&mut self, slot: Slot) {
        let i = slot.index();
        self.0[i / 64] |= 1 << (i % 64);
    }

    fn remove(&mut self, slot: Slot) {
        let i = slot.index();
        self.0[i / 64] &= !(1 << (i % 64));
    }

    /// Adds `other`; whether anything was added.
    fn union(&mut self, other: &Vars) -> bool {
        let mut changed = false;
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            let new = *a | b;
            changed |= new != *a;
            *a = new;
        }
        changed
    }

    fn read(&mut self, o: &Operand) {
        if let Operand::Var(s) = o {
            self.insert(*s);
        }
    }
}

/// The variables live before each statement of each block, and before its terminator.
#[derive(Clone, Debug)]
pub struct Liveness {
    /// Per block, the variables live before each statement and before the terminator
    /// (computed once: the recorder asks at every snapshot).
    at: Vec<Vec<Vars>>,
}

/// Where control goes after `term`.
fn successors(term: &Terminator) -> Vec<BlockId> {
    match term {
        Terminator::Goto(j) => vec![j.target],
        Terminator::If { then, els, .. } => vec![then.target, els.target],
        Terminator::Promote { target, .. } => vec![target.target],
        Terminator::PrintAndStop(_) | Terminator::Return(_) => Vec::new(),
    }
}

/// `live` before `term`, from `live` after it.
fn through_term(term: &Terminator, live: &mut Vars) {
    match term {
        Terminator::If { cond, .. } => live.insert(*cond),
        Terminator::Promote { var, .. } => live.insert(*var),
        Terminator::PrintAndStop(o) | Terminator::Return(o) => live.read(o),
        Terminator::Goto(_) => {}
    }
}

/// `live` before `inst`, from `live` after it.
fn through_inst(inst: &Inst, live: &mut Vars) {
    match inst {
        Inst::Op1 { dst, a, .. } => {
            live.remove(*dst);
            live.read(a);
        }
        Inst::Op2 { dst, a, b, .. } => {
            live.remove(*dst);
            live.read(a);
            live.read(b);
        }
        Inst::Promote(s) => live.insert(*s),
        Inst::MergePoint(greens) => {
            for g in greens {
                live.insert(*g);
            }
        }
        Inst::CanEnterJit => {}
        Inst::SetItem {
            array,
            index,
            value,
        } => {
            live.insert(*array);
            live.read(index);
            live.read(value);
        }
        Inst::Print(o) | Inst::Putchar(o) => live.read(o),
        Inst::Getchar(dst) => live.remove(*dst),
        Inst::Call { dst, args, .. } => {
            live.remove(*dst);
            for a in args {
                live.read(a);
            }
        }
    }
}

impl Liveness {
    /// The analysis of `blocks`, whose frames have `size` variables.
    pub fn new(blocks: &[Block], size: usize) -> Liveness {
        let mut live_in = vec![Vars::empty(size); blocks.len()];
        let mut changed = true;
        while changed {
            changed = false;
            // Backwards over the source order, which puts most successors after their
            // predecessors: few rounds.
            for (b, block) in blocks.iter().enumerate().rev() {
                let mut live = Vars::empty(size);
                for s in successors(&block.term) {
                    live.union(&live_in[s.index()]);
                }
                through_term(&block.term, &mut live);
                for inst in block.insts.iter().rev() {
                    through_inst(inst, &mut live);
                }
                changed |= live_in[b].union(&live);
            }
        }
        let at = blocks
            .iter()
            .map(|block| {
                let mut live = Vars::empty(size);
                for s in successors(&block.term) {
                    live.union(&live_in[s.index()]);
                }
                through_term(&block.term, &mut live);
                let mut at = vec![live.clone()];
                for inst in block.insts.iter().rev() {
                    through_inst(inst, &mut live);
                    at.push(live.clone());
                }
                at.reverse();
                at
            })
            .collect();
        Liveness { at }
    }

    /// The variables live before statement `inst` of `block` (`inst` may be the number of
    /// statements: before the terminator).
    pub fn live_at(&self, block: BlockId, inst: usize) -> &Vars {
        &self.at[block.index()][inst]
    }
}

#[cfg(test)]
mod tests {
    use crate::lang::{load, Syntax};

    /// The names live before statement `inst` of block `label`.
    fn live(text: &str, label: &str, inst: usize) -> Vec<String> {
        let (_, program) = load(text, Syntax::Fg).expect("a valid program");
        let block = program.block_id(label).expect("a label");
        let vars = program.live_at(block, inst);
        let mut names: Vec<String> = program
            .vars
            .iter()
            .enumerate()
            .filter(|(k, _)| vars.contains(super::Slot(*k as u32)))
            .map(|(_, n)| n.clone())
            .collect();
        names.sort();
        names
    }

    const SUM: &str = "
start:
    s = 0
    i = 1
    goto head
head:
    c = i <= n
    if c goto body else goto done
body:
    t = i * 2
    s = s + t
    i = i + 1
    goto head
done:
    print_and_stop(s)
";

    #[test]
    fn a_variable_read_later_is_live_one_written_first_is_not() {
        // `c` and `t` are written before they are read on every path from `head`.
        assert_eq!(live(SUM, "head", 0), ["i", "n", "s"]);
        // Before the terminator of `head`: its condition too.
        assert_eq!(live(SUM, "head", 1), ["c", "i", "n", "s"]);
        assert_eq!(live(SUM, "done", 0), ["s"]);
        // Inside a block: `t` is read by the statement after.
        assert_eq!(live(SUM, "body", 1), ["i", "n", "s", "t"]);
        // Nothing is live before the program starts but its input.
        assert_eq!(live(SUM, "start", 0), ["n"]);
    }

    #[test]
    fn hints_read_what_they_name() {
        let text = "
start:
    pc = 0
    goto d
d:
    jit_merge_point(pc, code)
    x = 1
    promote(x)
    if x goto d else goto end
end:
    print_and_stop(0)
";
        // The merge point's greens are read there (traces are looked up by them), and
        // `promote(x)` reads `x`.
        assert_eq!(live(text, "d", 0), ["code", "pc"]);
        assert_eq!(live(text, "d", 2), ["code", "pc", "x"]);
    }

    #[test]
    fn a_variable_read_on_one_path_only_is_live() {
        let text = "
start:
    if a goto one else goto two
one:
    print_and_stop(b)
two:
    b = 2
    print_and_stop(b)
";
        assert_eq!(live(text, "start", 0), ["a", "b"]);
        assert_eq!(live(text, "two", 0), Vec::<String>::new());
    }
}
