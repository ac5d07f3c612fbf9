#![forbid(unsafe_code)]
pub mod ast;
mod display;
pub mod error;
pub mod lexer;
pub mod parser;
pub use error::{ParseError, ParseErrorKind};
pub use parser::parse;
pub const MAX_DEPTH: usize = 500;
pub const MAX_TREE_DEPTH: usize = 2000;
