//! Traces: the IR, the recorder, the trace interpreter, printers, a parser and a verifier.

pub mod ir;
pub mod parse;
pub mod print;
pub mod record;
pub mod run;
pub mod verify;

pub use ir::{Inst, Kind, Opnd, Ref, SnapId, Snapshot, Trace};
pub use record::{record, AbortReason, Recorded};
pub use run::{run_trace, TraceExit};
