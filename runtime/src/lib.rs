//! # flowjit-runtime
//!
//! What flowjit's interpreter and its machine code share, and nothing else: the value
//! representation ([`Value`]), interned atoms ([`Atom`]), immutable lists ([`List`]), mutable arrays ([`Array`]), and the
//! exact semantics of every primitive operation of the flowgraph language ([`ops`]).
//!
//! The interpreter, the trace recorder, the optimizer's constant folder and the partial
//! evaluator all evaluate operations through [`ops::apply`], so there is one definition of
//! what `add` or `readlist` means, and every executor agrees with it by construction.
#![deny(missing_docs)]

pub mod abi;
pub mod array;
pub mod atom;
pub mod cycles;
pub mod list;
pub mod ops;
pub mod value;

pub use array::Array;
pub use atom::Atom;
pub use list::List;
pub use ops::{Access, Op, OpError};
pub use value::Value;
