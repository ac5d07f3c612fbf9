//! Reads the text form written by `Display for Function`, so that IR tests can be files and a
//! user can feed hand-written IR to the engines.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use crate::coproc::{KeyWidth, Pattern, PatternSet, ValueSet};
use crate::function::{BinOp, Block, CmpOp, Function, Inst, LoadSize, Target, Terminator, Value};
use crate::protochain::Chain;

/// A syntax error in IR text, with its 1-based line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for ParseError {}

/// An instruction or terminator with its operands still named as in the text.
enum Line<'a> {
    Inst(&'a str, Vec<&'a str>),
    Term(&'a str),
}

/// Parses IR text. Value and block names are renumbered in order of appearance.
pub fn parse_function(text: &str) -> Result<Function, ParseError> {
    let mut f = Function::new();
    let mut blocks: HashMap<&str, Block> = HashMap::new();
    let mut values: HashMap<&str, Value> = HashMap::new();
    // Pass 1: blocks, parameters and defined values; remember each body line for pass 2.
    let mut body: Vec<(usize, Block, Option<Value>, Line)> = Vec::new();
    let mut current: Option<Block> = None;
    for (i, raw) in text.lines().enumerate() {
        let lineno = i + 1;
        let err = |message: String| ParseError {
            line: lineno,
            message,
        };
        let line = raw.split(';').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        if let Some(head) = line.strip_suffix(':') {
            let (name, params) = match head.split_once('(') {
                Some((n, rest)) => {
                    let inner = rest
                        .strip_suffix(')')
                        .ok_or_else(|| err("expected ')' after block parameters".into()))?;
                    (n.trim(), split_list(inner))
                }
                None => (head.trim(), Vec::new()),
            };
            let b = block_named(&mut f, &mut blocks, name);
            if !f.block(b).params.is_empty() || f.block(b).term != Terminator::Unset {
                return Err(err(format!("block {name} defined twice")));
            }
            for p in params {
                let v = f.add_param(b);
                if values.insert(p, v).is_some() {
                    return Err(err(format!("value {p} defined twice")));
                }
            }
            current = Some(b);
            continue;
        }
        if let Some(table) = parse_table_line(&mut f, line).map_err(err)? {
            if current.is_some() {
                return Err(err(format!("{table} after the first block")));
            }
            continue;
        }
        let b = current.ok_or_else(|| err("instruction outside a block".into()))?;
        if let Some((lhs, rhs)) = line.split_once('=') {
            let name = lhs.trim();
            let mut words = rhs.split_whitespace();
            let opcode = words.next().ok_or_else(|| err("missing opcode".into()))?;
            let operands = split_list(&rhs.trim()[opcode.len()..]);
            // Placeholder; the real instruction is filled in pass 2.
            let v = f.push(b, Inst::Const(0));
            if values.insert(name, v).is_some() {
                return Err(err(format!("value {name} defined twice")));
            }
            body.push((lineno, b, Some(v), Line::Inst(opcode, operands)));
        } else {
            body.push((lineno, b, None, Line::Term(line)));
            // Blocks referenced by terminators are created in order of appearance.
            for word in line.split(|c: char| c == ',' || c.is_whitespace() || c == '(') {
                if word.starts_with("block") {
                    block_named(&mut f, &mut blocks, word);
                }
            }
        }
    }
    // Pass 2: resolve operands.
    for (lineno, b, def, line) in body {
        let err = |message: String| ParseError {
            line: lineno,
            message,
        };
        let val = |name: &str| {
            values
                .get(name)
                .copied()
                .ok_or_else(|| err(format!("unknown value {name}")))
        };
        match line {
            Line::Inst(opcode, ops) => {
                let inst = parse_inst(opcode, &ops, &val).map_err(err)?;
                let v = def.expect("instructions define values");
                f.values[v.index()] = inst;
            }
            Line::Term(text) => {
                if f.block(b).term != Terminator::Unset {
                    return Err(err("block has two terminators".into()));
                }
                let term = parse_term(text, &blocks, &val).map_err(err)?;
                f.set_term(b, term);
            }
        }
    }
    Ok(f)
}

/// Reads a `pattern pN = ...` or `set sN wW = ...` line into the function's tables; returns
/// what kind of line it was, or `None` for any other line.
fn parse_table_line(f: &mut Function, line: &str) -> Result<Option<&'static str>, String> {
    let Some((head, body)) = line.split_once('=') else {
        // `pattern pN`: an empty pattern set.
        return match line.split_whitespace().collect::<Vec<_>>()[..] {
            ["pattern", name] => {
                let i = table_index(name, 'p', f.patterns.len())?;
                if i != f.patterns.len() {
                    return Err(format!("pattern set {name} declared after its patterns"));
                }
                f.patterns.push(Arc::new(PatternSet::new()));
                Ok(Some("pattern"))
            }
            _ => Ok(None),
        };
    };
    let mut words = head.split_whitespace();
    let (kind, name) = (words.next(), words.next());
    let body = body.trim();
    match (kind, name) {
        (Some("pattern"), Some(name)) => {
            let i = table_index(name, 'p', f.patterns.len())?;
            let (regex, nocase, quoted) = match body.split_once(' ') {
                Some(("regex", rest)) => (true, false, rest.trim()),
                Some(("nocase", rest)) => (false, true, rest.trim()),
                _ => (false, false, body),
            };
            let bytes = unquote(quoted)?;
            let pattern = if regex {
                Pattern::Regex(String::from_utf8(bytes).map_err(|_| "regex is not UTF-8")?)
            } else {
                Pattern::Literal { bytes, nocase }
            };
            if i == f.patterns.len() {
                f.patterns.push(Arc::new(PatternSet::new()));
            }
            Arc::make_mut(&mut f.patterns[i])
                .add(pattern)
                .map_err(|e| e.to_string())?;
            Ok(Some("pattern"))
        }
        (Some("set"), Some(name)) => {
            let i = table_index(name, 's', f.sets.len())?;
            if i != f.sets.len() {
                return Err(format!("set {name} defined twice"));
            }
            let width = match words.next() {
                Some("w32") => KeyWidth::W32,
                Some("w128") => KeyWidth::W128,
                _ => return Err("set width must be w32 or w128".into()),
            };
            let mut ranges = Vec::new();
            for item in split_list(body) {
                let (lo, hi) = item.split_once('-').unwrap_or((item, item));
                ranges.push((parse_u128(lo.trim())?, parse_u128(hi.trim())?));
            }
            f.sets.push(Arc::new(ValueSet::new(width, ranges)));
            Ok(Some("set"))
        }
        _ => Ok(None),
    }
}

/// The index in `pN`/`sN`, which must name an existing table or the next one.
fn table_index(name: &str, prefix: char, len: usize) -> Result<usize, String> {
    let i: usize = name
        .strip_prefix(prefix)
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("bad table name {name:?}"))?;
    if i > len {
        return Err(format!("table {name} out of order"));
    }
    Ok(i)
}

fn parse_u128(s: &str) -> Result<u128, String> {
    let r = match s.strip_prefix("0x") {
        Some(hex) => u128::from_str_radix(hex, 16),
        None => s.parse(),
    };
    r.map_err(|_| format!("bad number {s:?}"))
}

/// The bytes of a quoted string in which `\xNN` is the only escape.
fn unquote(s: &str) -> Result<Vec<u8>, String> {
    let inner = s
        .strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .ok_or_else(|| format!("expected a quoted string, found {s:?}"))?;
    let mut out = Vec::new();
    let mut bytes = inner.bytes();
    while let Some(b) = bytes.next() {
        if b == b'\\' {
            let hex: Vec<u8> = bytes.by_ref().take(3).collect();
            let digits = match hex.as_slice() {
                [b'x', hi, lo] => std::str::from_utf8(&[*hi, *lo]).ok().map(str::to_owned),
                _ => None,
            };
            let byte = digits
                .and_then(|d| u8::from_str_radix(&d, 16).ok())
                .ok_or("only \\xNN escapes are allowed")?;
            out.push(byte);
        } else {
            out.push(b);
        }
    }
    Ok(out)
}

fn block_named<'a>(f: &mut Function, blocks: &mut HashMap<&'a str, Block>, name: &'a str) -> Block {
    *blocks.entry(name).or_insert_with(|| f.create_block())
}

fn split_list(s: &str) -> Vec<&str> {
    s.split(',')
        .map(str::trim)
        .filter(|w| !w.is_empty())
        .collect()
}

fn parse_u32(s: &str) -> Result<u32, String> {
    let r = match s.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16),
        None => s.parse(),
    };
    r.map_err(|_| format!("bad number {s:?}"))
}

fn parse_inst(
    opcode: &str,
    ops: &[&str],
    val: &dyn Fn(&str) -> Result<Value, ParseError>,
) -> Result<Inst, String> {
    let v = |s: &str| val(s).map_err(|e| e.message);
    let arity = |n: usize| {
        if ops.len() == n {
            Ok(())
        } else {
            Err(format!("{opcode} takes {n} operands"))
        }
    };
    if let Some(chain) = opcode.strip_prefix("protochain.") {
        let chain = match chain {
            "ip" => Chain::Ip,
            "ip6" => Chain::Ip6,
            _ => return Err(format!("bad protochain kind {chain:?}")),
        };
        arity(3)?;
        let (offset, base) = ops[1]
            .strip_prefix('[')
            .and_then(|a| a.strip_suffix(']'))
            .and_then(|a| a.split_once('+'))
            .ok_or("protochain's header offset must be [vN+base]")?;
        return Ok(Inst::Protochain {
            chain,
            base: parse_u32(base.trim())?,
            proto: v(ops[0])?,
            offset: v(offset.trim())?,
            target: parse_u32(ops[2])?,
        });
    }
    if let Some(size) = opcode.strip_prefix("load.") {
        let size = match size {
            "b" => LoadSize::Byte,
            "h" => LoadSize::Half,
            "w" => LoadSize::Word,
            _ => return Err(format!("bad load size {size:?}")),
        };
        arity(1)?;
        let addr = ops[0]
            .strip_prefix('[')
            .and_then(|a| a.strip_suffix(']'))
            .ok_or("load address must be [offset] or [vN+offset]")?;
        let (index, offset) = match addr.split_once('+') {
            Some((x, k)) => (Some(v(x.trim())?), parse_u32(k.trim())?),
            None => (None, parse_u32(addr.trim())?),
        };
        return Ok(Inst::Load {
            index,
            offset,
            size,
        });
    }
    match opcode {
        "const" => {
            arity(1)?;
            Ok(Inst::Const(parse_u32(ops[0])?))
        }
        "len" => {
            arity(0)?;
            Ok(Inst::WireLen)
        }
        "neg" => {
            arity(1)?;
            Ok(Inst::Neg(v(ops[0])?))
        }
        "contains" => {
            arity(2)?;
            let (set, pattern) = ops[0]
                .strip_prefix('p')
                .and_then(|r| r.split_once('.'))
                .ok_or("contains names its pattern as pN.M")?;
            Ok(Inst::Contains {
                set: parse_u32(set)?,
                pattern: parse_u32(pattern)?,
                start: v(ops[1])?,
            })
        }
        "member" => {
            let (set, key) = ops.split_first().ok_or("member takes a set and a key")?;
            let set = set.strip_prefix('s').ok_or("member names its set as sN")?;
            Ok(Inst::Member {
                set: parse_u32(set)?,
                key: key.iter().map(|k| v(k)).collect::<Result<_, _>>()?,
            })
        }
        _ => {
            let op = BinOp::ALL
                .into_iter()
                .find(|o| o.name() == opcode)
                .ok_or_else(|| format!("unknown opcode {opcode:?}"))?;
            arity(2)?;
            Ok(Inst::Binary(op, v(ops[0])?, v(ops[1])?))
        }
    }
}

fn parse_target(
    s: &str,
    blocks: &HashMap<&str, Block>,
    val: &dyn Fn(&str) -> Result<Value, ParseError>,
) -> Result<Target, String> {
    let (name, args) = match s.split_once('(') {
        Some((n, rest)) => (
            n.trim(),
            split_list(rest.strip_suffix(')').ok_or("expected ')'")?),
        ),
        None => (s.trim(), Vec::new()),
    };
    let block = *blocks
        .get(name)
        .ok_or_else(|| format!("unknown block {name}"))?;
    let args = args
        .iter()
        .map(|a| val(a).map_err(|e| e.message))
        .collect::<Result<_, _>>()?;
    Ok(Target { block, args })
}

/// Splits on commas that are not inside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(s[start..].trim());
    out
}

fn parse_term(
    text: &str,
    blocks: &HashMap<&str, Block>,
    val: &dyn Fn(&str) -> Result<Value, ParseError>,
) -> Result<Terminator, String> {
    let (word, rest) = text.split_once(' ').unwrap_or((text, ""));
    match word {
        "ret" if rest.trim().starts_with('v') => Ok(Terminator::ReturnValue(
            val(rest.trim()).map_err(|e| e.message)?,
        )),
        "ret" => Ok(Terminator::Return(parse_u32(rest.trim())?)),
        "switch" => {
            let parts = split_top(rest);
            if parts.len() < 2 {
                return Err("switch takes a value, a default and cases".into());
            }
            let value = val(parts[0]).map_err(|e| e.message)?;
            let default = parts[1]
                .strip_prefix("default ")
                .ok_or("switch: second operand must be `default BLOCK`")?;
            let default = parse_target(default, blocks, val)?;
            let mut cases = Vec::new();
            for case in &parts[2..] {
                let (key, target) = case
                    .split_once(':')
                    .ok_or_else(|| format!("switch case {case:?} needs `KEY: BLOCK`"))?;
                cases.push((parse_u32(key.trim())?, parse_target(target, blocks, val)?));
            }
            Ok(Terminator::Switch {
                value,
                cases,
                default,
            })
        }
        "jump" => Ok(Terminator::Jump(parse_target(rest, blocks, val)?)),
        "br" => {
            let (op, rest) = rest.split_once(' ').ok_or("br needs operands")?;
            let op = CmpOp::ALL
                .into_iter()
                .find(|o| o.name() == op)
                .ok_or_else(|| format!("unknown comparison {op:?}"))?;
            let parts = split_top(rest);
            if parts.len() != 4 {
                return Err("br takes lhs, rhs, then-block, else-block".into());
            }
            let v = |s: &str| val(s).map_err(|e| e.message);
            Ok(Terminator::Branch {
                op,
                lhs: v(parts[0])?,
                rhs: v(parts[1])?,
                then_: parse_target(parts[2], blocks, val)?,
                else_: parse_target(parts[3], blocks, val)?,
            })
        }
        _ => Err(format!("unknown terminator {word:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
block0:
    v0 = load.h [12]
    v1 = const 0x800
    br eq v0, v1, block1, block2
block1:
    v2 = load.b [14]
    v3 = const 15
    v4 = and v2, v3
    v5 = const 2
    v6 = shl v4, v5
    v7 = load.h [v6+16]
    jump block3(v7)
block2:
    ret 0
block3(v8):
    v9 = const 80
    br eq v8, v9, block4, block2
block4:
    ret 262144
";

    const SWITCH: &str = "\
block0:
    v0 = load.h [12]
    switch v0, default block1, 0x800: block2(v0), 0x86dd: block1
block1:
    ret 0
block2(v1):
    ret v1
";

    #[test]
    fn switch_and_computed_return_round_trip() {
        let f = parse_function(SWITCH).unwrap();
        assert_eq!(f.to_string(), SWITCH);
        assert!(crate::verify(&f).is_ok());
    }

    #[test]
    fn round_trip() {
        let f = parse_function(TEXT).unwrap();
        assert_eq!(f.to_string(), TEXT);
        assert_eq!(parse_function(&f.to_string()).unwrap(), f);
    }

    #[test]
    fn errors_name_the_line() {
        let e = parse_function("block0:\n    v0 = frob v1\n").unwrap_err();
        assert_eq!(e.line, 2);
        let e = parse_function("block0:\n    br eq v0, v0, block1, block1\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(parse_function("    ret 0\n").is_err());
    }
}
