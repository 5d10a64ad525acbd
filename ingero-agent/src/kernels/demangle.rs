//! Itanium C++ demangling of kernel names, bounded in input, output and time.
//!
//! CUDA kernel names are Itanium-mangled C++ (`_ZN4demo5scaleILi4EEEvPffi`); Triton and other
//! JIT kernels have plain names (`triton_poi_fused_add_0`). `cpp_demangle` parses with a
//! recursion limit (96) and demangles with another (128), so deep template nesting cannot
//! overflow the stack; what it does not bound is the output, which back-references can
//! make much longer than the input. The writer below stops at [`MAX_DEMANGLED_LEN`] bytes,
//! and since demangling time is proportional to the text written, that bounds the time too.

use std::fmt;

use cpp_demangle::{DemangleOptions, DemangleWrite, Symbol};

/// Longest mangled name demangled. The longest libtorch_cuda kernel name is 2,301 bytes; user
/// space completes names up to this length (`user_memory::MAX_NAME_LEN`).
pub(crate) const MAX_MANGLED_LEN: usize = 4096;

/// Longest demangled text kept; a longer rendering counts as a failure (the raw name is kept).
pub(crate) const MAX_DEMANGLED_LEN: usize = 16 * 1024;

/// The c++filt rendering of `mangled` (`void demo::scale<4>(float*, float, int)`), or `None`
/// when it is not an Itanium name, does not parse (a truncated name, some `__nv_*` lambda
/// forms), or renders longer than [`MAX_DEMANGLED_LEN`].
pub fn demangle(mangled: &str) -> Option<String> {
    if !mangled.starts_with("_Z") || mangled.len() > MAX_MANGLED_LEN {
        return None;
    }
    let symbol = Symbol::new(mangled.as_bytes()).ok()?;
    let mut out = BoundedText::default();
    // The default options render like c++filt: return type, parameters, and integer
    // template arguments without a cast (`scale<4>`, not `scale<(int)4>`).
    symbol
        .structured_demangle(&mut out, &DemangleOptions::new())
        .ok()?;
    Some(out.text)
}

/// A demangling sink that refuses to grow past [`MAX_DEMANGLED_LEN`]: the error it returns
/// stops `cpp_demangle` at once.
#[derive(Default)]
struct BoundedText {
    text: String,
}

impl DemangleWrite for BoundedText {
    fn write_string(&mut self, s: &str) -> fmt::Result {
        if self.text.len() + s.len() > MAX_DEMANGLED_LEN {
            return Err(fmt::Error);
        }
        self.text.push_str(s);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_templates_like_cxxfilt() {
        assert_eq!(
            demangle("_ZN4demo5scaleILi4EEEvPffi").as_deref(),
            Some("void demo::scale<4>(float*, float, int)")
        );
        assert_eq!(
            demangle("_Z19compute_cuda_kernelIiEvPKT_").as_deref(),
            Some("void compute_cuda_kernel<int>(int const*)")
        );
    }

    #[test]
    fn renders_internal_linkage_host_stubs() {
        // The host stub's `L` (internal linkage) does not show in the rendering.
        assert_eq!(
            demangle("_ZN4demoL5scaleILi4EEEvPffi").as_deref(),
            Some("void demo::scale<4>(float*, float, int)")
        );
    }

    #[test]
    fn renders_a_libtorch_device_name() {
        let text = demangle(
            "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_10AbsFunctorIfEESt5arrayIPcLm2EELb0EEEviT0_T1_",
        )
        .expect("demangles");
        assert!(
            text.starts_with(
                "void at::native::vectorized_elementwise_kernel<4, at::native::AbsFunctor<float>"
            ),
            "{text}"
        );
    }

    #[test]
    fn plain_and_broken_names_are_not_demangled() {
        assert_eq!(demangle("triton_poi_fused_add_0"), None);
        assert_eq!(demangle("__nv_static_51__kernel"), None);
        assert_eq!(
            demangle("_ZN4demo5scaleILi4EE"),
            None,
            "cut inside the encoding"
        );
        assert_eq!(demangle(""), None);
        assert_eq!(
            demangle(&format!("_Z{}", "N".repeat(5000))),
            None,
            "over the input bound"
        );
    }

    #[test]
    fn deep_nesting_fails_instead_of_overflowing_the_stack() {
        // 2,000 nested template levels: past the parser's recursion limit.
        let deep = format!("_Z1f{}vE", "I1A".repeat(2000));
        assert_eq!(demangle(&deep), None);
    }

    #[test]
    fn long_names_render() {
        // A 2.3 kB name of the shape libtorch has: many template arguments, each distinct.
        let mut mangled = String::from("_ZN2at6native6kernelIJ");
        let mut i = 0;
        while mangled.len() < 2300 {
            mangled.push_str(&format!("N10outer{}5innerIfEE", 10_000 + i));
            i += 1;
        }
        mangled.push_str("EEEvv");
        let text = demangle(&mangled).expect("a 2.3 kB name demangles");
        assert!(
            text.starts_with("void at::native::kernel<outer10000::inner<float>"),
            "{text}"
        );
    }

    /// `f(A, std::pair<A, A>, std::pair<pair<A, A>, pair<A, A>>, …)`: each parameter names the
    /// previous one twice through a substitution, so the text doubles per parameter while
    /// the mangled name grows by a few bytes.
    fn doubling_name(levels: usize) -> String {
        let mut mangled = String::from("_Z1f1ASt4pairIS_S_E");
        for level in 0..levels {
            // Substitution 2 + level is the previous parameter (S1_, S2_, …, base 36).
            let id = 1 + level;
            let digits = if id < 10 {
                id.to_string()
            } else {
                char::from(b'A' + (id - 10) as u8).to_string()
            };
            mangled.push_str(&format!("S0_IS{digits}_S{digits}_E"));
        }
        mangled
    }

    #[test]
    fn output_is_bounded() {
        let small = demangle(&doubling_name(3)).expect("a small one renders");
        assert!(
            small.starts_with("f(A, std::pair<A, A>, std::pair<std::pair<A, A>"),
            "{small}"
        );
        // 8 levels render to some 15 kB, under the bound; 9 to 30 kB, over it.
        assert!(demangle(&doubling_name(8)).is_some_and(|text| text.len() > 10_000));
        assert_eq!(demangle(&doubling_name(9)), None);
        // 24 levels would render to about 1 GB: refused as soon as the text passes the bound.
        let started = std::time::Instant::now();
        assert_eq!(demangle(&doubling_name(24)), None);
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
    }
}
