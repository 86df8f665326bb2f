//! Dead-code elimination: a pure operation that cannot exit (it has no snapshot) and whose
//! result nothing uses (no operand, no snapshot that is still needed) is removed. An
//! operation that can exit stays even when unused: removing it would remove an error the
//! interpreter would raise.
//!
//! ```text
//! v2 = add v0, 1                            (gone: nothing reads v2)
//! guard_true v1  @d:0 #1 [c=v1]      =>     guard_true v1  @d:0 #1 [c=v1]
//! ```

use super::rewrite::Rewriter;
use super::Rejected;
use crate::trace::{Opnd, Trace};

/// Runs dead-code elimination; a trace with nothing dead in it comes back as it is.
pub fn run(trace: Trace) -> Result<Trace, Rejected> {
    let n = trace.insts.len();
    let mut live = vec![false; n];
    for i in (0..n).rev() {
        let inst = &trace.insts[i];
        let removable = inst.kind.is_pure() && inst.snap.is_none();
        if removable && !live[i] {
            continue;
        }
        live[i] = true;
        let snap_uses = trace.snap_of(inst).into_iter().flat_map(|s| s.operands());
        for o in inst.args.iter().chain(snap_uses) {
            if let Opnd::Ref(r) = o {
                live[r.index()] = true;
            }
        }
    }
    if live.iter().all(|l| *l) {
        return Ok(trace);
    }
    let mut rw = Rewriter::new(&trace);
    for i in (0..n).filter(|i| live[*i]) {
        rw.keep(i);
    }
    Ok(rw.finish())
}
