//! What a kernel handle names: the mangled name, its rendering, and where it came from.

use super::demangle::demangle;
pub use ingero_trace::model::{KernelName, NameSource};

/// The mark appended to the shown name of a kernel whose name could not be read in full.
pub const TRUNCATION_MARK: &str = "…";

/// Builds the name from the bytes a probe or symbol table gave (invalid UTF-8 is replaced,
/// which a mangled name never contains), demangling it when complete.
pub fn new_name(mangled: &[u8], source: NameSource, truncated: bool) -> KernelName {
    let mangled = String::from_utf8_lossy(mangled);
    let demangled = if truncated {
        format!("{mangled}{TRUNCATION_MARK}")
    } else {
        demangle(&mangled).unwrap_or_else(|| mangled.to_string())
    };
    KernelName {
        mangled: mangled.into(),
        demangled: demangled.into(),
        source,
        truncated,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_have_stable_names() {
        let names: Vec<_> = [
            NameSource::Registration,
            NameSource::DriverModule,
            NameSource::DriverLibrary,
            NameSource::ElfSymtab,
            NameSource::ElfDynsym,
        ]
        .into_iter()
        .map(NameSource::as_str)
        .collect();
        assert_eq!(
            names,
            [
                "registration",
                "cuModuleGetFunction",
                "cuLibraryGetKernel",
                "symtab",
                "dynsym"
            ]
        );
    }

    #[test]
    fn complete_names_are_demangled_and_plain_ones_kept() {
        let name = new_name(
            b"_ZN4demo5scaleILi4EEEvPffi",
            NameSource::Registration,
            false,
        );
        assert_eq!(&*name.demangled, "void demo::scale<4>(float*, float, int)");
        assert_eq!(&*name.mangled, "_ZN4demo5scaleILi4EEEvPffi");
        let triton = new_name(b"triton_poi_fused_add_0", NameSource::DriverModule, false);
        assert_eq!(&*triton.demangled, "triton_poi_fused_add_0");
    }

    #[test]
    fn a_name_cut_at_256_bytes_is_shown_raw_with_a_mark() {
        let mut full = String::from("_ZN2at6native29vectorized_elementwise_kernelILi4E");
        while full.len() < 400 {
            full.push_str("NS0_10AbsFunctorIfEE");
        }
        let cut = &full.as_bytes()[..256];
        let name = new_name(cut, NameSource::Registration, true);
        assert!(name.truncated);
        assert_eq!(name.mangled.len(), 256);
        assert!(name.demangled.ends_with(TRUNCATION_MARK));
        assert!(name.demangled.starts_with(&*name.mangled));
    }

    #[test]
    fn a_cut_name_that_would_parse_is_still_not_demangled() {
        // `_ZN4demo5scaleILi4EEEvPf` parses (as a one-parameter function): showing that would
        // be a wrong signature, so a truncated name is never demangled.
        let name = new_name(b"_ZN4demo5scaleILi4EEEvPf", NameSource::Registration, true);
        assert_eq!(&*name.demangled, "_ZN4demo5scaleILi4EEEvPf…");
    }

    #[test]
    fn lambda_forms_keep_the_raw_name_when_they_do_not_demangle() {
        let raw = "_ZZN2at6native18launch_vectorized_kernelIZZZNS0_23direct_copy_kernel_cudaERNS_18TensorIteratorBaseEENKUlvE_clEvENKUlvE0_clEvEUlfE_St5arrayIPcLm2EEEEviiT_T0_ENKUlvE_clEv";
        let name = new_name(raw.as_bytes(), NameSource::Registration, false);
        // Either rendered or raw; never empty, never marked.
        assert!(!name.demangled.is_empty());
        assert!(!name.demangled.ends_with(TRUNCATION_MARK));
        let cut = new_name(&raw.as_bytes()[..60], NameSource::Registration, false);
        assert_eq!(
            &*cut.demangled,
            &raw[..60],
            "an unparsable name is kept raw"
        );
    }
}
