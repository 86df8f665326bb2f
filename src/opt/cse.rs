//! Common-subexpression elimination of operations: a stage of the forward optimizer
//! (`forward`), after `fold`.
//!
//! Only pure instructions ([`Effect::Pure`](crate::trace::Effect::Pure)) are merged: the same
//! operation on the same operands gives the same result, and if the first one did not exit,
//! the second would not either. So a repeated operation is
//! replaced by the first one's result. Operands of commutative operations are put in a
//! canonical order first. Across a peeled loop this is also loop-invariant code motion: an
//! operation of the loop body on values defined in the preamble is the preamble's.
//!
//! ```text
//! v2 = lt v0, 4  @l:0 #0 []                v2 = lt v0, 4  @l:0 #0 []
//! guard_true v2  @d:0 #1 []          =>    guard_true v2  @d:0 #1 []
//! v4 = lt v0, 4  @m:0 #1 []                guard_true v2  @e:0 #2 []
//! guard_true v4  @e:0 #2 []
//! ```

use rustc_hash::FxHashMap as HashMap;

use super::forward::{Optimizer, Pending, Stage, Verdict};
use super::Rejected;
use flowjit_runtime::{Op, Value};

use crate::trace::{Kind, Opnd, Ref};

/// The key of an operation: commutative operands in order, and `sub x, c` as `add x, -c`
/// (the same number, and the same overflow).
fn canonical(kind: Kind, mut args: Vec<Opnd>) -> (Kind, Vec<Opnd>) {
    if let (Kind::Op(Op::Sub), [x, Opnd::Const(Value::Int(c))]) = (kind, args.as_slice()) {
        if let Some(neg) = c.checked_neg() {
            return canonical(
                Kind::Op(Op::Add),
                vec![x.clone(), Opnd::Const(Value::Int(neg))],
            );
        }
    }
    if kind.info().commutative && args.len() == 2 {
        let rank = |o: &Opnd| match o {
            Opnd::Ref(r) => (0, r.0),
            Opnd::Const(_) => (1, 0),
        };
        if rank(&args[1]) < rank(&args[0]) {
            args.swap(0, 1);
        }
    }
    (kind, args)
}

/// The common-subexpression stage: the pure operations emitted so far, by kind and operands.
#[derive(Default)]
pub struct Cse {
    seen: HashMap<(Kind, Vec<Opnd>), Ref>,
    /// The key of the operation being visited, kept for when it is emitted.
    key: Option<(Kind, Vec<Opnd>)>,
}

impl Stage for Cse {
    fn visit(&mut self, opt: &Optimizer, inst: &mut Pending) -> Result<Verdict, Rejected> {
        self.key = None;
        let counted_call = opt.counted && matches!(inst.kind, Kind::CallPure(_));
        if !inst.kind.is_pure() || counted_call {
            return Ok(Verdict::Pass);
        }
        let key = canonical(inst.kind, inst.args.clone());
        if let Some(&r) = self.seen.get(&key) {
            return Ok(Verdict::Becomes(Opnd::Ref(r)));
        }
        self.key = Some(key);
        Ok(Verdict::Pass)
    }

    fn learn(&mut self, _: &mut Optimizer, r: Ref) {
        if let Some(key) = self.key.take() {
            self.seen.insert(key, r);
        }
    }
}
