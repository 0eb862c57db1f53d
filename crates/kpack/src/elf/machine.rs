//! What differs between the host CPUs a fat binary can be built for, in one place.
//!
//! The rewrite moves file bytes and re-points relocated pointers. Both depend on the
//! host machine: the relocation types that set a 64-bit pointer (relative to the load
//! base, or a symbol's value), and the page size the file's offsets must stay
//! congruent to. x86-64 Linux maps 4 KiB pages; aarch64 kernels come with 4, 16 or
//! 64 KiB pages and ppc64le ones with 64 KiB (or 4 KiB), so for those the page is the
//! largest alignment the binary's `PT_LOAD`s declare: what its linker promised every
//! kernel it runs on (GNU ld's default `max-page-size` is 64 KiB on both).
//!
//! Everything else the rewrite does (the wrapper layout, the marker, the dynamic
//! tags it moves) is the same on the three little-endian 64-bit ELF machines; the
//! ppc64 dynamic tag that holds an address (`DT_PPC64_GLINK`) is among the tags a
//! moved block must not hold.

use object::elf;
use serde::Serialize;

/// `R_X86_64_64`: symbol + addend.
const R_X86_64_64: u32 = 1;
/// `R_X86_64_RELATIVE`: load base + addend.
const R_X86_64_RELATIVE: u32 = 8;
/// `R_AARCH64_ABS64`.
const R_AARCH64_ABS64: u32 = 257;
/// `R_AARCH64_RELATIVE`.
const R_AARCH64_RELATIVE: u32 = 1027;
/// `R_PPC64_ADDR64`.
const R_PPC64_ADDR64: u32 = 38;
/// `R_PPC64_RELATIVE`.
const R_PPC64_RELATIVE: u32 = 22;

/// The smallest page any of these machines maps.
pub const MIN_PAGE: u64 = 4096;
/// The largest page the rewrite lays a file out for (aarch64 and ppc64le 64 KiB).
pub const MAX_PAGE: u64 = 65536;

/// A host CPU whose fat binaries kpack-tui rewrites (64-bit, little-endian ELF).
///
/// Serialised as [`HostMachine::name`] (`x86-64`), as `scan --json` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HostMachine {
    /// `EM_X86_64`.
    X86_64,
    /// `EM_AARCH64`.
    Aarch64,
    /// `EM_PPC64` in little-endian (ELFv2): ppc64le.
    Ppc64le,
}

impl Serialize for HostMachine {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

#[cfg(feature = "schema")]
impl schemars::JsonSchema for HostMachine {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "HostMachine".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let names: Vec<&str> = Self::ALL.iter().map(|m| m.name()).collect();
        schemars::json_schema!({ "type": "string", "enum": names })
    }
}

impl HostMachine {
    /// Every machine handled, in the order the documentation lists them.
    pub const ALL: [HostMachine; 3] = [Self::X86_64, Self::Aarch64, Self::Ppc64le];

    /// The machine of a little-endian ELF64 header's `e_machine`, or `None`.
    pub fn of(e_machine: u16) -> Option<Self> {
        match e_machine {
            elf::EM_X86_64 => Some(Self::X86_64),
            elf::EM_AARCH64 => Some(Self::Aarch64),
            elf::EM_PPC64 => Some(Self::Ppc64le),
            _ => None,
        }
    }

    /// The name packagers use (Debian's and Python's platform names).
    pub fn name(self) -> &'static str {
        match self {
            Self::X86_64 => "x86-64",
            Self::Aarch64 => "aarch64",
            Self::Ppc64le => "ppc64le",
        }
    }

    /// The relocation type that sets a pointer to load base + addend.
    pub fn relative(self) -> u32 {
        match self {
            Self::X86_64 => R_X86_64_RELATIVE,
            Self::Aarch64 => R_AARCH64_RELATIVE,
            Self::Ppc64le => R_PPC64_RELATIVE,
        }
    }

    /// The relocation type that sets a 64-bit pointer to symbol + addend.
    pub fn abs64(self) -> u32 {
        match self {
            Self::X86_64 => R_X86_64_64,
            Self::Aarch64 => R_AARCH64_ABS64,
            Self::Ppc64le => R_PPC64_ADDR64,
        }
    }

    /// The name of a relocation type this module knows, for messages.
    pub fn relocation_name(self, r_type: u32) -> Option<&'static str> {
        match (self, r_type) {
            (Self::X86_64, R_X86_64_RELATIVE) => Some("R_X86_64_RELATIVE"),
            (Self::X86_64, R_X86_64_64) => Some("R_X86_64_64"),
            (Self::Aarch64, R_AARCH64_RELATIVE) => Some("R_AARCH64_RELATIVE"),
            (Self::Aarch64, R_AARCH64_ABS64) => Some("R_AARCH64_ABS64"),
            (Self::Ppc64le, R_PPC64_RELATIVE) => Some("R_PPC64_RELATIVE"),
            (Self::Ppc64le, R_PPC64_ADDR64) => Some("R_PPC64_ADDR64"),
            _ => None,
        }
    }

    /// The page size a file of this machine is laid out for, from the largest
    /// alignment its `PT_LOAD`s declare (`load_aligns`). x86-64 is always 4 KiB, as
    /// the kernel maps it whatever the linker wrote (old GNU ld wrote 2 MiB).
    pub fn page(self, load_aligns: impl IntoIterator<Item = u64>) -> u64 {
        match self {
            Self::X86_64 => MIN_PAGE,
            Self::Aarch64 | Self::Ppc64le => load_aligns
                .into_iter()
                .filter(|a| a.is_power_of_two())
                .max()
                .unwrap_or(MAX_PAGE)
                .clamp(MIN_PAGE, MAX_PAGE),
        }
    }
}

impl std::fmt::Display for HostMachine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A readable name for any `e_machine` (for refusals of machines not handled).
pub fn machine_name(e_machine: u16) -> String {
    if let Some(m) = HostMachine::of(e_machine) {
        return m.name().to_string();
    }
    let known = match e_machine {
        elf::EM_386 => "i386",
        elf::EM_ARM => "32-bit ARM",
        elf::EM_PPC => "32-bit PowerPC",
        elf::EM_S390 => "s390x",
        elf::EM_RISCV => "RISC-V",
        elf::EM_LOONGARCH => "LoongArch",
        elf::EM_SPARCV9 => "SPARC V9",
        elf::EM_MIPS => "MIPS",
        elf::EM_IA_64 => "IA-64",
        super::EM_AMDGPU => "AMDGPU",
        _ => "",
    };
    if known.is_empty() {
        format!("machine {e_machine}")
    } else {
        format!("{known} (machine {e_machine})")
    }
}

/// The machines handled, as the refusal of another one lists them.
pub fn handled_list() -> String {
    HostMachine::ALL
        .iter()
        .map(|m| m.name())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_follow_the_alignment_on_aarch64_and_ppc64le_only() {
        assert_eq!(HostMachine::X86_64.page([0x200000, 0x1000]), 4096);
        assert_eq!(HostMachine::Aarch64.page([0x10000, 0x10000]), 65536);
        assert_eq!(HostMachine::Aarch64.page([0x1000]), 4096);
        assert_eq!(HostMachine::Aarch64.page([0x4000, 8]), 16384);
        // A 2 MiB alignment (huge-page linking) is still laid out for 64 KiB pages.
        assert_eq!(HostMachine::Ppc64le.page([0x200000]), 65536);
        // No PT_LOAD, or nonsense alignments: the largest page.
        assert_eq!(HostMachine::Ppc64le.page([]), 65536);
        assert_eq!(HostMachine::Aarch64.page([0, 3]), 65536);
        assert_eq!(HostMachine::Aarch64.page([1]), 4096);
    }

    #[test]
    fn relocation_numbers_are_the_psabi_ones() {
        // From the psABI documents (and the glibc elf.h the cross toolchains ship).
        let rel: Vec<u32> = HostMachine::ALL.iter().map(|m| m.relative()).collect();
        assert_eq!(rel, [8, 1027, 22]);
        let abs: Vec<u32> = HostMachine::ALL.iter().map(|m| m.abs64()).collect();
        assert_eq!(abs, [1, 257, 38]);
        assert_eq!(
            HostMachine::Ppc64le.relocation_name(22),
            Some("R_PPC64_RELATIVE")
        );
        assert_eq!(HostMachine::Aarch64.relocation_name(8), None);
    }

    #[test]
    fn other_machines_have_names() {
        assert_eq!(HostMachine::of(elf::EM_AARCH64), Some(HostMachine::Aarch64));
        assert_eq!(HostMachine::of(elf::EM_RISCV), None);
        assert_eq!(machine_name(elf::EM_RISCV), "RISC-V (machine 243)");
        assert_eq!(machine_name(elf::EM_PPC64), "ppc64le");
        assert_eq!(machine_name(9999), "machine 9999");
        assert_eq!(handled_list(), "x86-64, aarch64, ppc64le");
    }
}
