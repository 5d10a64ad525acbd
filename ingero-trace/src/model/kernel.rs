//! What the agent knows about a CUDA call beyond its arguments: the export that fired, the
//! traced call it ran inside of, and for launches the kernel's name ([`CallDetail`]).

use std::sync::Arc;

use ingero_ebpf::CudaOp;

/// Where a kernel's name came from: users can tell a device name from a host-side symbol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NameSource {
    /// `__cudaRegisterFunction`: the device name the runtime registered (exact).
    Registration,
    /// `cuModuleGetFunction`: the name the driver was asked for (exact).
    DriverModule,
    /// `cuLibraryGetKernel`: the name the driver was asked for (exact).
    DriverLibrary,
    /// The host stub's `.symtab` symbol (a process that registered before tracing began): the
    /// host-side name, which differs from the device name for lambda and internal kernels.
    ElfSymtab,
    /// The host stub's `.dynsym` symbol (no `.symtab`): as [`Self::ElfSymtab`].
    ElfDynsym,
}

impl NameSource {
    /// Every source, in declaration order.
    pub const ALL: [NameSource; 5] = [
        NameSource::Registration,
        NameSource::DriverModule,
        NameSource::DriverLibrary,
        NameSource::ElfSymtab,
        NameSource::ElfDynsym,
    ];

    /// As written in recordings and JSON.
    pub const fn as_str(self) -> &'static str {
        match self {
            NameSource::Registration => "registration",
            NameSource::DriverModule => "cuModuleGetFunction",
            NameSource::DriverLibrary => "cuLibraryGetKernel",
            NameSource::ElfSymtab => "symtab",
            NameSource::ElfDynsym => "dynsym",
        }
    }

    /// Reads [`Self::as_str`]'s output.
    pub fn from_text(text: &str) -> Option<NameSource> {
        Self::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

/// A kernel's name: as compiled (mangled) and as users read it (demangled, or the mangled
/// text when it does not demangle, such as Triton's `triton_poi_fused_add_0`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KernelName {
    /// The name as the binary has it.
    pub mangled: Arc<str>,
    /// The demangled name (`void demo::scale<4>(float*, float, int)`), ending in `…` when
    /// [`Self::truncated`].
    pub demangled: Arc<str>,
    /// Where the name came from.
    pub source: NameSource,
    /// The name was cut (only its beginning could be read): shown with a trailing `…`.
    pub truncated: bool,
}

/// A CUDA call's context: which export fired, what it ran inside of, which kernel it launched.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CallDetail {
    /// The export that fired when it is not the op's own name (`cuMemAlloc_v2`,
    /// `cudaLaunchKernel_ptsz`).
    pub symbol: Option<&'static str>,
    /// The traced call this one ran inside of on the same thread (a runtime call that entered
    /// the driver): the call is part of its parent's work and counted once, as the parent.
    pub parent: Option<CudaOp>,
    /// The launched kernel, when its name is known.
    pub kernel: Option<Arc<KernelName>>,
}

impl CallDetail {
    /// The export named by its text, when it is one of `op`'s (recordings store the text).
    pub fn symbol_of(op: CudaOp, text: &str) -> Option<&'static str> {
        op.symbols()
            .iter()
            .chain(op.legacy_symbols())
            .find(|s| **s == text)
            .copied()
    }
}
