//! `NAME=VALUE` inputs: a value parses or is reported, and one that parses prints as a
//! value that parses back to itself.
#![no_main]
use flowjit::lang::{self, Source};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match lang::parse_value(text) {
        Err(d) => {
            let _ = Source::new("input", text).render(&[d], false);
        }
        Ok(v) => {
            let again = lang::parse_value(&v.to_string()).expect("a printed value parses");
            assert_eq!(again, v);
        }
    }
});
