//! The run's event log: what the JIT did and when, in order (`--log FILE` writes it as JSON
//! lines, `flowjit report` draws its timeline from it). The schema is documented in
//! `docs/ARCHITECTURE.md` ("The event log"); every event has `t`, microseconds since the run
//! began, and `event`, its kind's name.
//!
//! Traces are named as everywhere else: `tree` is a trace tree's number (`# trace N` in the
//! dumps), `bridge` a bridge's number within its tree (`bridge B`), and a guard is
//! `{tree, segment, inst}`: segment 0 is the root trace, segment B + 1 is bridge B, and
//! `inst` its instruction index, the `gN` of the `opt` dump.

use std::time::Duration;

/// A guard: the tree, the segment (0 for the root trace, B + 1 for bridge B), and the
/// guard's instruction index in that segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GuardRef {
    /// The tree.
    pub tree: usize,
    /// The segment: 0 for the root trace, B + 1 for bridge B.
    pub segment: usize,
    /// The guard's instruction index in its segment (`gN` in the dumps).
    pub inst: usize,
}

impl std::fmt::Display for GuardRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.segment {
            0 => write!(f, "trace {} g{}", self.tree, self.inst),
            s => write!(f, "trace {} bridge {} g{}", self.tree, s - 1, self.inst),
        }
    }
}

/// What happened.
#[derive(Clone, Debug, PartialEq)]
pub enum EventKind {
    /// A recording began: of a root trace at `anchor`, or of a bridge from `from`.
    TraceStarted {
        /// The anchor, as the dumps show it (label and greens).
        anchor: String,
        /// For a bridge, the guard it starts from.
        from: Option<GuardRef>,
    },
    /// A recording was abandoned.
    TraceAborted {
        /// Where it started, as the dumps show it.
        at: String,
        /// Why.
        reason: String,
    },
    /// A recorded trace (a new tree's root, or a bridge) was optimized.
    Optimized {
        /// The tree.
        tree: usize,
        /// The bridge, or `None` for the root trace.
        bridge: Option<usize>,
        /// Instructions as recorded.
        recorded: usize,
        /// Instructions after the optimizer.
        optimized: usize,
        /// The optimizer's time, in microseconds.
        micros: u64,
    },
    /// The optimizer rejected a recorded trace.
    Rejected {
        /// Where it started.
        at: String,
        /// Why.
        reason: String,
    },
    /// Machine code was made: a tree's function (`bridge` is `None`; it holds the root and
    /// `bridges` of its bridges), or a bridge's function of its own.
    Compiled {
        /// The tree.
        tree: usize,
        /// The bridge compiled on its own, or `None` for the tree's function.
        bridge: Option<usize>,
        /// Bridges compiled inside the tree's function (0 for a bridge on its own).
        bridges: usize,
        /// The machine code's size, in bytes.
        bytes: usize,
        /// The compilation's time, in microseconds.
        micros: u64,
    },
    /// Machine code could not be made: the trace runs on the trace interpreter.
    NotCompiled {
        /// What was compiled.
        what: String,
        /// Why it could not be.
        reason: String,
    },
    /// A bridge was attached to its guard.
    BridgeAttached {
        /// The new bridge's number in its tree.
        bridge: usize,
        /// The guard it hangs from.
        from: GuardRef,
        /// For a bridge specialized on a promoted value, the value.
        value: Option<String>,
        /// The label it ends at.
        to: String,
        /// Whether it is compiled in a function of its own rather than in its tree's.
        separate: bool,
    },
    /// An anchor failed to record so often that it is never traced again.
    Blacklisted {
        /// The anchor, as the dumps show it.
        anchor: String,
    },
    /// A guard's exit was linked to another tree's machine code.
    Linked {
        /// The exiting guard (or bridge end).
        from: GuardRef,
        /// The tree it goes on in.
        to: usize,
    },
    /// A limit of the JIT was reached.
    Limit {
        /// Which, in words.
        what: String,
    },
    /// How often a guard exited during the whole run (one event per guard that exited, at
    /// the end of the run).
    GuardExits {
        /// The guard.
        guard: GuardRef,
        /// The exits.
        count: u64,
    },
    /// The run ended: the totals that `--stats` prints.
    RunEnded {
        /// Trees recorded.
        traces: usize,
        /// Bridges attached.
        bridges: usize,
        /// Recordings abandoned.
        aborts: usize,
        /// Entries into trees, and of those, into machine code.
        entries: u64,
        /// Entries into machine code.
        native_entries: u64,
        /// Guard exits, all guards together.
        exits: u64,
        /// Exits linked to another tree's machine code.
        links: u64,
        /// Time per phase, in microseconds: interpreting, recording, optimizing,
        /// compiling, the trace interpreter, machine code.
        micros: [u64; 6],
    },
}

impl EventKind {
    /// The kind's name, the `event` field of the JSON form.
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::TraceStarted { .. } => "trace_started",
            EventKind::TraceAborted { .. } => "trace_aborted",
            EventKind::Optimized { .. } => "optimized",
            EventKind::Rejected { .. } => "rejected",
            EventKind::Compiled { .. } => "compiled",
            EventKind::NotCompiled { .. } => "not_compiled",
            EventKind::BridgeAttached { .. } => "bridge_attached",
            EventKind::Blacklisted { .. } => "blacklisted",
            EventKind::Linked { .. } => "linked",
            EventKind::Limit { .. } => "limit",
            EventKind::GuardExits { .. } => "guard_exits",
            EventKind::RunEnded { .. } => "run_ended",
        }
    }
}

/// One event.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// When, since the run began.
    pub at: Duration,
    /// What.
    pub kind: EventKind,
}

/// Microseconds, as the log gives times.
pub fn micros(d: Duration) -> u64 {
    d.as_micros().min(u64::MAX as u128) as u64
}
