//! ELF relocatable objects, as clang emits for `-target bpf` and libbpf, iproute2 (`ip link ...
//! xdp obj FILE sec xdp`, `tc filter ... bpf obj FILE sec tc`) and bpftool load.
//!
//! The object holds one executable section named after the program type (`socket`, `xdp`,
//! `tc`: libbpf infers the program type from it), a global function symbol covering the whole
//! section (libbpf's program name), and a `license` section. The programs call no helper that
//! needs a GPL-compatible license, so the license string is the caller's choice; the default,
//! "Dual MIT/GPL", is GPL-compatible anyway, leaving the object usable with any helper a
//! later version may call. No relocations: sift's programs use no maps and no subprograms.

use std::fmt;

use object::write::{Object, Symbol, SymbolSection};
use object::SymbolScope;
use object::{Architecture, BinaryFormat, Endianness, SectionKind, SymbolFlags, SymbolKind};

use crate::program::Program;

/// The default content of the `license` section.
pub const DEFAULT_LICENSE: &str = "Dual MIT/GPL";

/// Why an object could not be written.
#[derive(Debug)]
pub enum ElfError {
    /// The symbol name is empty or contains a NUL byte.
    InvalidName { name: String },
    /// The license contains a NUL byte.
    InvalidLicense,
    /// The `object` crate refused the object.
    Write(object::write::Error),
}

impl fmt::Display for ElfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ElfError::InvalidName { name } => write!(f, "invalid program name {name:?}"),
            ElfError::InvalidLicense => write!(f, "license string contains a NUL byte"),
            ElfError::Write(e) => write!(f, "cannot write ELF object: {e}"),
        }
    }
}

impl std::error::Error for ElfError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ElfError::Write(e) => Some(e),
            _ => None,
        }
    }
}

/// Writes `program` as an ELF object with the function symbol `name` and the default license.
pub fn to_elf(program: &Program, name: &str) -> Result<Vec<u8>, ElfError> {
    to_elf_with_license(program, name, DEFAULT_LICENSE)
}

/// As [`to_elf`], with the `license` section's string.
pub fn to_elf_with_license(
    program: &Program,
    name: &str,
    license: &str,
) -> Result<Vec<u8>, ElfError> {
    if name.is_empty() || name.contains('\0') {
        return Err(ElfError::InvalidName {
            name: name.to_owned(),
        });
    }
    if license.contains('\0') {
        return Err(ElfError::InvalidLicense);
    }
    let mut obj = Object::new(BinaryFormat::Elf, Architecture::Bpf, Endianness::Little);
    obj.flags = object::write::FileFlags::Elf {
        os_abi: 0,
        abi_version: 0,
        e_flags: 0,
    };
    let section_name = program.program_type.section_name().as_bytes().to_vec();
    let text = obj.add_section(Vec::new(), section_name, SectionKind::Text);
    let code = program.to_bytes();
    obj.set_section_data(text, code.clone(), 8);
    obj.add_symbol(Symbol {
        name: name.as_bytes().to_vec(),
        value: 0,
        size: code.len() as u64,
        kind: SymbolKind::Text,
        scope: SymbolScope::Dynamic,
        weak: false,
        section: SymbolSection::Section(text),
        flags: SymbolFlags::None,
    });
    let lic = obj.add_section(Vec::new(), b"license".to_vec(), SectionKind::Data);
    let mut bytes = license.as_bytes().to_vec();
    bytes.push(0);
    let lic_len = bytes.len() as u64;
    obj.set_section_data(lic, bytes, 1);
    obj.add_symbol(Symbol {
        name: b"_license".to_vec(),
        value: 0,
        size: lic_len,
        kind: SymbolKind::Data,
        scope: SymbolScope::Dynamic,
        weak: false,
        section: SymbolSection::Section(lic),
        flags: SymbolFlags::None,
    });
    obj.write().map_err(ElfError::Write)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::insn::Insn;
    use crate::program::ProgramType;
    use object::{Object as _, ObjectSection as _, ObjectSymbol as _};

    #[test]
    fn sections_and_symbols() {
        let p = Program {
            program_type: ProgramType::Xdp,
            insns: vec![crate::moves::mov32_imm(crate::insn::Reg::R0, 2), Insn::Exit],
        };
        let bytes = to_elf(&p, "sift_filter").unwrap();
        let file = object::File::parse(&*bytes).unwrap();
        assert_eq!(file.architecture(), Architecture::Bpf);
        let xdp = file.section_by_name("xdp").unwrap();
        assert_eq!(xdp.data().unwrap(), p.to_bytes());
        let lic = file.section_by_name("license").unwrap();
        assert_eq!(lic.data().unwrap(), b"Dual MIT/GPL\0");
        let sym = file
            .symbols()
            .find(|s| s.name() == Ok("sift_filter"))
            .unwrap();
        assert_eq!(sym.size(), 16);
        assert!(sym.is_global());
        assert_eq!(sym.kind(), SymbolKind::Text);
    }

    #[test]
    fn bad_names() {
        let p = Program {
            program_type: ProgramType::SocketFilter,
            insns: vec![Insn::Exit],
        };
        assert!(matches!(to_elf(&p, ""), Err(ElfError::InvalidName { .. })));
        assert!(matches!(
            to_elf_with_license(&p, "f", "a\0b"),
            Err(ElfError::InvalidLicense)
        ));
    }
}
