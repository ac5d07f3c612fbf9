//! Why something could not be compiled to native code.
//!
//! Most failures name what failed: the host (architecture or CPU), the step of a key program,
//! the bytecode instruction, or the generated function and the Cranelift stage that rejected
//! it. None of them depends on the packets a filter will see: a program that compiles runs on
//! every packet.

use std::fmt;

use crate::key_extractor::KeyProgramError;

/// Why a program could not be compiled to native code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JitError {
    /// The host cannot run generated code (why); use the interpreter.
    Unsupported(HostUnsupported),
    /// A key program for the demultiplexer's native code is malformed (the step and problem).
    KeyProgram(KeyProgramError),
    /// Instruction `insn` of the bytecode calls a coprocessor, but the program carries no
    /// tables (the verifier rules this out for programs it accepts).
    CallsWithoutTables { insn: usize },
    /// Cranelift rejected the generated function `function` at `stage` (a bug in this crate)
    /// or could not map it (out of memory); `message` is Cranelift's.
    Cranelift {
        function: String,
        stage: CodegenStage,
        message: String,
    },
    /// A key program writes key word `word`, but the table it is compiled for has keys of
    /// `table_words` words (or a width no table has: 0 or more than the widest).
    KeyWidth { word: usize, table_words: usize },
}

/// Why the host cannot run generated code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostUnsupported {
    /// This architecture has no code generator here (x86-64 and aarch64 have).
    Architecture { arch: &'static str },
    /// Cranelift does not support this CPU, or rejects a setting on it (its reason).
    Cpu { reason: String },
}

impl fmt::Display for HostUnsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostUnsupported::Architecture { arch } => {
                write!(f, "no code generator for {arch} (only x86-64 and aarch64)")
            }
            HostUnsupported::Cpu { reason } => write!(f, "Cranelift rejects this CPU: {reason}"),
        }
    }
}

/// Where in Cranelift's pipeline a generated function failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CodegenStage {
    /// Declaring its name and signature in the module.
    Declare,
    /// Verifying, optimizing and compiling it to machine code.
    Compile,
    /// Mapping the module's code into executable memory.
    Map,
}

impl fmt::Display for CodegenStage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CodegenStage::Declare => "declaring",
            CodegenStage::Compile => "compiling",
            CodegenStage::Map => "mapping",
        })
    }
}

impl fmt::Display for JitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JitError::Unsupported(why) => write!(f, "JIT not supported on this host: {why}"),
            JitError::KeyProgram(e) => write!(f, "JIT code generation failed: {e}"),
            JitError::CallsWithoutTables { insn } => write!(
                f,
                "JIT code generation failed: instruction {insn} calls a coprocessor, \
                 but the program carries no tables"
            ),
            JitError::Cranelift {
                function,
                stage,
                message,
            } => write!(
                f,
                "JIT code generation failed {stage} function `{function}`: {message}"
            ),
            JitError::KeyWidth { word, table_words } => write!(
                f,
                "JIT code generation failed: the key program writes key word {word}, \
                 the table's keys have {table_words} words"
            ),
        }
    }
}

impl std::error::Error for JitError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            JitError::KeyProgram(e) => Some(e),
            _ => None,
        }
    }
}

impl From<KeyProgramError> for JitError {
    fn from(e: KeyProgramError) -> JitError {
        JitError::KeyProgram(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_what_failed() {
        let e = JitError::Cranelift {
            function: "filter".into(),
            stage: CodegenStage::Compile,
            message: "verifier error".into(),
        };
        assert_eq!(
            e.to_string(),
            "JIT code generation failed compiling function `filter`: verifier error"
        );
        let e = JitError::from(KeyProgramError {
            step: 3,
            problem: "load size is not 1, 2 or 4",
        });
        assert_eq!(
            e.to_string(),
            "JIT code generation failed: key program step 3: load size is not 1, 2 or 4"
        );
        assert!(std::error::Error::source(&e).is_some());
        let e = JitError::Unsupported(HostUnsupported::Architecture { arch: "riscv64" });
        assert_eq!(
            e.to_string(),
            "JIT not supported on this host: no code generator for riscv64 (only x86-64 and aarch64)"
        );
    }
}
