//! Hot-loop profiling: where traces start, and which trace to enter.
//!
//! A trace is anchored at a [`Key`]: a label and, for a program with meta-tracing hints,
//! the values of the merge point's green variables. Each key moves through these states:
//!
//! ```text
//!  Counting ──count > threshold × 2^aborts──► Recording ──loop closed──► Traced (entered
//!     ▲                                          │                       whenever reached)
//!     └────────── aborted or rejected ◄──────────┘
//!             (after `max_aborts`: never traced again)
//! ```
//!
//! **Without hints**, counting happens at back edges, one counter per target label (a
//! vector indexed by block: this is on the interpreter's hot path).
//!
//! **With hints** (`jit_merge_point(greens)` and `can_enter_jit`), back edges are not
//! counted. At the end of a block holding `can_enter_jit`, the greens are read and counted
//! in a hash map keyed by their values; when that key is hot, or has a trace, the profile
//! is *armed* with it, and the next back edge to the merge point hands control to the
//! driver, which enters (or records) the trace for exactly those green values. Traces of
//! an interpreter written in the flowgraph language are thus found by the position in the
//! interpreted program, not by a chain of guards. A jump to the merge point whose greens
//! have a trace also hands control over (`Monitor::jump`), whether or not
//! `can_enter_jit` came before: the interpreter, resuming after an exit, enters the first
//! loop of the interpreted program that has a trace as it arrives there, rather than
//! running that loop's whole first iteration (with all it holds) up to its jump back.

use rustc_hash::FxHashMap as HashMap;

use flowjit_runtime::Value;

use crate::interp::Monitor;
use crate::lang::{BlockId, Program, Slot};
use crate::state::Frame;

use super::Policy;

/// Where a trace is anchored.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    /// The label the trace starts at and loops back to.
    pub anchor: BlockId,
    /// The green variables' values (empty without hints).
    pub greens: Vec<Value>,
    /// Whether the trace is a function trace: from the entry of the function whose entry
    /// block is `anchor` to its `return`, entered at each call of it.
    pub function: bool,
}

impl Key {
    /// The key of the function trace of the function whose entry is `entry`, for a call
    /// whose green arguments (those of a [`Program::portal`]; none otherwise) are `greens`.
    pub fn function(entry: BlockId, greens: Vec<Value>) -> Key {
        Key {
            anchor: entry,
            greens,
            function: true,
        }
    }
}

/// A key's count of arrivals. The interpreter counts every back edge into one: an
/// arrival is an increment and a comparison with `limit`, which holds what the state says:
/// 0 once the key has a trace (every arrival enters it), `u64::MAX` once it is never to be
/// traced, otherwise the arrivals before the key is hot (the threshold, doubled by each
/// abort, or more when the driver postponed it).
#[derive(Clone, Copy, Debug)]
struct Counter {
    count: u64,
    limit: u64,
    aborts: u32,
    trace: Option<usize>,
}

impl Counter {
    /// A key not yet arrived at, hot past `threshold` arrivals.
    fn new(threshold: u64) -> Counter {
        Counter {
            count: 0,
            limit: threshold,
            aborts: 0,
            trace: None,
        }
    }

    /// Counts one more arrival; whether the key should now be traced or entered.
    #[inline(always)]
    fn arrive(&mut self) -> bool {
        self.count += 1;
        self.count > self.limit
    }
}

/// A merge point: its greens, and its keys' counters by their values.
struct Merge {
    greens: Vec<Slot>,
    keys: HashMap<Vec<Value>, Counter>,
    /// Whether any key has a trace (until then no jump here is looked up).
    traced: bool,
    /// The greens read last, by a jump or `can_enter_jit` (kept to reuse its memory).
    scratch: Vec<Value>,
}

impl Merge {
    /// Reads the frame's greens into `scratch`; false if one is not set.
    fn read_greens(&mut self, frame: &Frame) -> bool {
        self.scratch.clear();
        for g in &self.greens {
            match &frame[g.index()] {
                Some(v) => self.scratch.push(v.clone()),
                None => return false,
            }
        }
        true
    }

    /// Whether the frame's greens have a trace: if so, the greens to arm the profile with.
    fn traced_greens(&mut self, frame: &Frame) -> Option<Vec<Value>> {
        if !self.read_greens(frame) {
            return None;
        }
        let traced = self
            .keys
            .get(self.scratch.as_slice())
            .is_some_and(|c| c.trace.is_some());
        traced.then(|| self.scratch.clone())
    }
}

/// The profile of a run: counters, and the traces by key.
pub struct Profile {
    threshold: u64,
    /// [`Policy::max_aborts`].
    max_aborts: u32,
    labels: Vec<Counter>,
    /// The merge points, by green values (empty without the hints).
    merges: Vec<Merge>,
    /// Per block, the index in `merges` of the merge point at its start, if any.
    merge_of: Vec<Option<usize>>,
    /// The merge point armed with its greens, whose next back edge hands control over.
    armed: Option<(usize, Vec<Value>)>,
    /// Whether any merge point's key has a trace (until then no jump is looked up).
    traced: bool,
    /// Per block: the calls of the function whose entry it is, counted as arrivals at its
    /// function trace's key. A function the interpreter makes function traces of is one that
    /// is not `@elidable` (its calls are one operation of a trace already) and either runs
    /// no loop, through its calls neither, or loops itself (its trace ends where it reaches
    /// its loop's tree, `trace::record_function`); or an interpreter's dispatch function
    /// ([`Program::portal`]), whose calls count in `portals` (its counter here is always past
    /// its limit); no other block counts. A function whose loops are only in the functions
    /// it calls has none: those loops have traces of their own.
    entries: Vec<Counter>,
    /// The calls after which a function is hot.
    calls: u64,
    /// Per block, the index in `portals` of the function whose entry it is, if that is an
    /// interpreter's dispatch function.
    portal_of: Vec<Option<usize>>,
    /// The dispatch functions' calls, counted per green arguments: one function trace per
    /// function of the interpreted program.
    portals: Vec<Merge>,
}

impl Profile {
    /// A profile for `program`: by green values if it has the meta-tracing hints (hot past
    /// the policy's `merge_threshold` arrivals), by back edge otherwise (past `threshold`).
    pub fn new(program: &Program, policy: &Policy) -> Profile {
        let hints = program.has_jit_hints();
        let merges: Vec<Merge> = (program.merge_points())
            .filter(|_| hints)
            .map(|(_, greens)| Merge {
                greens: greens.to_vec(),
                keys: HashMap::default(),
                traced: false,
                scratch: Vec::new(),
            })
            .collect();
        let mut merge_of = vec![None; program.blocks.len()];
        for (k, (block, _)) in program.merge_points().enumerate().filter(|_| hints) {
            merge_of[block.index()] = Some(k);
        }
        let threshold = match hints {
            true => policy.merge_threshold,
            false => policy.threshold,
        };
        let never = Counter {
            limit: u64::MAX,
            ..Counter::new(threshold)
        };
        let mut entries = vec![never; program.blocks.len()];
        let (mut portal_of, mut portals) = (vec![None; program.blocks.len()], Vec::new());
        let calls = policy.threshold * policy.function_threshold_factor;
        for (k, f) in program.funcs.iter().enumerate() {
            let func = crate::lang::FuncId(k as u32);
            if let Some(greens) = program.portal(func) {
                entries[f.entry.index()] = Counter::new(0);
                portal_of[f.entry.index()] = Some(portals.len());
                portals.push(Merge {
                    greens: greens.to_vec(),
                    keys: HashMap::default(),
                    traced: false,
                    scratch: Vec::new(),
                });
            } else if !f.elidable && (!program.runs_loops(func) || program.loops_itself(func)) {
                entries[f.entry.index()] = Counter::new(calls);
            }
        }
        Profile {
            threshold,
            max_aborts: policy.max_aborts,
            labels: vec![Counter::new(threshold); program.blocks.len()],
            merges,
            merge_of,
            armed: None,
            traced: false,
            entries,
            portal_of,
            portals,
            calls,
        }
    }

    /// Whether the profile is by green values (the program has the meta-tracing hints).
    pub fn by_greens(&self) -> bool {
        !self.merges.is_empty()
    }

    /// The merge point at the start of `block`, when the profile is by green values.
    fn merge_at(&self, block: BlockId) -> Option<&Merge> {
        self.merge_of[block.index()].map(|k| &self.merges[k])
    }

    /// The greens of the merge point at the start of `anchor`, when the profile is by green
    /// values, or of the dispatch function whose entry it is (none for any other anchor).
    pub fn greens_at(&self, anchor: BlockId) -> &[Slot] {
        match self.portal_of[anchor.index()] {
            Some(k) => &self.portals[k].greens,
            None => self.merge_at(anchor).map_or(&[], |m| m.greens.as_slice()),
        }
    }

    /// The key of the function trace a call entering `entry` with `frame` runs: with the
    /// green arguments of a dispatch function (`None` if one is an array, or unset).
    pub fn function_key(&self, entry: BlockId, frame: &Frame) -> Option<Key> {
        let greens = match self.portal_of[entry.index()] {
            Some(k) => (self.portals[k].greens.iter())
                .map(|g| frame[g.index()].clone().filter(|v| !v.holds_array()))
                .collect::<Option<Vec<Value>>>()?,
            None => Vec::new(),
        };
        Some(Key::function(entry, greens))
    }

    /// The tree of the function trace a call entering `entry` with `frame` finds
    /// ([`Profile::lookup`] of its [`Profile::function_key`]), without making the key of a
    /// function that has no greens: asked at every call the interpreter makes inside calls
    /// made by machine code.
    pub fn function_tree(&self, entry: BlockId, frame: &Frame) -> Option<usize> {
        match self.portal_of[entry.index()] {
            None => self.entries[entry.index()].trace,
            Some(_) => self.lookup(&self.function_key(entry, frame)?),
        }
    }

    /// The key the interpreter stopped for at a back edge to `anchor`, and whether the
    /// frame's greens (if any) still have its values.
    pub fn take_key(&mut self, anchor: BlockId, frame: &Frame) -> Option<Key> {
        if !self.by_greens() {
            return Some(Key {
                anchor,
                greens: Vec::new(),
                function: false,
            });
        }
        let (k, greens) = self.armed.take()?;
        let same = self.merge_of[anchor.index()] == Some(k)
            && (self.merges[k].greens.iter())
                .zip(&greens)
                .all(|(g, v)| frame[g.index()].as_ref() == Some(v));
        same.then_some(Key {
            anchor,
            greens,
            function: false,
        })
    }

    /// The key of a trace anchored at the start of `block`, with the frame's greens: for a
    /// profile by green values only merge points anchor traces.
    pub fn key_at(&self, block: BlockId, frame: &Frame) -> Option<Key> {
        if !self.by_greens() {
            return Some(Key {
                anchor: block,
                greens: Vec::new(),
                function: false,
            });
        }
        let m = self.merge_at(block)?;
        // An array is not a green (SPEC §2.1): where one is, nothing is traced.
        let greens: Option<Vec<Value>> = (m.greens.iter())
            .map(|g| frame[g.index()].clone().filter(|v| !v.holds_array()))
            .collect();
        Some(Key {
            anchor: block,
            greens: greens?,
            function: false,
        })
    }

    /// Whether a jump to `block` with `frame` reaches the anchor of a trace other than the
    /// one at `recording` (a recording's `trace::Host::traced`).
    pub fn traced_besides(&self, block: BlockId, frame: &Frame, recording: Option<&Key>) -> bool {
        (self.key_at(block, frame))
            .is_some_and(|k| Some(&k) != recording && self.lookup(&k).is_some())
    }

    /// Where a bridge's recording ends, jumping to `target` with `frame`: at a trace's
    /// anchor, taking that merge point's greens as constants (`trace::record_bridge`'s
    /// `ends`).
    pub fn bridge_end(&self, target: BlockId, frame: &Frame) -> Option<Vec<Slot>> {
        self.lookup(&self.key_at(target, frame)?)?;
        Some(self.greens_at(target).to_vec())
    }

    /// The trace anchored at `key`, if there is one (without counting anything).
    pub fn lookup(&self, key: &Key) -> Option<usize> {
        if key.function {
            return match self.portal_of[key.anchor.index()] {
                Some(k) => (self.portals[k].keys.get(&key.greens)).and_then(|c| c.trace),
                None => self.entries[key.anchor.index()].trace,
            };
        }
        match self.merge_at(key.anchor) {
            Some(m) => m.keys.get(&key.greens).and_then(|c| c.trace),
            None => self.labels[key.anchor.index()].trace,
        }
    }

    fn counter(&mut self, key: &Key) -> &mut Counter {
        if key.function {
            return match self.portal_of[key.anchor.index()] {
                Some(k) => (self.portals[k].keys.entry(key.greens.clone()))
                    .or_insert(Counter::new(self.calls)),
                None => &mut self.entries[key.anchor.index()],
            };
        }
        let threshold = self.threshold;
        match self.merge_of[key.anchor.index()] {
            Some(k) => {
                (self.merges[k].keys.entry(key.greens.clone())).or_insert(Counter::new(threshold))
            }
            None => &mut self.labels[key.anchor.index()],
        }
    }

    /// Whether a function trace is to be recorded at `key` after `more` calls beyond those
    /// the profile counted (calls that machine code made): it has none, it is not given
    /// up, and the calls pass its limit. Counts nothing.
    pub fn hot_after(&self, key: &Key, more: u64) -> bool {
        debug_assert!(key.function);
        let c = match self.portal_of[key.anchor.index()] {
            Some(k) => self.portals[k].keys.get(&key.greens),
            None => Some(&self.entries[key.anchor.index()]),
        };
        match c {
            Some(c) => c.trace.is_none() && c.count.saturating_add(more) > c.limit,
            None => more > self.calls,
        }
    }

    /// Counts `n` calls at the function trace's key `key` that machine code made.
    pub fn count_calls(&mut self, key: &Key, n: u64) {
        let c = self.counter(key);
        c.count = c.count.saturating_add(n);
    }

    /// How many times `key` has been arrived at since it was last counted from zero.
    pub fn arrivals(&mut self, key: &Key) -> u64 {
        self.counter(key).count
    }

    /// The trace anchored at `key`, if there is one.
    pub fn trace(&mut self, key: &Key) -> Option<usize> {
        self.counter(key).trace
    }

    /// Records that trace `index` is anchored at `key`.
    pub fn set_trace(&mut self, key: &Key, index: usize) {
        let c = self.counter(key);
        c.trace = Some(index);
        c.limit = 0;
        if key.function {
            return;
        }
        if let Some(k) = self.merge_of[key.anchor.index()] {
            self.merges[k].traced = true;
            self.traced = true;
        }
    }

    /// Forgets the trace at `key` and never traces there again.
    pub fn forget(&mut self, key: &Key) {
        let max_aborts = self.max_aborts;
        let c = self.counter(key);
        c.trace = None;
        c.count = 0;
        c.aborts = max_aborts;
        c.limit = u64::MAX;
    }

    /// Counts `key` from zero again, hot after `arrivals` more arrivals (at least the
    /// threshold's): it was found not worth compiling before then.
    pub fn postpone(&mut self, key: &Key, arrivals: u64) {
        let threshold = self.threshold;
        let c = self.counter(key);
        c.count = 0;
        c.limit = arrivals.max(threshold.saturating_mul(1 << c.aborts));
    }

    /// Records that a recording at `key` was abandoned or rejected; whether the key is now
    /// never traced again (it failed [`Policy::max_aborts`] times).
    pub fn failed(&mut self, key: &Key) -> bool {
        let max_aborts = self.max_aborts;
        let threshold = self.threshold;
        let c = self.counter(key);
        c.count = 0;
        c.aborts += 1;
        // Each abort doubles the count needed before the next attempt.
        c.limit = match c.aborts >= max_aborts {
            true => u64::MAX,
            false => threshold.saturating_mul(1 << c.aborts),
        };
        c.aborts == max_aborts
    }
}

impl Monitor for Profile {
    #[inline]
    fn back_edge(&mut self, _from: BlockId, target: BlockId) -> bool {
        if self.merges.is_empty() {
            return self.labels[target.index()].arrive();
        }
        matches!(&self.armed, Some((k, _)) if self.merge_of[target.index()] == Some(*k))
    }

    #[inline]
    fn jump(&mut self, target: BlockId, frame: &Frame) -> bool {
        if !self.traced || self.armed.is_some() {
            return false;
        }
        let Some(k) = self.merge_of[target.index()] else {
            return false;
        };
        let m = &mut self.merges[k];
        if !m.traced {
            return false;
        }
        let greens = m.traced_greens(frame);
        let found = greens.is_some();
        self.armed = greens.map(|g| (k, g));
        found
    }

    #[inline]
    fn call(&mut self, entry: BlockId, frame: &Frame) -> bool {
        if !self.entries[entry.index()].arrive() {
            return false;
        }
        let Some(k) = self.portal_of[entry.index()] else {
            return true;
        };
        let (calls, m) = (self.calls, &mut self.portals[k]);
        if !m.read_greens(frame) || m.scratch.iter().any(Value::holds_array) {
            return false;
        }
        match m.keys.get_mut(m.scratch.as_slice()) {
            Some(c) => c.arrive(),
            None => (m.keys.entry(m.scratch.clone()))
                .or_insert(Counter::new(calls))
                .arrive(),
        }
    }

    fn can_enter_jit(&mut self, k: usize, frame: &Frame) {
        let threshold = self.threshold;
        let Some(m) = self.merges.get_mut(k) else {
            return;
        };
        if !m.read_greens(frame) {
            return;
        }
        let hot = match m.keys.get_mut(m.scratch.as_slice()) {
            Some(c) => c.arrive(),
            None => m
                .keys
                .entry(m.scratch.clone())
                .or_insert(Counter::new(threshold))
                .arrive(),
        };
        self.armed = hot.then(|| (k, m.scratch.clone()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lang::{load, Syntax};

    const INTERPRETER: &str = "\
start:
    pc = 0
    goto dispatch
dispatch:
    jit_merge_point(pc)
    c = pc < 3
    if c goto step else goto done
step:
    pc = pc + 1
    can_enter_jit
    goto dispatch
done:
    print_and_stop(pc)
";

    /// A frame whose green `pc` is `pc`.
    fn frame_with(program: &Program, pc: i64) -> Frame {
        let mut frame = vec![None; program.frame_size()];
        let slot = program.merge_points().next().expect("a merge point").1[0];
        frame[slot.index()] = Some(Value::Int(pc));
        frame
    }

    #[test]
    fn a_jump_to_the_merge_point_enters_a_trace_of_its_greens() {
        let (_, program) = load(INTERPRETER, Syntax::Fg).expect("a valid program");
        let merge = program.merge_points().next().expect("a merge point").0;
        let other = program.block_id("step").expect("a label");
        let mut profile = Profile::new(&program, &Policy::DEFAULT);
        let at_one = frame_with(&program, 1);
        assert!(!profile.jump(merge, &at_one), "nothing is traced yet");
        let key = Key {
            anchor: merge,
            greens: vec![Value::Int(1)],
            function: false,
        };
        profile.set_trace(&key, 0);
        assert!(
            !profile.jump(other, &at_one),
            "only the merge point is entered"
        );
        assert!(
            !profile.jump(merge, &frame_with(&program, 2)),
            "no trace for pc=2"
        );
        assert!(profile.jump(merge, &at_one), "pc=1 has a trace");
        assert_eq!(profile.take_key(merge, &at_one), Some(key));
    }
}
