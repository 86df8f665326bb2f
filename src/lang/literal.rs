//! Integer literals: held to the integer size limit when the program loads, and parsed in
//! subquadratic time.
//!
//! An integer has at most [`MAX_BITS`] bits (2^24, see `flowjit_runtime::ops`); a literal
//! past that is refused where it is written, with its position, instead of failing when the
//! program runs. A number of 2^24 bits has at most [`MAX_DIGITS`] decimal digits, so a
//! longer literal (leading zeros aside) is refused without being parsed at all.
//!
//! num-bigint parses decimal digits in quadratic time: it multiplies the whole number so far
//! by 10^19 for every 19 digits, which took 27 s for five million digits. [`parse`] splits
//! the digits instead: `high * 10^k + low`, where `low` is the last `k` digits and `k` a
//! block of digits times a power of two, whose powers of ten are computed once by squaring.
//! The work is then a logarithmic number of rounds of large multiplications (Karatsuba and
//! Toom-3 in num-bigint), 1.4 to 2 s in all for a literal at the limit.
//!
//! ```text
//! 12345678 (blocks of 2 digits) = 1234 * 10^4 + 5678
//!                               = (12 * 10^2 + 34) * 10^4 + (56 * 10^2 + 78)
//! ```

use num_bigint::{BigInt, BigUint};

use super::ast::Span;
use super::diag::Diagnostic;
use flowjit_runtime::ops::MAX_BITS;

/// The most decimal digits a number of [`MAX_BITS`] bits has: `2^(2^24) - 1` has
/// `floor(2^24 * log10(2)) + 1` = 5,050,446 digits.
pub const MAX_DIGITS: usize = 5_050_446;

/// Digits that num-bigint parses directly (quadratic in this many only).
const BLOCK: usize = 2048;

/// The integer that the decimal `digits` (ASCII `0-9`, at `span`) write, or a diagnostic
/// when it has more than [`MAX_BITS`] bits.
pub fn integer(digits: &str, span: Span) -> Result<BigInt, Diagnostic> {
    within(digits, span, MAX_BITS, MAX_DIGITS)
}

/// [`integer`] for a limit of `max_bits` bits, which `max_digits` digits can exceed.
fn within(
    digits: &str,
    span: Span,
    max_bits: u64,
    max_digits: usize,
) -> Result<BigInt, Diagnostic> {
    let significant = digits.trim_start_matches('0').as_bytes();
    let too_large = || {
        Diagnostic::new(
            span,
            format!(
                "integer literal of {} digits too large (more than {max_bits} bits)",
                digits.len()
            ),
        )
    };
    if significant.len() > max_digits {
        return Err(too_large());
    }
    let n = parse(significant);
    if n.bits() > max_bits {
        return Err(too_large());
    }
    Ok(BigInt::from(n))
}

/// How an error message names the integer `n`: `prefix` and the number in backquotes, or
/// `a N-bit integer` when it has more than 256 bits (a literal of a million digits is not
/// worth printing back, and printing it takes seconds).
pub fn describe(n: &BigInt, prefix: &str) -> String {
    if n.bits() <= 256 {
        format!("{prefix}`{n}`")
    } else {
        format!("a {}-bit integer", n.bits())
    }
}

/// The number that the decimal `digits` (ASCII `0-9`) write, in `O(M(n) log n)` time for
/// `n` digits and `M` the cost of a multiplication.
pub fn parse(digits: &[u8]) -> BigUint {
    if digits.len() <= BLOCK {
        // Every literal of an ordinary program: no power of ten to compute (10^2048 took
        // a twentieth of loading a program of 300 loops).
        return BigUint::parse_bytes(digits, 10).unwrap_or_default();
    }
    // powers[i] = 10^(BLOCK * 2^i), for every split of `digits`.
    let mut powers = vec![BigUint::from(10u32).pow(BLOCK as u32)];
    while BLOCK << (powers.len() + 1) <= digits.len() {
        let last = powers.last().expect("one power at least");
        powers.push(last * last);
    }
    split(digits, &powers)
}

fn split(digits: &[u8], powers: &[BigUint]) -> BigUint {
    if digits.len() <= BLOCK {
        return BigUint::parse_bytes(digits, 10).unwrap_or_default();
    }
    // `low` is the largest block of digits, BLOCK times a power of two, of at most half of
    // them: the top multiplication is balanced, and no power has more than half the digits.
    let mut i = 0;
    while BLOCK << (i + 2) <= digits.len() {
        i += 1;
    }
    let (high, low) = digits.split_at(digits.len() - (BLOCK << i));
    split(high, powers) * &powers[i] + split(low, powers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_as_num_bigint_does() {
        let mut digits = String::new();
        for len in [
            1,
            2,
            19,
            20,
            BLOCK - 1,
            BLOCK,
            BLOCK + 1,
            3 * BLOCK + 7,
            9 * BLOCK,
        ] {
            while digits.len() < len {
                // Not periodic in any block size.
                let k = digits.len();
                digits.push(char::from(b'0' + ((k * k + 7 * k / 3) % 10) as u8));
            }
            let d = &digits[..len];
            assert_eq!(
                parse(d.as_bytes()),
                BigUint::parse_bytes(d.as_bytes(), 10).unwrap(),
                "{len} digits"
            );
            let zeros = "0".repeat(len);
            assert_eq!(parse(zeros.as_bytes()), BigUint::default());
        }
        assert_eq!(integer("000123", Span::new(0, 6)), Ok(BigInt::from(123)));
    }

    #[test]
    fn literals_past_the_size_limit_are_refused() {
        // The digits of 2^(2^24) - 1: floor(2^24 * log10(2)) + 1.
        assert_eq!(MAX_DIGITS, (MAX_BITS as f64 * 2f64.log10()) as usize + 1);
        // The same rules for a limit of 64 bits: 2^64 - 1 has 20 digits.
        let span = Span::new(3, 23);
        let check = |digits: &str| within(digits, span, 64, 20);
        assert_eq!(check("18446744073709551615"), Ok(BigInt::from(u64::MAX)));
        let err = check("18446744073709551616").unwrap_err();
        assert_eq!(
            err.message,
            "integer literal of 20 digits too large (more than 64 bits)"
        );
        assert_eq!(err.span, span);
        // Longer than any integer within the limit: refused before it is parsed.
        assert!(check("100000000000000000000").is_err());
        // Leading zeros do not count.
        assert_eq!(check("00000000000000000000001"), Ok(BigInt::from(1)));
    }

    #[test]
    fn long_integers_are_described_by_their_size() {
        assert_eq!(
            describe(&BigInt::from(-12), "the integer "),
            "the integer `-12`"
        );
        let long = BigInt::from(1) << 300u32;
        assert_eq!(describe(&long, ""), "a 301-bit integer");
    }

    #[test]
    fn a_literal_longer_than_any_integer_within_the_limit_is_refused() {
        let digits = "7".repeat(MAX_DIGITS + 1);
        let err = integer(&digits, Span::new(0, digits.len())).unwrap_err();
        assert_eq!(
            err.message,
            "integer literal of 5050447 digits too large (more than 16777216 bits)"
        );
        // Inputs (`n=...`) too, alone or in a list.
        let err = crate::lang::parse_value(&digits).unwrap_err();
        assert_eq!(err.span, Span::new(0, digits.len()));
        let err = crate::lang::parse_value(&format!("[1,-{digits}]")).unwrap_err();
        assert_eq!(err.span, Span::new(4, 4 + digits.len()));
        assert!(err.message.contains("too large"), "{}", err.message);
    }
}
