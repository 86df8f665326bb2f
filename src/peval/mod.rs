//! The partial evaluator of the articles: polyvariant and online.
//!
//! Given the values of some variables (the *static* ones), it runs the program as far as
//! they allow: an operation on known values is computed now and vanishes; an `if` on a known
//! value takes its branch; everything else is copied into the *residual program*, with the
//! known values put in as constants. Each (label, partial environment) pair is specialized
//! once, in a code cache, and named as the articles' `gensym` names it: `power1`,
//! `power_rec1`, `power_rec2`, ... (`promote` is a plain jump here, and the JIT's hints
//! vanish.)
//!
//! ```text
//! power: res = 1; if y ...      with y = 5      power1:     goto power_rec1
//! power_rec: res = res * x            =>        power_rec1: res = 1 * x; goto power_rec2
//!            y = y - 1; if y ...                ...
//!                                               power_rec5: res = res * x; goto power_done1
//! ```
//!
//! **Termination.** The articles' partial evaluator runs forever on a program whose static
//! values never repeat (a static counter in a loop whose end is dynamic). This one bounds the
//! specializations of each label at [`MAX_VERSIONS`]; past that it *generalizes*: the new
//! partial environment keeps only the variables whose values agree with every existing
//! specialization of the label, and the others become dynamic. The jump to the generalized
//! block first assigns them their current values (`i = 33`), so the residual program is
//! still exact. Generalizing only ever forgets values, so the specializations of a label are
//! finitely many; a residual program beyond [`MAX_BLOCKS`] blocks (a program that builds
//! ever new static values in ever new places) stops with [`PeError::Budget`].
//!
//! **Greens.** In a program with the meta-tracing hints, the merge point's green variables
//! say what the partial evaluator should keep static: the position in the interpreted
//! program (the first Futamura projection, as RPython's hints tell its JIT). Generalization
//! never forgets a green, and the specializations of a label are counted per values of
//! the greens, [`MAX_GREEN_VERSIONS`] for each: so an interpreter specialized to its program
//! leaves one block (or a few) per position of that program, with the dispatch folded away,
//! instead of generalizing the position itself after a few dozen and leaving the whole
//! interpreter in the residual program. The Brainfuck interpreter specialized to a program
//! is then that program translated: `tape[ptr] = ...` per command, the pointer a constant
//! where the loops keep it one (`flowjit bench FILE.b`, pe+compile). In such a program a
//! static jump is followed in place, within the block being made, and blocks are made only
//! at the merge point, at dynamic branches and at calls ([`MAX_IN_PLACE`] jumps in a row at
//! most): the interpreter's dispatch, a dozen static jumps per command, no longer makes a
//! dozen blocks that the clean-up then merges.
//!
//! Runtime errors of the residual program name the blocks of the original program (each
//! residual statement remembers the label it comes from), so a residual program fails with
//! the interpreter's message.
//!
//! **Arrays, input and output** stay in the residual program: an array is never a static
//! value (`array` and `toarray` are never computed ahead of time, since each run of them
//! makes a new array), so neither is anything read from one; `getchar` gives a dynamic
//! value; `print`, `putchar` and `setitem` are copied with their known arguments put in.
//!
//! **Calls** are specialized like blocks, per static arguments (polyvariant): `call f(x, 3)`
//! with `x` dynamic becomes `call f1(x)`, where the residual function `f1` is `f`'s entry
//! specialized with its second parameter 3, and its other parameter left a parameter. The
//! specializations of a function's entry are bounded and generalized as those of any label,
//! so recursion terminates. An `@elidable` call whose arguments are all static is run now,
//! by the interpreter within [`ELIDABLE_STEPS`] operations, and its result is static: the
//! call vanishes (unless it fails, runs out of budget or returns an array: then it stays).

pub mod cleanup;
pub mod run;

use std::collections::VecDeque;
use std::rc::Rc;

use flowjit_runtime::{ops, Op, Value};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::interp;
use crate::lang::ast::{self, Arg, Ast, Name, Span, Stmt, Term};
use crate::lang::{check, BlockId, FuncId, Inst, Operand, Program, Slot, Terminator};
use crate::state::Steps;

/// How many specializations a label gets before its partial environments are generalized.
pub const MAX_VERSIONS: usize = 32;

/// How many specializations a label gets for the same values of the merge point's green
/// variables, in a program with the meta-tracing hints, before the other variables that
/// differ are generalized: two (a loop entered with one set of static values comes back
/// with another), then the general one. The greens themselves are never
/// generalized (see [`specialize`]).
pub const MAX_GREEN_VERSIONS: usize = 2;

/// The most static jumps the partial evaluator follows in place in a row, in a program
/// with the meta-tracing hints (see the module documentation).
pub const MAX_IN_PLACE: usize = 1000;

/// The most blocks a residual program may have.
pub const MAX_BLOCKS: usize = 200_000;

/// The most operations the evaluation of one `@elidable` call with static arguments may
/// take; past that the call stays in the residual program.
pub const ELIDABLE_STEPS: u64 = 1_000_000;

/// What is known of the variables: per slot, the value if it is static.
pub type PEnv = Vec<Option<Value>>;

/// A partial environment as the code cache keeps it: the static variables and their
/// values, in the order of their slots. (Most variables are dynamic: a Brainfuck program's
/// tens of thousands of positions each keep the program, the position and perhaps the
/// pointer, of the interpreter's twenty variables.)
type Known = Rc<[(Slot, Value)]>;

/// The value of `slot` in `known`, if it is static there.
fn value_in(known: &[(Slot, Value)], slot: Slot) -> Option<&Value> {
    known
        .binary_search_by_key(&slot, |(s, _)| *s)
        .ok()
        .map(|i| &known[i].1)
}

/// What a residual statement does.
#[derive(Clone, Debug, PartialEq)]
pub enum RKind {
    /// `dst = op(args)`.
    Op(Op),
    /// `args[0][args[1]] = args[2]`.
    SetItem,
    /// `print(args[0])`.
    Print,
    /// `putchar(args[0])`.
    Putchar,
    /// `dst = getchar()`.
    Getchar,
    /// `dst = call` the residual function whose entry is the residual block of this index,
    /// with `args` (the dynamic arguments).
    Call(usize),
}

/// A residual statement.
#[derive(Clone, Debug, PartialEq)]
pub struct RStmt {
    /// The variable assigned, if the statement assigns one.
    pub dst: Option<Slot>,
    /// What it does.
    pub kind: RKind,
    /// Its arguments, known ones as constants.
    pub args: Vec<Operand>,
    /// The block of the original program it comes from.
    pub origin: BlockId,
}

/// How a residual block ends.
#[derive(Clone, Debug, PartialEq)]
pub enum RTerm {
    /// `goto` the residual block of that index.
    Goto(usize),
    /// `if cond goto then else goto els`.
    If {
        /// The (dynamic) condition.
        cond: Slot,
        /// Taken when `cond` is not 0.
        then: usize,
        /// Taken when `cond` is 0.
        els: usize,
    },
    /// `print_and_stop(arg)`.
    PrintAndStop(Operand),
    /// `return arg`.
    Return(Operand),
}

/// A residual block.
#[derive(Clone, Debug, PartialEq)]
pub struct RBlock {
    /// Its label.
    pub name: String,
    /// Its statements.
    pub stmts: Vec<RStmt>,
    /// Its terminator.
    pub term: RTerm,
    /// The block of the original program the terminator comes from.
    pub term_origin: BlockId,
    /// For the entry of a residual function: its parameters.
    pub func: Option<Vec<Slot>>,
}

/// A residual program: blocks (some removed by clean-up) and the index of the entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Residual {
    /// The blocks, in the order they were made; `None` for a block clean-up removed.
    pub blocks: Vec<Option<RBlock>>,
    /// The entry block's index.
    pub entry: usize,
}

/// Why partial evaluation stopped.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PeError {
    /// The residual program grew past [`MAX_BLOCKS`].
    #[error("partial evaluation stopped: the residual program grew past {0} blocks (static values keep changing in ever new places; make fewer variables static)")]
    Budget(usize),
}

struct Pe<'p> {
    program: &'p Program,
    /// Per slot: whether it is a green variable of the merge point, which generalization
    /// keeps (see [`specialize`]).
    green: Vec<bool>,
    /// Per label: whether it is a function's entry.
    entries: Vec<bool>,
    /// In a program with the meta-tracing hints, whether a label holds a merge point: a
    /// static jump to any other label (but a function's entry) is followed in place, its statements
    /// specialized into the block being made, rather than to a block of its own for the
    /// label and environment. Blocks are then made only where the interpreted program's
    /// position is (a merge point), where a branch is dynamic, and at calls: a Brainfuck
    /// command's dispatch is a dozen static jumps, each of which made a block (mandel.b's
    /// 11,451 commands made 156,084 blocks, which the clean-up merged into 4,657). At most
    /// [`MAX_IN_PLACE`] jumps in a row are followed, so that a static loop that never
    /// reaches the merge point still ends in blocks of its own, generalized as any.
    in_place: Option<Vec<bool>>,
    /// Per label: the residual block of each partial environment it was specialized for.
    cache: Vec<FxHashMap<Known, usize>>,
    /// The partial environments each label was specialized for, by the label and the
    /// values of the green variables in them.
    versions: FxHashMap<(BlockId, Option<Vec<Value>>), Vec<Known>>,
    counters: FxHashMap<String, u32>,
    names: FxHashSet<String>,
    blocks: Vec<Option<RBlock>>,
    queue: VecDeque<(usize, BlockId, Known)>,
}

impl Pe<'_> {
    /// The articles' `gensym`: `label1`, `label2`, ... skipping names already made.
    fn gensym(&mut self, base: &str) -> String {
        loop {
            let n = self.counters.entry(base.to_string()).or_default();
            *n += 1;
            let name = format!("{base}{n}");
            if self.names.insert(name.clone()) {
                return name;
            }
        }
    }

    fn new_block(&mut self, label: BlockId) -> Result<usize, PeError> {
        if self.blocks.len() >= MAX_BLOCKS {
            return Err(PeError::Budget(MAX_BLOCKS));
        }
        let name = self.gensym(self.program.label(label));
        self.blocks.push(Some(RBlock {
            name,
            stmts: Vec::new(),
            term: RTerm::Goto(usize::MAX),
            term_origin: label,
            func: None,
        }));
        Ok(self.blocks.len() - 1)
    }

    /// The values of the green variables in `known`, when all are known (the program
    /// interpreted is): a label's specializations are counted per these, and
    /// generalization keeps them. `None` otherwise (a program without hints too): with the
    /// interpreted program unknown, its position would take ever new values.
    fn greens_of(&self, known: &[(Slot, Value)]) -> Option<Vec<Value>> {
        let greens: Vec<Value> = known
            .iter()
            .filter(|(s, _)| self.green[s.index()])
            .map(|(_, v)| v.clone())
            .collect();
        let all = self.green.iter().filter(|g| **g).count();
        (!greens.is_empty() && greens.len() == all).then_some(greens)
    }

    /// The part of `known` a new specialization of `label` keeps: all of it, until the
    /// label has its share of specializations; then the values every one of them agrees
    /// on (and the greens).
    fn generalize(&self, label: BlockId, known: &[(Slot, Value)]) -> Vec<(Slot, Value)> {
        let greens = self.greens_of(known);
        let max = match greens {
            Some(_) => MAX_GREEN_VERSIONS,
            None => MAX_VERSIONS,
        };
        let keep_greens = greens.is_some();
        let Some(versions) = self
            .versions
            .get(&(label, greens))
            .filter(|v| v.len() >= max)
        else {
            return known.to_vec();
        };
        known
            .iter()
            .filter(|(s, v)| {
                (self.green[s.index()] && keep_greens)
                    || versions.iter().all(|old| value_in(old, *s) == Some(v))
            })
            .cloned()
            .collect()
    }

    /// The articles' `do_pe`: the residual block for `label` under `penv`, and the
    /// assignments that must precede a jump to it (the values generalization forgot).
    fn target(&mut self, label: BlockId, penv: &PEnv) -> Result<(usize, Vec<RStmt>), PeError> {
        // What `label` never reads before writing it is forgotten: specializations that
        // differ only there are one, and nothing is assigned for it. (Not at a function's
        // entry, whose specializations are told apart by which parameters are static.)
        let entry = self.entries[label.index()];
        let live = (!entry).then(|| self.program.live_at(label, 0));
        let known: Vec<(Slot, Value)> = penv
            .iter()
            .enumerate()
            .filter_map(|(s, v)| {
                let slot = Slot(s as u32);
                let kept = live
                    .as_ref()
                    .is_none_or(|live| self.green[s] || live.contains(slot));
                Some((slot, v.clone().filter(|_| kept)?))
            })
            .collect();
        if let Some(&b) = self.cache[label.index()].get(known.as_slice()) {
            return Ok((b, Vec::new()));
        }
        let general = self.generalize(label, &known);
        let assigns = known
            .iter()
            .filter(|(s, _)| value_in(&general, *s).is_none())
            .map(|(slot, now)| RStmt {
                dst: Some(*slot),
                kind: RKind::Op(Op::Same),
                args: vec![Operand::Const(now.clone())],
                origin: label,
            })
            .collect();
        let b = match self.cache[label.index()].get(general.as_slice()) {
            Some(&b) => b,
            None => {
                let b = self.new_block(label)?;
                let greens = self.greens_of(&general);
                let general: Known = general.into();
                self.cache[label.index()].insert(general.clone(), b);
                self.versions
                    .entry((label, greens))
                    .or_default()
                    .push(general.clone());
                self.queue.push_back((b, label, general));
                b
            }
        };
        Ok((b, assigns))
    }

    /// A jump from a block under `penv` to `label`: the target, through a block of its own
    /// when values must be assigned first (for the branches of an `if`).
    fn jump(&mut self, label: BlockId, penv: &PEnv) -> Result<usize, PeError> {
        let (b, assigns) = self.target(label, penv)?;
        if assigns.is_empty() {
            return Ok(b);
        }
        let t = self.new_block(label)?;
        let block = self.blocks[t].as_mut().expect("just made");
        block.stmts = assigns;
        block.term = RTerm::Goto(b);
        Ok(t)
    }

    /// The residual function that runs `entry` with the partial environment `penv` (in
    /// which only parameters are set), whose parameters are the `params` left dynamic.
    fn function(
        &mut self,
        entry: BlockId,
        penv: &PEnv,
        params: Vec<Slot>,
    ) -> Result<usize, PeError> {
        let b = self.jump(entry, penv)?;
        self.blocks[b].as_mut().expect("a live block").func = Some(params);
        Ok(b)
    }

    /// A call of `func` with `args` (known ones as constants) whose result goes to `dst`:
    /// its result, when it is an `@elidable` call computed now; otherwise the residual
    /// statement that calls its specialization.
    fn call(
        &mut self,
        dst: Slot,
        func: FuncId,
        args: Vec<Operand>,
        origin: BlockId,
    ) -> Result<Result<Value, RStmt>, PeError> {
        let f = self.program.func(func).clone();
        let known: Option<Vec<Value>> = args.iter().map(|a| a.as_const().cloned()).collect();
        if let (true, Some(values)) = (f.elidable, known) {
            let mut steps = Steps::new(Some(ELIDABLE_STEPS));
            if let Ok(Some(v)) = interp::call_function(self.program, func, values, 0, &mut steps) {
                if !v.holds_array() {
                    return Ok(Ok(v));
                }
            }
        }
        let mut penv: PEnv = vec![None; self.program.frame_size()];
        let mut params = Vec::new();
        let mut dynamic = Vec::new();
        for (p, a) in f.params.iter().zip(args) {
            match a {
                Operand::Const(v) => penv[p.index()] = Some(v),
                var => {
                    params.push(*p);
                    dynamic.push(var);
                }
            }
        }
        let b = self.function(f.entry, &penv, params)?;
        Ok(Err(RStmt {
            dst: Some(dst),
            kind: RKind::Call(b),
            args: dynamic,
            origin,
        }))
    }

    /// Whether a static jump to `to` is followed in place, in the residual block being
    /// made (see [`Pe::in_place`]), after `steps` jumps followed so far.
    fn follow(&self, to: BlockId, steps: usize) -> bool {
        self.in_place
            .as_ref()
            .is_some_and(|merges| !merges[to.index()])
            && !self.entries[to.index()]
            && steps < MAX_IN_PLACE
    }

    /// The articles' `pe` of one statement, `inst` of block `label`, under `env`: done now
    /// where what it reads is known (`env` then knows what it wrote), else residual, in
    /// `stmts`.
    fn stmt(
        &mut self,
        inst: &Inst,
        env: &mut PEnv,
        stmts: &mut Vec<RStmt>,
        label: BlockId,
    ) -> Result<(), PeError> {
        let mut args: Vec<Operand> = inst.operands().iter().map(|a| known(env, a)).collect();
        let (dst, kind) = match inst {
            Inst::Op1 { dst, op, .. } | Inst::Op2 { dst, op, .. } => {
                let values: Option<Vec<Value>> =
                    args.iter().map(|a| a.as_const().cloned()).collect();
                // An operation on known values is done now, unless it fails: then it
                // stays, to fail when (and if) the residual program runs it. An
                // operation that makes an array is never done now.
                if let (false, Some(values)) = (op.allocates(), values) {
                    if let Ok(v) = ops::apply(*op, values.as_slice()) {
                        env[dst.index()] = Some(v);
                        return Ok(());
                    }
                }
                (Some(*dst), RKind::Op(*op))
            }
            Inst::SetItem { array: a, .. } => {
                // A static value is never an array: this store fails when it runs.
                // The residual program must still name a variable to store into, so
                // the value is assigned to it first.
                if let Some(v) = env[a.index()].take() {
                    stmts.push(RStmt {
                        dst: Some(*a),
                        kind: RKind::Op(Op::Same),
                        args: vec![Operand::Const(v)],
                        origin: label,
                    });
                }
                args[0] = Operand::Var(*a);
                (None, RKind::SetItem)
            }
            Inst::Print(_) => (None, RKind::Print),
            Inst::Putchar(_) => (None, RKind::Putchar),
            Inst::Getchar(dst) => (Some(*dst), RKind::Getchar),
            Inst::Call { dst, func, .. } => {
                match self.call(*dst, *func, args, label)? {
                    Ok(v) => env[dst.index()] = Some(v),
                    Err(stmt) => {
                        env[dst.index()] = None;
                        stmts.push(stmt);
                    }
                }
                return Ok(());
            }
            Inst::Promote(_) | Inst::MergePoint(_) | Inst::CanEnterJit => return Ok(()),
        };
        if let Some(dst) = dst {
            env[dst.index()] = None;
        }
        stmts.push(RStmt {
            dst,
            kind,
            args,
            origin: label,
        });
        Ok(())
    }

    /// The articles' `pe` of one block: residual block `index`, for `label` under `env`,
    /// and (in a program with the hints) the labels its static jumps lead to.
    fn block(&mut self, index: usize, mut label: BlockId, mut env: PEnv) -> Result<(), PeError> {
        let mut stmts = Vec::new();
        let mut steps = 0;
        let term = loop {
            let block = self.program.block(label);
            for inst in &block.insts {
                self.stmt(inst, &mut env, &mut stmts, label)?;
            }
            let to = match &block.term {
                Terminator::Goto(j) | Terminator::Promote { target: j, .. } => j.target,
                Terminator::If { cond, then, els } => match &env[cond.index()] {
                    Some(v) => {
                        if v.is_false() {
                            els.target
                        } else {
                            then.target
                        }
                    }
                    None => {
                        break RTerm::If {
                            cond: *cond,
                            then: self.jump(then.target, &env)?,
                            els: self.jump(els.target, &env)?,
                        }
                    }
                },
                Terminator::PrintAndStop(arg) => break RTerm::PrintAndStop(known(&env, arg)),
                Terminator::Return(arg) => break RTerm::Return(known(&env, arg)),
            };
            if self.follow(to, steps) {
                label = to;
                steps += 1;
                continue;
            }
            let (b, assigns) = self.target(to, &env)?;
            stmts.extend(assigns);
            break RTerm::Goto(b);
        };
        let block = self.blocks[index]
            .as_mut()
            .expect("made before it is specialized");
        block.stmts = stmts;
        block.term = term;
        block.term_origin = label;
        Ok(())
    }
}

/// Specializes `program` from `entry` with the `statics` known: the raw residual program
/// (before clean-up).
pub fn specialize(
    program: &Program,
    entry: BlockId,
    statics: &[(Slot, Value)],
) -> Result<Residual, PeError> {
    let mut penv: PEnv = vec![None; program.frame_size()];
    for (slot, v) in statics {
        penv[slot.index()] = Some(v.clone());
    }
    let mut green = vec![false; program.frame_size()];
    for (_, greens) in program.merge_points().filter(|_| program.has_jit_hints()) {
        for g in greens {
            green[g.index()] = true;
        }
    }
    let mut pe = Pe {
        program,
        green,
        in_place: program.has_jit_hints().then(|| {
            let mut merges = vec![false; program.blocks.len()];
            for (label, _) in program.merge_points() {
                merges[label.index()] = true;
            }
            merges
        }),
        entries: {
            let mut entries = vec![false; program.blocks.len()];
            for f in &program.funcs {
                entries[f.entry.index()] = true;
            }
            entries
        },
        cache: vec![FxHashMap::default(); program.blocks.len()],
        versions: FxHashMap::default(),
        counters: FxHashMap::default(),
        names: FxHashSet::default(),
        blocks: Vec::new(),
        queue: VecDeque::new(),
    };
    let (first, assigns) = pe.target(entry, &penv)?;
    debug_assert!(
        assigns.is_empty(),
        "the first specialization is never generalized"
    );
    while let Some((index, label, known)) = pe.queue.pop_front() {
        let mut env: PEnv = vec![None; program.frame_size()];
        for (slot, v) in known.iter() {
            env[slot.index()] = Some(v.clone());
        }
        pe.block(index, label, env)?;
    }
    Ok(Residual {
        blocks: pe.blocks,
        entry: first,
    })
}

/// An operand with its value put in when `env` knows it.
fn known(env: &PEnv, o: &Operand) -> Operand {
    match o {
        Operand::Var(s) => env[s.index()]
            .clone()
            .map_or(Operand::Var(*s), Operand::Const),
        c => c.clone(),
    }
}

fn name(text: &str) -> Name {
    Name::new(text, Span::default())
}

fn arg(program: &Program, o: &Operand) -> Arg {
    match o {
        Operand::Var(s) => Arg::Var(name(program.var(*s))),
        Operand::Const(v) => Arg::Const(v.clone(), Span::default()),
    }
}

/// A residual statement as a statement of the syntax tree; `label` names residual blocks.
fn stmt(program: &Program, s: &RStmt, label: &dyn Fn(usize) -> Name) -> Stmt {
    let args: Vec<Arg> = s.args.iter().map(|a| arg(program, a)).collect();
    let dst = || name(program.var(s.dst.expect("the statement assigns")));
    let z = Span::default();
    let mut it = args.into_iter();
    let mut next = || it.next().expect("as many arguments as the statement takes");
    match &s.kind {
        RKind::Op(op) => Stmt::Op {
            dst: dst(),
            op: name(op.name()),
            args: std::iter::from_fn(|| Some(next()))
                .take(op.arity())
                .collect(),
            span: z,
        },
        RKind::SetItem => {
            let array = match next() {
                Arg::Var(n) => n,
                Arg::Const(..) => unreachable!("an array is never static"),
            };
            Stmt::SetItem {
                array,
                index: next(),
                value: next(),
                span: z,
            }
        }
        RKind::Print => Stmt::Print(next(), z),
        RKind::Putchar => Stmt::Putchar(next(), z),
        RKind::Getchar => Stmt::Getchar {
            dst: dst(),
            span: z,
        },
        RKind::Call(b) => Stmt::Call {
            dst: dst(),
            func: label(*b),
            args: s.args.iter().map(|a| arg(program, a)).collect(),
            span: z,
        },
    }
}

impl Residual {
    /// The residual program as a syntax tree (entry block first), for printing.
    pub fn to_ast(&self, program: &Program) -> Ast {
        let order =
            std::iter::once(self.entry).chain((0..self.blocks.len()).filter(|&i| i != self.entry));
        let label = |i: usize| name(&self.blocks[i].as_ref().expect("a live block").name);
        let blocks = order
            .filter_map(|i| self.blocks[i].as_ref().map(|b| (i, b)))
            .map(|(_, b)| ast::Block {
                label: name(&b.name),
                stmts: b.stmts.iter().map(|s| stmt(program, s, &label)).collect(),
                term: match &b.term {
                    RTerm::Goto(t) => Term::Goto(label(*t)),
                    RTerm::If { cond, then, els } => Term::If {
                        cond: name(program.var(*cond)),
                        then: label(*then),
                        els: label(*els),
                    },
                    RTerm::PrintAndStop(a) => Term::PrintAndStop(arg(program, a)),
                    RTerm::Return(a) => Term::Return(arg(program, a)),
                },
                term_span: Span::default(),
                func: b.func.as_ref().map(|params| ast::Func {
                    params: params.iter().map(|p| name(program.var(*p))).collect(),
                    elidable: false,
                    span: Span::default(),
                }),
            })
            .collect();
        Ast { blocks }
    }

    /// The residual program, checked and ready to run; its runtime errors name the
    /// original program's blocks.
    pub fn to_program(&self, program: &Program) -> Program {
        let ast = self.to_ast(program);
        let mut residual = check::check(&ast).expect("a residual program is well formed");
        let order =
            std::iter::once(self.entry).chain((0..self.blocks.len()).filter(|&i| i != self.entry));
        let live = order.filter_map(|i| self.blocks[i].as_ref());
        for (block, r) in residual.blocks.iter_mut().zip(live) {
            let mut origins: Vec<String> = r
                .stmts
                .iter()
                .map(|s| program.label(s.origin).to_string())
                .collect();
            origins.push(program.label(r.term_origin).to_string());
            block.origins = Some(origins);
        }
        residual
    }

    /// How many blocks the residual program has.
    pub fn len(&self) -> usize {
        self.blocks.iter().flatten().count()
    }

    /// Whether the residual program has no blocks (never: it has its entry).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
