//! flowjit as a library, end to end: a front-end for a small language compiles its source
//! text to a list of opcodes, and `examples/tiny.fg`, a stack machine written in the
//! flowgraph language, runs that list under the JIT, which traces the machine's loop over
//! the guest program's loop (meta-tracing).
//!
//! ```text
//! cargo run --release --example embed                 # the bundled program
//! cargo run --release --example embed -- FILE.tiny    # a program of yours
//! ```
//!
//! The language: statements `NAME = EXPR`, `while EXPR { ... }` (while the value is not 0),
//! `print EXPR` and a last `return EXPR`; expressions of integers, variables, `+`, `-`,
//! `*`, `<` (1 or 0) and parentheses; `#` starts a comment.

use std::collections::HashMap;
use std::process::ExitCode;

use flowjit::embed::{Mode, Program, Syntax, Value};

/// The bundled program: the sum of the squares below a million, and a countdown printed.
const SOURCE: &str = "\
# squares below a million, summed
n = 1000000
i = 0
s = 0
while i < n {
    s = s + i * i
    i = i + 1
}
k = 3
while 0 < k {
    print k
    k = k - 1
}
return s
";

/// The virtual machine, written in the flowgraph language.
const MACHINE: &str = include_str!("tiny.fg");

fn main() -> ExitCode {
    let source = match std::env::args().nth(1) {
        Some(path) => match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) => {
                eprintln!("error: cannot read {path}: {e}");
                return ExitCode::from(2);
            }
        },
        None => SOURCE.to_string(),
    };
    let (code, locals) = match compile(&source) {
        Ok(compiled) => compiled,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let machine = match Program::parse("examples/tiny.fg", MACHINE, Syntax::Fg) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(e.exit_status());
        }
    };
    let run = machine
        .run()
        .input("code", Value::list(code))
        .input("size", Value::Int(locals as i64))
        .mode(Mode::Jit)
        .stdout(std::io::stdout())
        .go();
    match run.result {
        Ok(value) => {
            println!("result: {value}");
            if let Some(stats) = run.stats {
                println!(
                    "machine code entered {} times; {} guard exits",
                    stats.native_entries,
                    stats.exits.values().sum::<u64>()
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(e.exit_status())
        }
    }
}

/// A token of the language.
#[derive(Clone, Debug, PartialEq)]
enum Token {
    Int(i64),
    Name(String),
    Punct(char),
}

/// The tokens of `source`, each with its line.
fn tokens(source: &str) -> Result<Vec<(Token, usize)>, String> {
    let mut out = Vec::new();
    for (n, line) in source.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("");
        let mut chars = line.chars().peekable();
        while let Some(&c) = chars.peek() {
            if c.is_whitespace() {
                chars.next();
            } else if c.is_ascii_digit() {
                let mut text = String::new();
                while let Some(&d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    text.push(d);
                    chars.next();
                }
                let k = text
                    .parse()
                    .map_err(|_| format!("line {}: {text} is too large", n + 1))?;
                out.push((Token::Int(k), n + 1));
            } else if c.is_ascii_alphabetic() || c == '_' {
                let mut text = String::new();
                while let Some(&d) = chars
                    .peek()
                    .filter(|d| d.is_ascii_alphanumeric() || **d == '_')
                {
                    text.push(d);
                    chars.next();
                }
                out.push((Token::Name(text), n + 1));
            } else if "=+-*<(){}".contains(c) {
                out.push((Token::Punct(c), n + 1));
                chars.next();
            } else {
                return Err(format!("line {}: unexpected `{c}`", n + 1));
            }
        }
    }
    Ok(out)
}

/// The compiler: a recursive descent over the tokens, emitting the machine's code.
struct Compiler {
    tokens: Vec<(Token, usize)>,
    at: usize,
    code: Vec<Value>,
    locals: HashMap<String, i64>,
}

/// The machine's code for `source`, and how many locals it uses.
fn compile(source: &str) -> Result<(Vec<Value>, usize), String> {
    let mut c = Compiler {
        tokens: tokens(source)?,
        at: 0,
        code: Vec::new(),
        locals: HashMap::new(),
    };
    let mut returned = false;
    while c.at < c.tokens.len() {
        if c.eat_name("return") {
            c.expr()?;
            c.op("halt");
            returned = true;
            if c.at < c.tokens.len() {
                return Err(c.error("nothing may follow `return`"));
            }
        } else {
            c.statement()?;
        }
    }
    if !returned {
        c.push(0);
        c.op("halt");
    }
    Ok((c.code, c.locals.len()))
}

impl Compiler {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at).map(|(t, _)| t)
    }

    fn error(&self, what: &str) -> String {
        let line = self
            .tokens
            .get(self.at)
            .or(self.tokens.last())
            .map_or(1, |(_, l)| *l);
        format!("line {line}: {what}")
    }

    fn eat(&mut self, c: char) -> bool {
        let found = self.peek() == Some(&Token::Punct(c));
        self.at += usize::from(found);
        found
    }

    fn eat_name(&mut self, name: &str) -> bool {
        let found = matches!(self.peek(), Some(Token::Name(n)) if n == name);
        self.at += usize::from(found);
        found
    }

    fn expect(&mut self, c: char) -> Result<(), String> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.error(&format!("expected `{c}`")))
        }
    }

    fn op(&mut self, name: &str) {
        self.code.push(Value::atom(name));
    }

    fn push(&mut self, k: i64) {
        self.op("push");
        self.code.push(Value::Int(k));
    }

    /// The local a variable lives in, made at its first assignment.
    fn local(&mut self, name: &str) -> i64 {
        let next = self.locals.len() as i64;
        *self.locals.entry(name.to_string()).or_insert(next)
    }

    fn statement(&mut self) -> Result<(), String> {
        if self.eat_name("while") {
            let top = self.code.len() as i64;
            self.expr()?;
            self.op("jump_if_false");
            let exit = self.code.len();
            self.code.push(Value::Int(0));
            self.expect('{')?;
            while !self.eat('}') {
                if self.peek().is_none() {
                    return Err(self.error("expected `}`"));
                }
                self.statement()?;
            }
            self.op("jump");
            self.code.push(Value::Int(top));
            self.code[exit] = Value::Int(self.code.len() as i64);
            return Ok(());
        }
        if self.eat_name("print") {
            self.expr()?;
            self.op("print");
            return Ok(());
        }
        let Some(Token::Name(name)) = self.peek().cloned() else {
            return Err(self.error("expected a statement"));
        };
        self.at += 1;
        self.expect('=')?;
        self.expr()?;
        let k = self.local(&name);
        self.op("store");
        self.code.push(Value::Int(k));
        Ok(())
    }

    /// `sum < sum`, or a sum.
    fn expr(&mut self) -> Result<(), String> {
        self.sum()?;
        if self.eat('<') {
            self.sum()?;
            self.op("lt");
        }
        Ok(())
    }

    fn sum(&mut self) -> Result<(), String> {
        self.product()?;
        loop {
            let op = if self.eat('+') {
                "add"
            } else if self.eat('-') {
                "sub"
            } else {
                return Ok(());
            };
            self.product()?;
            self.op(op);
        }
    }

    fn product(&mut self) -> Result<(), String> {
        self.atom()?;
        while self.eat('*') {
            self.atom()?;
            self.op("mul");
        }
        Ok(())
    }

    fn atom(&mut self) -> Result<(), String> {
        match self.peek().cloned() {
            Some(Token::Int(k)) => {
                self.at += 1;
                self.push(k);
            }
            Some(Token::Name(name)) => {
                let Some(&k) = self.locals.get(&name) else {
                    return Err(self.error(&format!("`{name}` is read before it is assigned")));
                };
                self.at += 1;
                self.op("load");
                self.code.push(Value::Int(k));
            }
            Some(Token::Punct('(')) => {
                self.at += 1;
                self.expr()?;
                self.expect(')')?;
            }
            _ => return Err(self.error("expected an expression")),
        }
        Ok(())
    }
}
