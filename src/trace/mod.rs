//! Traces: the IR, the recorder, the trace interpreter, printers, a parser and a verifier.

pub mod ir;
pub mod parse;
pub mod print;
pub mod record;
pub mod run;
pub mod tree;
pub mod verify;

pub use ir::{
    call_parts, call_pure_parts, Effect, Info, Inst, Kind, KnownRange, Merge, Opnd, Ref, Res, Snap,
    SnapId, Snapshot, Trace, Ty,
};
pub use record::{
    record, record_bridge, record_function, AbortReason, Element, Host, Interpreted, Rebuilt,
    Recorded,
};
pub use run::{call_elidable, run_bridge, run_trace, Env, TraceExit};
