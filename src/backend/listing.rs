//! Listings of machine code (`--dump asm`): the instructions, disassembled by capstone, and
//! the data Cranelift places among them, shown as data.
//!
//! A compiled function is not only instructions. A `Switch` with two or more cases (a
//! `guard_value` with specialized bridges) can become a jump table: an indirect branch
//! (x86_64 `jmpq *%reg`, aarch64 `br xN`) followed by a table of 32-bit offsets from the
//! table's start. x86_64 code also loads some constants from a pool after the function's last
//! instruction. Decoded as instructions, such bytes are garbage, and on x86_64 capstone stops
//! at the first bytes it cannot decode, which cut the listing short.
//!
//! What tells code from data: Cranelift reports where each block starts
//! (`machine_code_cfg_info`), and data is only ever reached through a pc-relative address
//! in an instruction before it (`lea`/`adr` for a table, `disp(%rip)` or a literal `ldr`
//! for a constant). One pass in address order decodes instructions, notes the addresses they
//! refer to (data, or code for direct branches), and lists the bytes from a data address up
//! to the next address known to be code as data. Zero bytes just before data are alignment
//! padding.
//!
//! ```text
//!   0x7f9a9836a0a7: jmpq     *%rcx
//!   ; jump table
//!   0x7f9a9836a0a9: .long    0x000000b7        ; -> 0x7f9a9836a160
//!   0x7f9a9836a0ad: .long    0x0000000c        ; -> 0x7f9a9836a0b5
//!   0x7f9a9836a0b1: .long    0x00000400        ; -> 0x7f9a9836a4a9
//!   0x7f9a9836a0b5: movq     %rsi, %rcx
//!   ...
//!   0x7f9a9836a5c9: retq
//!   0x7f9a9836a5ca: .zero    6
//!   ; constants
//!   0x7f9a9836a5d0: .quad    0x6666666666666667
//! ```

use std::collections::BTreeSet;
use std::fmt::Write as _;

use cranelift_codegen::isa::TargetIsa;

use super::{Target, Unsupported};

/// What a line of a listing shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An instruction (or a byte capstone cannot decode, as `.byte`).
    Insn,
    /// An entry of a jump table.
    JumpTable,
    /// Constant data.
    Constant,
    /// Zero bytes that align the data after them.
    Padding,
}

/// One line of a listing: `len` bytes at `offset` from the function's start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    /// Where the bytes start, from the function's start.
    pub offset: usize,
    /// How many bytes the line covers.
    pub len: usize,
    /// What they are.
    pub kind: Kind,
    /// The mnemonic or directive.
    pub mnemonic: String,
    /// The operands, and a comment for data.
    pub operands: String,
}

/// What an instruction's operands point at.
enum Reference {
    /// Data: a constant it loads, or the jump table whose address it takes.
    Data(u64),
    /// Code: the target of a direct branch.
    Code(u64),
}

/// The lines of `code`, compiled for `target` by `isa`, loaded at `base`, whose blocks
/// start at `block_starts` (offsets from the start).
pub fn lines(
    isa: &dyn TargetIsa,
    target: Target,
    code: &[u8],
    base: u64,
    block_starts: &[u32],
) -> Result<Vec<Line>, Unsupported> {
    let mut cs = isa
        .to_capstone()
        .map_err(|e| Unsupported::Disassembler(e.to_string()))?;
    // Bytes capstone cannot decode become `.byte` lines instead of ending the listing.
    cs.set_skipdata(true)
        .map_err(|e| Unsupported::Disassembler(e.to_string()))?;
    let len = code.len();
    let offset_of = |addr: u64| {
        addr.checked_sub(base)
            .and_then(|o| usize::try_from(o).ok())
            .filter(|&o| o < len)
    };
    let mut code_starts: BTreeSet<usize> = block_starts.iter().map(|&s| s as usize).collect();
    let mut data_starts: BTreeSet<usize> = BTreeSet::new();
    // The data being listed: `Some(table start)` in a jump table, `None` in constants.
    let mut data: Option<Option<usize>> = None;
    let mut indirect_branch_end = None;
    let mut out = Vec::new();
    let mut at = 0;
    while at < len {
        if code_starts.contains(&at) {
            data = None;
        } else if data_starts.contains(&at) {
            data = Some((indirect_branch_end == Some(at)).then_some(at));
        }
        let next_code = code_starts.range(at + 1..).next().copied().unwrap_or(len);
        let next_data = data_starts.range(at + 1..).next().copied().unwrap_or(len);
        let end = next_code.min(next_data);
        let padding = next_data - at;
        // A zero constant is data; zeros after code or a table are padding.
        let in_constants = data == Some(None);
        if !in_constants
            && next_data <= next_code
            && padding < 16
            && code[at..next_data].iter().all(|&b| b == 0)
        {
            out.push(data_line(
                at,
                padding,
                Kind::Padding,
                ".zero",
                padding.to_string(),
            ));
            at = next_data;
            continue;
        }
        let line = match data {
            Some(Some(table)) if end - at >= 4 => {
                let entry = i32::from_le_bytes(word(&code[at..]));
                let dest = (base + table as u64).wrapping_add_signed(entry.into());
                let comment = format!("{entry:#010x}{:8}; -> {dest:#014x}", "");
                data_line(at, 4, Kind::JumpTable, ".long", comment)
            }
            Some(None) if end - at >= 8 && at % 8 == 0 => {
                let bytes: [u8; 8] = code[at..at + 8].try_into().expect("eight bytes");
                let value = u64::from_le_bytes(bytes);
                data_line(at, 8, Kind::Constant, ".quad", format!("{value:#018x}"))
            }
            Some(None) if end - at >= 4 && at % 4 == 0 => {
                let value = u32::from_le_bytes(word(&code[at..]));
                data_line(at, 4, Kind::Constant, ".long", format!("{value:#010x}"))
            }
            Some(kind) => {
                let kind = if kind.is_some() {
                    Kind::JumpTable
                } else {
                    Kind::Constant
                };
                data_line(at, 1, kind, ".byte", format!("{:#04x}", code[at]))
            }
            None => {
                let insns = cs
                    .disasm_count(&code[at..end], base + at as u64, 1)
                    .map_err(|e| Unsupported::Disassembler(e.to_string()))?;
                match insns.iter().next() {
                    Some(i) => Line {
                        offset: at,
                        len: i.len(),
                        kind: Kind::Insn,
                        mnemonic: i.mnemonic().unwrap_or("").to_string(),
                        operands: i.op_str().unwrap_or("").to_string(),
                    },
                    None => data_line(at, 1, Kind::Insn, ".byte", format!("{:#04x}", code[at])),
                }
            }
        };
        if line.kind == Kind::Insn {
            let next = base + (at + line.len) as u64;
            match reference(target, &line.mnemonic, &line.operands, next) {
                Some(Reference::Data(a)) => {
                    if let Some(o) = offset_of(a).filter(|&o| o > at && !code_starts.contains(&o)) {
                        data_starts.insert(o);
                    }
                }
                Some(Reference::Code(a)) => {
                    if let Some(o) = offset_of(a).filter(|&o| o > at) {
                        code_starts.insert(o);
                    }
                }
                None => {}
            }
            if is_indirect_branch(target, &line.mnemonic, &line.operands) {
                indirect_branch_end = Some(at + line.len);
            }
        }
        at += line.len.max(1);
        out.push(line);
    }
    Ok(out)
}

/// The listing of [`lines`], one line each, a comment line where data begins.
pub fn render(lines: &[Line], base: u64) -> String {
    let mut out = String::new();
    let mut previous = Kind::Insn;
    for l in lines {
        if l.kind != previous && l.kind != Kind::Padding {
            match l.kind {
                Kind::JumpTable => out.push_str("  ; jump table\n"),
                Kind::Constant => out.push_str("  ; constants\n"),
                Kind::Insn | Kind::Padding => {}
            }
            previous = l.kind;
        }
        let _ = writeln!(
            out,
            "  {:#014x}: {:<8} {}",
            base + l.offset as u64,
            l.mnemonic,
            l.operands
        );
    }
    out
}

fn data_line(offset: usize, len: usize, kind: Kind, directive: &str, operands: String) -> Line {
    Line {
        offset,
        len,
        kind,
        mnemonic: directive.to_string(),
        operands,
    }
}

fn word(bytes: &[u8]) -> [u8; 4] {
    bytes[..4].try_into().expect("four bytes")
}

/// Whether the instruction branches to an address held in a register: Cranelift emits one
/// only in front of a jump table.
fn is_indirect_branch(target: Target, mnemonic: &str, operands: &str) -> bool {
    match target {
        Target::X86_64 => mnemonic.starts_with("jmp") && operands.starts_with('*'),
        Target::Aarch64 => mnemonic == "br",
    }
}

/// What the instruction's operands point at, as capstone prints them; `next` is the address
/// of the instruction after it (what x86_64's `%rip` holds).
fn reference(target: Target, mnemonic: &str, operands: &str, next: u64) -> Option<Reference> {
    match target {
        Target::X86_64 => {
            if let Some(before) = operands.find("(%rip)").map(|i| &operands[..i]) {
                let start = before
                    .rfind(|c: char| !(c.is_ascii_hexdigit() || c == 'x' || c == '-'))
                    .map_or(0, |i| i + 1);
                let disp = match &before[start..] {
                    "" => 0,
                    text => parse_int(text)?,
                };
                return Some(Reference::Data(next.wrapping_add_signed(disp)));
            }
            let direct = mnemonic.starts_with('j') || mnemonic.starts_with("call");
            (direct && !operands.starts_with('*'))
                .then(|| parse_int(operands))
                .flatten()
                .map(|a| Reference::Code(a as u64))
        }
        Target::Aarch64 => {
            let last = operands.rsplit(", ").next()?.strip_prefix('#')?;
            let branch = matches!(mnemonic, "b" | "bl" | "cbz" | "cbnz" | "tbz" | "tbnz")
                || mnemonic.starts_with("b.");
            let literal =
                mnemonic == "adr" || (mnemonic.starts_with("ldr") && !operands.contains('['));
            let addr = parse_int(last)? as u64;
            if branch {
                Some(Reference::Code(addr))
            } else if literal {
                Some(Reference::Data(addr))
            } else {
                None
            }
        }
    }
}

/// `0x1f`, `-0x20` or `12`, as capstone prints numbers.
fn parse_int(text: &str) -> Option<i64> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let value = match digits.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok()?,
        None => digits.parse::<u64>().ok()?,
    } as i64;
    Some(if negative {
        value.wrapping_neg()
    } else {
        value
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cranelift_codegen::control::ControlPlane;
    use cranelift_codegen::ir::{
        types::I64, AbiParam, Function, InstBuilder, Signature, UserFuncName,
    };
    use cranelift_codegen::Context;
    use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Switch};

    /// A function that switches on its argument over `cases` values, each case returning a
    /// different constant; a 64-bit constant makes x86_64 use its pool.
    fn switch_function(isa: &dyn TargetIsa, cases: u128) -> Function {
        let mut sig = Signature::new(isa.default_call_conv());
        sig.params.push(AbiParam::new(I64));
        sig.returns.push(AbiParam::new(I64));
        let mut func = Function::with_name_signature(UserFuncName::user(0, 0), sig);
        let mut fctx = FunctionBuilderContext::new();
        let mut b = FunctionBuilder::new(&mut func, &mut fctx);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let x = b.block_params(entry)[0];
        let mut switch = Switch::new();
        let mut blocks = Vec::new();
        for k in 0..cases {
            let block = b.create_block();
            switch.set_entry(k, block);
            blocks.push((k, block));
        }
        let default = b.create_block();
        switch.emit(&mut b, x, default);
        for (k, block) in blocks {
            b.switch_to_block(block);
            let big = b.ins().iconst(I64, 0x1234_5678_9abc_def0_i64 + k as i64);
            let r = b.ins().imul(x, big);
            b.ins().return_(&[r]);
        }
        b.switch_to_block(default);
        let r = b.ins().iconst(I64, -1);
        b.ins().return_(&[r]);
        b.seal_all_blocks();
        b.finalize(isa.frontend_config());
        func
    }

    fn listing_of(target: Target) -> (Vec<Line>, usize) {
        let isa = super::super::isa_for(target, false).expect("a supported ISA");
        let mut ctx = Context::for_function(switch_function(&*isa, 5));
        let code = ctx
            .compile(&*isa, &mut ControlPlane::default())
            .expect("compiles");
        let bytes = code.code_buffer().to_vec();
        let lines = lines(&*isa, target, &bytes, 0x1000, &code.bb_starts).expect("listing");
        (lines, bytes.len())
    }

    fn check_covers_everything(target: Target) {
        let (lines, len) = listing_of(target);
        let listing = render(&lines, 0x1000);
        let mut at = 0;
        for l in &lines {
            assert_eq!(l.offset, at, "{target:?}: a gap or an overlap\n{listing}");
            at += l.len;
        }
        assert_eq!(at, len, "{target:?}: the listing stops short\n{listing}");
        let table = lines.iter().filter(|l| l.kind == Kind::JumpTable).count();
        assert_eq!(
            table, 6,
            "{target:?}: five cases and the default\n{listing}"
        );
        assert!(listing.contains("; jump table"), "{listing}");
        // Every instruction is one Cranelift emits: no `.byte`, and the last one returns.
        assert!(
            lines.iter().all(|l| l.mnemonic != ".byte"),
            "{target:?}: bytes decoded as nothing\n{listing}"
        );
        let last = lines
            .iter()
            .rev()
            .find(|l| l.kind == Kind::Insn)
            .expect("code");
        assert!(
            matches!(last.mnemonic.as_str(), "ret" | "retq" | "jmp" | "b"),
            "{target:?}: the code ends in {}\n{listing}",
            last.mnemonic
        );
    }

    #[test]
    fn an_x86_64_listing_covers_the_function_and_shows_tables_and_constants_as_data() {
        check_covers_everything(Target::X86_64);
        let (lines, _) = listing_of(Target::X86_64);
        assert!(lines.iter().any(|l| l.kind == Kind::Constant));
        // Code follows the table: its entries point at instructions of the listing.
        for l in lines.iter().filter(|l| l.kind == Kind::JumpTable) {
            let dest = l.operands.rsplit("-> ").next().and_then(parse_int).unwrap() as u64;
            let offset = (dest - 0x1000) as usize;
            assert!(
                lines
                    .iter()
                    .any(|i| i.kind == Kind::Insn && i.offset == offset),
                "{l:?} points at no instruction"
            );
        }
    }

    #[test]
    fn an_aarch64_listing_covers_the_function_and_shows_tables_as_data() {
        check_covers_everything(Target::Aarch64);
    }

    #[test]
    fn pc_relative_operands() {
        let data = |t, m, o, next| match reference(t, m, o, next) {
            Some(Reference::Data(a)) => Some(a),
            _ => None,
        };
        assert_eq!(
            data(Target::X86_64, "imulq", "0x58d(%rip)", 0x43),
            Some(0x5d0)
        );
        assert_eq!(
            data(Target::X86_64, "leaq", "-0x10(%rip), %rcx", 0x20),
            Some(0x10)
        );
        assert_eq!(
            data(Target::X86_64, "cmpq", "(%rip), %r11", 0x20),
            Some(0x20)
        );
        assert_eq!(data(Target::X86_64, "movq", "8(%rsp), %r12", 0x20), None);
        assert_eq!(data(Target::Aarch64, "adr", "x6, #0x90", 0x84), Some(0x90));
        assert_eq!(data(Target::Aarch64, "ldr", "x2, [x0, #0xd8]", 4), None);
        assert!(matches!(
            reference(Target::X86_64, "jae", "0x7f221563c1a6", 0),
            Some(Reference::Code(0x7f221563c1a6))
        ));
        assert!(matches!(
            reference(Target::Aarch64, "b.hs", "#0x1c0", 0),
            Some(Reference::Code(0x1c0))
        ));
        assert!(reference(Target::X86_64, "jmpq", "*%rcx", 0).is_none());
    }
}
