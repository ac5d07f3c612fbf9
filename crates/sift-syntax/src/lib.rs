//! Lexer, parser and syntax tree of the pcap-filter language, as libpcap 1.10 accepts it.
//!
//! This crate is the first stage of sift: it turns the text of a filter expression into an
//! [`ast::Expr`]. It decides exactly what libpcap's flex scanner and bison grammar decide, and
//! nothing more:
//!
//! * **Tokens** follow `scanner.l`: longest match first, then the earliest rule, so `tcp-syn` is
//!   the number 2, `1.2.3` is a dotted IPv4 prefix, `001122334455` a MAC address, `1-2` a name,
//!   `0x10` hex and `010` octal.
//! * **Grammar** follows `grammar.y`, including its quirks: `and` and `or` have the same
//!   precedence and associate to the left (`a or b and c` is `(a or b) and c`); `%` and `^` have
//!   no precedence, so they take everything to their right (`1 + 2 % 3 + 4` is
//!   `1 + (2 % (3 + 4))`); a bare name or number after `and`/`or` inherits the qualifiers of the
//!   primitive before it (`host a or b`); `src or dst` is always a direction.
//! * **Errors** are the ones libpcap reports as syntax or lexical errors, with the byte span of
//!   the offending token ([`ParseError::render`] points at it).
//!
//! Everything that libpcap checks while generating code happens later, in the lowering stage:
//! resolving host, port, protocol and network names, checking that qualifiers fit together
//! (`tcp host x`), that an address is valid for the link type, load sizes, and so on. The
//! syntax tree keeps what is needed for that: the resolved qualifiers of every primitive, the
//! text of addresses as written, and spans.
//!
//! ```
//! let e = sift_syntax::parse("host a or b and tcp port 80").unwrap().unwrap();
//! assert_eq!(e.to_string(), "(([host]a or [host]b) and [tcp port]#80)");
//! assert!(sift_syntax::parse("   ").unwrap().is_none());
//! let err = sift_syntax::parse("tcp and )").unwrap_err();
//! assert_eq!(err.span.start, 8);
//! ```
#![forbid(unsafe_code)]

pub mod ast;
mod display;
pub mod error;
mod extension;
pub mod lexer;
pub mod parser;

pub use error::{ParseError, ParseErrorKind};
pub use parser::{parse, parse_with};

/// The deepest nesting of parentheses, `not`s and unary minuses accepted (libpcap's bison stack
/// allows about 10000 symbols; sift stops earlier, with [`ParseErrorKind::TooDeep`], to bound
/// recursion).
pub const MAX_DEPTH: usize = 500;

/// The deepest syntax tree accepted, counting every node (so also the length of an `and`/`or`
/// chain such as `host a or host b or ...`): tree-walking code, including `Drop`, recurses.
pub const MAX_TREE_DEPTH: usize = 2000;
