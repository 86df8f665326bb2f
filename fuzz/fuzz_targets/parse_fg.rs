//! The readable syntax: parse, check, diagnostics, print and parse back, run briefly.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| common::program(data, flowjit::lang::Syntax::Fg));
