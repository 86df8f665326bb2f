//! The driver's policy: every threshold and limit by which it decides what to record,
//! compile and keep, each with its reason.
//!
//! One value, [`Policy::DEFAULT`], holds the values a run uses unless told otherwise; the
//! command line's `--threshold`, `--bridge-threshold`, `--tier-iterations` and
//! `--bridge-entries` override theirs ([`super::Config::policy`]). Being a `const`, its
//! values serve where a constant is needed (the command line's defaults, assertions).

/// The thresholds and limits of the driver, its hot-loop profile and its judgement of
/// whether compiling pays (see the module's documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Back edges to a label before it is traced: it is traced when the count exceeds this.
    pub threshold: u64,
    /// In a program with the meta-tracing hints: `can_enter_jit` arrivals with the same
    /// green values before they are traced (when the count exceeds this). One such arrival
    /// is an iteration of a loop of the interpreted program, dozens of the interpreter's
    /// own statements (a Brainfuck command is about a dozen, its loop a few commands to a
    /// few hundred), where a back edge of a plain loop is a handful: the interpreter spends
    /// several times longer before a key reaches the same count, so it is traced sooner.
    /// Brainfuck's mandelbrot (`mandel.b`, docs/BENCHMARKS.md) shows it.
    pub merge_threshold: u64,
    /// Calls of a function before its *function trace* is recorded, as a multiple of
    /// [`Policy::threshold`] (the count exceeds `threshold × this`). A function called
    /// from a loop is best compiled inlined into the loop's trace, which needs the loop to
    /// get hot first; an iteration often makes several calls. PyPy likewise waits longer
    /// for a function (1,619 calls) than for a loop (1,039 iterations).
    pub function_threshold_factor: u64,
    /// Exits of one instruction of a function trace that is not a guard (no bridge takes
    /// them: a read finding another type, say) after which the function is left to the
    /// interpreter: each such exit finishes its call there, which costs more than
    /// interpreting the call.
    pub max_function_exits: u64,
    /// After this many aborted or rejected recordings at a key, it is never traced again;
    /// each one doubles the count needed before the next attempt (`profile`).
    pub max_aborts: u32,
    /// The longest root trace recorded, in instructions.
    pub max_trace_len: usize,
    /// How many times longer than a root trace a bridge may grow. A bridge runs only what
    /// follows its guard, once, up to the next anchor: in an interpreter written in the
    /// flowgraph language that may be a long stretch of the interpreted program between two
    /// of its loops (Brainfuck's mandelbrot has stretches of hundreds of commands), which,
    /// left to the interpreter, costs far more than the recording. With
    /// [`Policy::max_trace_len`], under 2^16 instructions: a listing's origin holds the
    /// instruction in 16 bits (`backend::lower::Origin::srcloc`).
    pub bridge_length_factor: usize,
    /// The most trees (root traces) a run records.
    pub max_trees: usize,

    /// Exits from a guard before a bridge is recorded from it (when the count exceeds
    /// this).
    pub bridge_threshold: u64,
    /// In a program with the meta-tracing hints: exits from a guard before a bridge is
    /// recorded from it. For the reason [`Policy::merge_threshold`] gives: after each exit
    /// the interpreter runs the interpreted program, a few dozen of its own statements per
    /// interpreted one, up to the next loop that has a trace, so a bridge pays for itself
    /// after fewer exits; fewer still records bridges on paths that later prove rare
    /// (`mandel.b`).
    pub merge_bridge_threshold: u64,
    /// The most bridges a tree gets: LuaJIT's `maxside` (100 side traces per root trace).
    /// Compiled on their own, each costs one small compilation, not the tree's again; fewer
    /// leave part of a many-way dispatch to the interpreter every time
    /// (`benches/cliffs/dispatch64.fg`). Under 256: a bridge's segment number is its unit in
    /// an exit code (`backend::lower::exit_code`), eight bits wide.
    pub max_bridges: usize,
    /// The most values a `guard_value` gets a specialized bridge for; past them, one
    /// unspecialized bridge takes every other value.
    pub max_specializations: usize,
    /// After this many failed recordings of a bridge from a guard, it gets no more attempts.
    pub max_bridge_failures: u32,

    /// The most trace instructions a tree's function may hold with the bridges compiled in
    /// it (a bridge specialized on a promoted value, or one whose guard cannot link to code
    /// of its own): each compiles the whole function again, so that a chain of them (a
    /// promotion's unspecialized bridge meeting the promotion again, each with its values)
    /// costs minutes (`tests/programs/promote_chain.fg`). Past it, the guard's exits stay
    /// exits.
    pub max_tree_function: usize,
    /// The most bridges compiled in a tree's function (each compiles the whole tree again);
    /// later ones are compiled on their own. Two keep a loop whose two ways alternate in one
    /// function (`tests/programs/branchy.fg`), and Brainfuck's loops with their ends
    /// (`mandel.b`); a tree of many ways takes none ([`Policy::max_tree_ways`]).
    pub max_tree_bridges: usize,
    /// The most guards of a tree that may have exited for a bridge to be compiled in the
    /// tree's function (`Jit::few_ways`): the other way of a loop whose two ways alternate,
    /// not the first of many ways, each of which compiled the tree again
    /// (`benches/cliffs/branchy400.fg`).
    pub max_tree_ways: usize,
    /// How many bridges compiled on their own a tree's function takes in once they are
    /// entered often ([`Policy::bridge_entries`], `Jit::absorb_bridge`): each compiles the
    /// function again.
    pub max_absorbed: usize,
    /// Entries of a bridge compiled on its own before it moves into its tree's function
    /// (`--bridge-entries`; 0: never): there its guard branches to it instead of exiting,
    /// writing the mirror and entering it through a link (the exit, the epilogue, the
    /// prologue and the input loads: some 25 instructions), but moving it compiles the
    /// function again, some millions of instructions on the compiler thread. This many
    /// entries pay for that many times over, and the bridges of mandel.b that run most
    /// move in early.
    pub bridge_entries: i64,
    /// Iterations a loop runs in the quick backend's code before Cranelift compiles its
    /// tree (`--tier-iterations`, at least 1). Cranelift takes about a millisecond for a
    /// root (some six million instructions for a loop of 32 guards), and its code saves a
    /// nanosecond or two an iteration over the quick backend's (no counter, registers
    /// allocated across the whole loop): a loop that runs a million iterations pays for it,
    /// one that runs a few thousand never does. A tenth of that, so that a hot loop loses
    /// little before it gets the better code.
    pub tier_iterations: i64,
    /// The most trace instructions a function compiled with Cranelift's optimizations may
    /// hold; a larger tree is compiled without (as bridges compiled on their own are).
    /// Cranelift's e-graph computes a pure value where it is used, not where the trace
    /// defined it, and an exit is such a use: a value only exits read is computed again in
    /// every exit that reads it, with whatever it depends on. In a long trace that is
    /// quadratic in code size and compile time (a loop of 1,844 instructions and 408 guards
    /// whose variables formed such a chain); without the e-graph each value is computed
    /// where it is defined. Loops this long are rare and run few iterations of their own.
    pub max_optimized: usize,
    /// The most machine code alive at once, in bytes (code that nothing reaches any more is
    /// freed, and does not count); past it, nothing more is compiled. The code heap
    /// reserves twice as many addresses, for the holes between blocks of different sizes.
    pub max_code_bytes: usize,
    /// Entries a tree's machine code refuses (its inputs not of the kinds it was compiled
    /// for, such as an integer that left 64 bits) before its loop is left to the
    /// interpreter.
    pub max_refusals: u32,

    /// What interpreting one operation costs, in nanoseconds (`payoff`, measured: see
    /// docs/ARCHITECTURE.md, *Compiling pays for itself*).
    pub interp_ns_per_op: u64,
    /// What compiling a loop costs whatever its size, in nanoseconds: Cranelift's fixed
    /// cost per function, with recording and optimizing.
    pub compile_ns: u64,
    /// What compiling costs per operation of the loop's body, in nanoseconds (a trace has
    /// about two instructions per operation: the peeled iteration, and the guards).
    pub compile_ns_per_op: u64,
    /// The most blocks a loop judged by `payoff` may have: a larger one is compiled at its
    /// threshold, unexamined, so that finding a loop's shape stays cheap.
    pub max_loop_blocks: usize,
}

impl Policy {
    /// What of it the backend keeps to.
    pub const fn backend_limits(&self) -> crate::backend::Limits {
        crate::backend::Limits {
            tier_iterations: self.tier_iterations,
            bridge_entries: self.bridge_entries,
            max_optimized: self.max_optimized,
            max_code_bytes: self.max_code_bytes,
        }
    }

    /// The values a run uses unless told otherwise.
    pub const DEFAULT: Policy = Policy {
        threshold: 50,
        merge_threshold: 10,
        function_threshold_factor: 20,
        max_function_exits: 1000,
        max_aborts: 4,
        max_trace_len: 4000,
        bridge_length_factor: 4,
        max_trees: 1000,
        bridge_threshold: 20,
        merge_bridge_threshold: 5,
        max_bridges: 100,
        max_specializations: 8,
        max_bridge_failures: 2,
        max_tree_function: 2000,
        max_tree_bridges: 2,
        max_tree_ways: 4,
        max_absorbed: 8,
        bridge_entries: 50_000,
        tier_iterations: 100_000,
        max_optimized: 1000,
        max_code_bytes: 64 << 20,
        max_refusals: 16,
        interp_ns_per_op: 4,
        compile_ns: 250_000,
        compile_ns_per_op: 3_000,
        max_loop_blocks: 4096,
    };

    /// Why the driver cannot run with this policy, if it cannot: the limits that the code
    /// it makes holds in fixed widths ([`Policy::max_bridges`],
    /// [`Policy::bridge_length_factor`]).
    pub fn check(&self) -> Result<(), String> {
        if self.max_bridges >= 256 {
            return Err(format!(
                "at most 255 bridges per tree fit an exit code, not {}",
                self.max_bridges
            ));
        }
        let longest = self.max_trace_len.saturating_mul(self.bridge_length_factor);
        if longest >= 1 << 16 {
            return Err(format!(
                "a trace of up to {longest} instructions does not fit a listing's origin \
                 (under 65536)"
            ));
        }
        Ok(())
    }
}

impl Default for Policy {
    fn default() -> Policy {
        Policy::DEFAULT
    }
}

// What `Policy::check` refuses, the defaults never are.
const _: () = assert!(Policy::DEFAULT.max_bridges < 256);
const _: () =
    assert!(Policy::DEFAULT.max_trace_len * Policy::DEFAULT.bridge_length_factor < 1 << 16);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_policy_passes_its_check() {
        assert_eq!(Policy::DEFAULT.check(), Ok(()));
        assert_eq!(Policy::default(), Policy::DEFAULT);
        let many = Policy {
            max_bridges: 256,
            ..Policy::DEFAULT
        };
        assert!(many.check().is_err());
    }
}
