//! The state of a running program, shared by every executor: the interpreter, the trace
//! recorder and interpreter, machine code and compiled residual programs.
//!
//! A program's [`State`] is the frame of the call running now, the frames of the calls
//! waiting for it to return (an explicit stack: a deep recursion of the program is never a
//! recursion of flowjit), and its input and output ([`Io`]). A position in the program and
//! the `--max-steps` budget ([`Steps`]) go with it. Every executor reads and writes them
//! through this module, never through another executor's types. Compiled code (traces,
//! machine code, residual programs) works on the current frame alone.

use std::io::{BufRead, Write};

use flowjit_runtime::Value;

use crate::lang::{BlockId, FuncId, Program, Slot};

/// How deep calls may nest: one call more is the runtime error `call depth limit reached`.
pub const MAX_CALL_DEPTH: usize = 100_000;

/// The results of `@elidable` calls the JIT's interpreter and recorder have made, so that
/// a call made again with the same arguments is not run again (SPEC §2.3: the JIT may reuse
/// a result). Only without `--max-steps`: a function may keep private state, such as a memo
/// table of its own, and take fewer operations the second time, so that no count kept with
/// a result is what the call would take now, and a limit must stop the program at the
/// interpreter's operation. Each result keeps the operations its call took all the same
/// (the recorder puts them in the trace). Arguments compare as `eq` compares them (a list
/// by its contents, found by its cached fingerprint; an array by identity); the table keeps
/// them alive, so an array's address is never another array's while its entry stands.
#[derive(Default)]
pub struct Memo {
    results: rustc_hash::FxHashMap<(FuncId, Vec<Value>), (Value, u64)>,
    /// The lists and arrays the keys keep alive, by address: what the table holds that the
    /// program may have let go.
    held: rustc_hash::FxHashSet<usize>,
    /// Their elements in all, each list or array counted once (and one more for itself).
    weight: usize,
}

impl Memo {
    /// The most results kept: past it, new results are not kept.
    pub const MAX: usize = 1 << 16;

    /// The most elements of lists and arrays the keys may keep alive (each list or array
    /// counted once): past it, a result whose arguments would keep more is not kept.
    pub const MAX_HELD: usize = 1 << 22;

    /// The result of `func` on `args` and the operations the call took, if known and if
    /// `left` operations let it finish.
    pub fn get(&self, func: FuncId, args: Vec<Value>, left: u64) -> Option<(Value, u64)> {
        let (v, took) = self.results.get(&(func, args))?;
        (*took <= left).then(|| (v.clone(), *took))
    }

    /// Keeps the result `v` of `func` on `args`, which took `took` operations, if the
    /// table has room.
    pub fn insert(&mut self, func: FuncId, args: Vec<Value>, v: Value, took: u64) {
        if self.results.len() >= Self::MAX {
            return;
        }
        let mut new: Vec<(usize, usize)> = Vec::new();
        for a in &args {
            let (at, len) = match a {
                Value::List(l) => (std::rc::Rc::as_ptr(l) as usize, l.len()),
                Value::Array(x) => (std::rc::Rc::as_ptr(x) as usize, x.len()),
                _ => continue,
            };
            if !self.held.contains(&at) && !new.iter().any(|&(b, _)| b == at) {
                new.push((at, len + 1));
            }
        }
        let weight = self.weight + new.iter().map(|&(_, n)| n).sum::<usize>();
        if weight > Self::MAX_HELD {
            return;
        }
        self.weight = weight;
        self.held.extend(new.iter().map(|&(at, _)| at));
        self.results.insert((func, args), (v, took));
    }
}

/// A call waiting for the call it made to return.
#[derive(Clone, Debug)]
pub struct Call {
    /// The caller's frame.
    pub frame: Frame,
    /// Where the caller goes on: the statement after the call.
    pub ret: Position,
    /// The caller's variable that receives the result.
    pub dst: Slot,
}

/// Output as it is formatted, into an [`Io`]'s buffer, flushed when the buffer fills.
struct Stream<'a>(&'a mut Io);

impl Write for Stream<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let io = &mut *self.0;
        if io.sink.is_some() {
            io.out.extend_from_slice(buf);
            io.written();
            return Ok(buf.len());
        }
        let room = io.limit.saturating_sub(io.out.len());
        if room == 0 && !buf.is_empty() {
            io.overflowed = true;
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        let n = buf.len().min(room);
        io.out.extend_from_slice(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Default for Io {
    /// No input; output kept.
    fn default() -> Io {
        Io::captured(b"")
    }
}

/// The elements that stores into arrays replaced while an elidable call made on the
/// interpreter's behalf runs (`interp::call_undoable`), first first: the array, the index and
/// the element it held. When the call is given up (it failed, ran out of the operations it was
/// allowed, or returned what the caller cannot use), [`UndoLog::undo`] puts them back, last
/// first, so that the interpreter, which then makes the call itself, finds the arrays as they
/// were. An elidable function may keep a memo table in an array (SPEC §2.3): a call cut short
/// after it filled an entry would otherwise leave the interpreter's call a shorter path, and
/// under `--max-steps` a different count of operations.
#[derive(Default)]
pub struct UndoLog(Vec<(std::rc::Rc<flowjit_runtime::Array>, usize, Value)>);

impl UndoLog {
    /// Notes the element that a store of `array[index]` is about to replace, when there is
    /// one (a store that fails replaces nothing).
    #[inline(never)]
    pub fn note(&mut self, array: &Value, index: &Value) {
        let (Value::Array(a), Value::Int(i)) = (array, index) else {
            return;
        };
        let Some((i, old)) = usize::try_from(*i).ok().and_then(|i| Some((i, a.get(i)?))) else {
            return;
        };
        self.0.push((a.clone(), i, old));
    }

    /// Puts back every element noted, last first.
    pub fn undo(self) {
        for (a, i, old) in self.0.into_iter().rev() {
            a.set(i, old);
        }
    }
}

/// A running program's state: frames and input and output.
pub struct State {
    /// The variables of the call running now (of the program, outside any call).
    pub frame: Frame,
    /// The calls waiting, the innermost last.
    pub calls: Vec<Call>,
    /// Input and output.
    pub io: Io,
    /// Whether a `return` with no call waiting ends the run (`interp::Exit::Return`)
    /// instead of being the error `return outside a function`: for a function run by
    /// itself (`interp::call_function`).
    pub returns_out: bool,
    /// How many calls wait outside this state: for a function run by itself, those of the
    /// run that made the call (they count towards [`MAX_CALL_DEPTH`]).
    pub depth: usize,
    /// Frames of calls that have returned, kept for the next calls.
    spare: Vec<Frame>,
    /// The results of `@elidable` calls, under the JIT ([`Memo`]); none under the plain
    /// interpreter, which makes every call. Read through [`State::memo`].
    pub memo: Option<Box<Memo>>,
}

impl State {
    /// The memo of elidable calls, where the run keeps one and counts no steps
    /// (`steps.limit` is `None`; see [`Memo`]).
    pub fn memo(&mut self, steps: &Steps) -> Option<&mut Memo> {
        self.memo.as_deref_mut().filter(|_| steps.limit.is_none())
    }

    /// The state at the start of a run of `program` with the given inputs set.
    pub fn new(program: &Program, inputs: &[(Slot, Value)], io: Io) -> State {
        State {
            frame: frame_with(program, inputs),
            calls: Vec::new(),
            io,
            returns_out: false,
            depth: 0,
            spare: Vec::new(),
            memo: None,
        }
    }

    /// The state of a run on `frame` with no input and captured output: the state of
    /// programs that neither call nor do input or output, as tests and benchmarks make them.
    pub fn with_frame(frame: Frame) -> State {
        State {
            frame,
            calls: Vec::new(),
            io: Io::captured(b""),
            returns_out: false,
            depth: 0,
            spare: Vec::new(),
            memo: None,
        }
    }

    /// Enters a call: the current frame waits (to go on at `ret`, its `dst` receiving the
    /// result) and a frame of `size` slots holding only `params` bound to `args` runs.
    /// `None` when calls are already nested [`MAX_CALL_DEPTH`] deep.
    pub fn enter(
        &mut self,
        size: usize,
        params: &[Slot],
        args: Vec<Value>,
        ret: Position,
        dst: Slot,
    ) -> Option<()> {
        if self.depth + self.calls.len() >= MAX_CALL_DEPTH {
            return None;
        }
        let mut frame = self.fresh_frame(size);
        for (p, v) in params.iter().zip(args) {
            frame[p.index()] = Some(v);
        }
        self.push_call(frame, ret, dst);
        Some(())
    }

    /// A frame of `size` empty slots, one kept from a call that returned if there is one.
    /// A frame of `size` empty variables, one kept from a call that returned if there is
    /// one.
    pub fn fresh_frame(&mut self, size: usize) -> Frame {
        let mut frame = self.spare.pop().unwrap_or_default();
        frame.clear();
        frame.resize(size, None);
        frame
    }

    /// Keeps `frame`, done with, for a later call, its values dropped now.
    pub fn recycle(&mut self, mut frame: Frame) {
        frame.clear();
        self.spare.push(frame);
    }

    /// The current frame waits (to go on at `ret`, its `dst` receiving the result), and
    /// `frame` runs.
    fn push_call(&mut self, frame: Frame, ret: Position, dst: Slot) {
        let caller = std::mem::replace(&mut self.frame, frame);
        self.calls.push(Call {
            frame: caller,
            ret,
            dst,
        });
    }

    /// Enters a call of `func` on `args`, operands read in the current frame: as
    /// [`State::enter`], each argument's value copied straight into the new frame. The
    /// error of an argument never written (`key_not_found`), or `call depth limit
    /// reached`, in that order, as the interpreter checks them.
    pub fn enter_call(
        &mut self,
        program: &Program,
        func: FuncId,
        args: &[crate::lang::Operand],
        ret: Position,
        dst: Slot,
    ) -> Result<(), crate::interp::ErrorKind> {
        let f = program.func(func);
        let mut frame = self.fresh_frame(program.frame_size());
        for (p, a) in f.params.iter().zip(args) {
            match crate::interp::operand(program, &self.frame, a) {
                Ok(v) => frame[p.index()] = Some(v.clone()),
                Err(e) => {
                    frame.clear();
                    self.spare.push(frame);
                    return Err(e);
                }
            }
        }
        if self.depth + self.calls.len() >= MAX_CALL_DEPTH {
            frame.clear();
            self.spare.push(frame);
            return Err(crate::interp::ErrorKind::CallDepth);
        }
        self.push_call(frame, ret, dst);
        Ok(())
    }

    /// Leaves the current call with `result`: the caller's frame runs again, its variable
    /// holding the result. Returns where the caller goes on; `None` outside any call.
    pub fn leave(&mut self, result: Value) -> Option<Position> {
        let call = self.calls.pop()?;
        let done = std::mem::replace(&mut self.frame, call.frame);
        self.frame[call.dst.index()] = Some(result);
        self.recycle(done);
        Some(call.ret)
    }
}

/// The size of the output buffer: output goes to its sink when this much is waiting.
const OUTPUT_BUFFER: usize = 1 << 16;

/// A program's input and output: `getchar` reads the input; `print`, `putchar` and, at the
/// end, the executor's caller write the output.
///
/// Output is buffered; it goes to the sink when the buffer fills, before input is read (so
/// that a prompt shows before the program waits for an answer), and when the caller
/// [`flush`](Io::flush)es, which it does before it prints the final line or an error: so
/// nothing written is ever lost, and it comes out in program order. Without a sink, output
/// is kept (for tests and the differential tester), and [`Io::output`] gives it.
pub struct Io {
    out: Vec<u8>,
    sink: Option<Box<dyn Write>>,
    input: Box<dyn BufRead>,
    /// Without a sink: the most output kept; what comes after is dropped.
    limit: usize,
    /// Whether output was dropped at the limit.
    overflowed: bool,
}

impl Io {
    /// Input read from `input`; output written to `sink`, or kept when there is none.
    pub fn new(input: Box<dyn BufRead>, sink: Option<Box<dyn Write>>) -> Io {
        Io {
            out: Vec::new(),
            sink,
            input,
            limit: usize::MAX,
            overflowed: false,
        }
    }

    /// The same, keeping at most `limit` bytes of output (without a sink): a program that
    /// prints more (one `print` of a large structure can print gigabytes) stops being
    /// printed there, and [`Io::overflowed`] says so. The differential tester discards such
    /// runs, as it discards runs that take too long.
    pub fn with_limit(mut self, limit: usize) -> Io {
        self.limit = limit;
        self
    }

    /// Whether output was dropped at the limit.
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// flowjit's own standard input and output.
    pub fn stdio() -> Io {
        Io::new(
            Box::new(std::io::stdin().lock()),
            Some(Box::new(std::io::stdout())),
        )
    }

    /// Input from `input`; output kept.
    pub fn captured(input: &[u8]) -> Io {
        Io::new(Box::new(std::io::Cursor::new(input.to_vec())), None)
    }

    /// Writes `v` as `print` does, with its newline. The text streams out as it is
    /// formatted: a value that prints as gigabytes never sits in memory whole.
    pub fn print(&mut self, v: &Value) {
        // An error is the limit reached: the rest is dropped.
        let _ = writeln!(Stream(self), "{v}");
    }

    /// Writes one byte.
    #[inline]
    pub fn putchar(&mut self, byte: u8) {
        if self.sink.is_none() && self.out.len() >= self.limit {
            self.overflowed = true;
            return;
        }
        self.out.push(byte);
        self.written();
    }

    /// The next byte of input, or -1 at its end (or when it cannot be read).
    pub fn getchar(&mut self) -> i64 {
        if !self.out.is_empty() && self.sink.is_some() {
            self.flush();
        }
        match self.input.fill_buf() {
            Ok([first, ..]) => {
                let b = *first;
                self.input.consume(1);
                b as i64
            }
            _ => -1,
        }
    }

    #[inline]
    fn written(&mut self) {
        if self.out.len() >= OUTPUT_BUFFER && self.sink.is_some() {
            self.flush();
        }
    }

    /// Writes what is waiting to the sink, if there is one. A sink that cannot be written
    /// (a closed pipe) is not the program's failure: what it refuses is dropped.
    pub fn flush(&mut self) {
        if let Some(sink) = &mut self.sink {
            let _ = sink.write_all(&self.out);
            let _ = sink.flush();
            self.out.clear();
        }
    }

    /// The output kept so far (all of it, without a sink).
    pub fn output(&self) -> &[u8] {
        &self.out
    }
}

/// The variables of a running program, indexed by slot; `None` for never written.
pub type Frame = Vec<Option<Value>>;

/// A position in a program: a block and the index of a statement in it (the block's length
/// means its terminator).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Position {
    /// The block.
    pub block: BlockId,
    /// The statement's index.
    pub inst: usize,
}

impl Position {
    /// The start of `block`.
    pub fn start(block: BlockId) -> Position {
        Position { block, inst: 0 }
    }
}

/// The `--max-steps` budget: how many more operations may be interpreted.
#[derive(Clone, Copy, Debug)]
pub struct Steps {
    /// The limit given, if any.
    pub limit: Option<u64>,
    /// Operations left.
    pub left: u64,
}

impl Steps {
    /// A budget of `limit` operations, or none.
    pub fn new(limit: Option<u64>) -> Steps {
        Steps {
            limit,
            left: limit.unwrap_or(u64::MAX),
        }
    }

    /// How many operations have been used.
    pub fn used(&self) -> u64 {
        self.limit.unwrap_or(u64::MAX) - self.left
    }
}

/// A fresh frame for `program` with the given inputs set.
pub fn frame_with(program: &Program, inputs: &[(Slot, Value)]) -> Frame {
    let mut frame = vec![None; program.frame_size()];
    for (slot, v) in inputs {
        frame[slot.index()] = Some(v.clone());
    }
    frame
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memo_finds_a_result_by_the_arguments_values() {
        let mut memo = Memo::default();
        let f = FuncId(0);
        let list = || Value::list(vec![Value::Int(1), Value::Int(2)]);
        memo.insert(f, vec![list(), Value::Int(7)], Value::Int(42), 30);
        // Another list with the same elements is the same argument, as `eq` sees it.
        assert_eq!(
            memo.get(f, vec![list(), Value::Int(7)], 100),
            Some((Value::Int(42), 30))
        );
        assert_eq!(memo.get(f, vec![list(), Value::Int(8)], 100), None);
        assert_eq!(memo.get(FuncId(1), vec![list(), Value::Int(7)], 100), None);
        // A budget too small for the call it stands for: not found.
        assert_eq!(memo.get(f, vec![list(), Value::Int(7)], 29), None);
    }

    #[test]
    fn memo_compares_arrays_by_identity() {
        let mut memo = Memo::default();
        let f = FuncId(0);
        let a = Value::array(vec![Value::Int(0); 3]);
        memo.insert(f, vec![a.clone()], Value::Int(1), 5);
        assert_eq!(memo.get(f, vec![a], 100), Some((Value::Int(1), 5)));
        let b = Value::array(vec![Value::Int(0); 3]);
        assert_eq!(memo.get(f, vec![b], 100), None);
    }

    #[test]
    fn memo_keeps_no_more_elements_alive_than_its_limit() {
        let mut memo = Memo::default();
        let f = FuncId(0);
        let big = Value::array(vec![Value::Int(0); Memo::MAX_HELD / 2]);
        memo.insert(f, vec![big.clone()], Value::Int(1), 1);
        // The same array again costs nothing more.
        memo.insert(f, vec![big.clone(), Value::Int(2)], Value::Int(2), 1);
        assert!(memo.get(f, vec![big.clone(), Value::Int(2)], 10).is_some());
        // Another as large does not fit.
        let other = Value::array(vec![Value::Int(0); Memo::MAX_HELD / 2]);
        memo.insert(f, vec![other.clone()], Value::Int(3), 1);
        assert_eq!(memo.get(f, vec![other], 10), None);
        assert!(memo.get(f, vec![big], 10).is_some());
    }
}
