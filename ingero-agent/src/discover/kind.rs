//! Which NVIDIA library a file is (the runtime `libcudart`, the driver `libcuda` or NCCL's
//! `libnccl`), its version as the file name tells it, and the symbols ingero probes in each.
//!
//! The kind decides which ops of [`CudaOp::ALL`] are attached to a file, so it is read from the
//! file name first (the names are fixed by NVIDIA's packaging) and, for a copy under another
//! name (`--cuda-lib /tmp/x.so`), from what the file exports.

use std::path::Path;

use ingero_ebpf::{CudaLibrary, CudaOp};

/// The library a file name belongs to: `libcudart.so`, `libcudart.so.<anything>` is the
/// runtime; `libcuda.so`, `libcuda.so.<anything>` the driver; `libnccl.so`,
/// `libnccl.so.<anything>` NCCL. Look-alikes (`libcudadebugger.so.1`, `libcudart_static.a`,
/// `libcuda.so-old`, `libnccl-net.so`) are none of them.
pub fn kind_from_name(name: &str) -> Option<CudaLibrary> {
    let is = |stem: &str| {
        name.strip_prefix(stem)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
    };
    if is("libcudart.so") {
        Some(CudaLibrary::Runtime)
    } else if is("libcuda.so") {
        Some(CudaLibrary::Driver)
    } else if is("libnccl.so") {
        Some(CudaLibrary::Nccl)
    } else {
        None
    }
}

/// [`kind_from_name`] of a path's last component.
pub fn kind_from_path(path: &Path) -> Option<CudaLibrary> {
    path.file_name()
        .and_then(|n| n.to_str())
        .and_then(kind_from_name)
}

/// The version a file name carries after `.so.`: `12.9.79` for `libcudart.so.12.9.79`,
/// `535.261.03` for `libcuda.so.535.261.03`, `12` for `libcudart.so.12`; `None` for a bare
/// `libcuda.so` or a suffix that is not dotted numbers.
pub fn version_from_name(name: &str) -> Option<String> {
    kind_from_name(name)?;
    let (_, version) = name.split_once(".so.")?;
    let numeric = !version.is_empty()
        && version
            .split('.')
            .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()));
    numeric.then(|| version.to_string())
}

/// The most precise version the path's name or, when it is a symlink, its target's name
/// gives (`libcuda.so.1 -> libcuda.so.535.261.03` gives `535.261.03`); `None` when neither
/// name has one.
pub fn version_of(path: &Path) -> Option<String> {
    let name_of = |p: &Path| {
        p.file_name()
            .and_then(|n| n.to_str())
            .and_then(version_from_name)
    };
    let own = name_of(path);
    let target = std::fs::canonicalize(path).ok().and_then(|t| name_of(&t));
    let parts = |v: &Option<String>| v.as_deref().map_or(0, |v| v.split('.').count());
    if parts(&target) > parts(&own) {
        target
    } else {
        own
    }
}

/// Symbols whose export marks a library of each kind, beyond the probed ones: `cudaMalloc` is in
/// every libcudart, `cuInit` in every libcuda, `ncclGetVersion` in every libnccl.
const MARKERS: [(CudaLibrary, &str); 3] = [
    (CudaLibrary::Runtime, "cudaMalloc"),
    (CudaLibrary::Driver, "cuInit"),
    (CudaLibrary::Nccl, "ncclGetVersion"),
];

/// The kind a library is by what it exports: the kind with the most marker or probed symbols
/// exported; `None` when it exports none of any, or as many of two kinds as the most.
pub fn kind_from_exports<'a>(exports: impl IntoIterator<Item = &'a str>) -> Option<CudaLibrary> {
    let probed = CudaLibrary::ALL.map(probed_symbols);
    let mut hits = [0usize; CudaLibrary::ALL.len()];
    for name in exports {
        for (i, kind) in CudaLibrary::ALL.iter().enumerate() {
            if MARKERS.iter().any(|(k, m)| k == kind && *m == name) || probed[i].contains(&name) {
                hits[i] += 1;
            }
        }
    }
    let most = hits.iter().copied().max().unwrap_or(0);
    let mut leaders = CudaLibrary::ALL
        .iter()
        .zip(hits)
        .filter(|(_, n)| *n == most);
    match (most, leaders.next(), leaders.next()) {
        (1.., Some((kind, _)), None) => Some(*kind),
        _ => None,
    }
}

/// Every exported symbol ingero attaches to in a library of this kind, in table order.
pub fn probed_symbols(kind: CudaLibrary) -> Vec<&'static str> {
    CudaOp::ALL
        .iter()
        .filter(|op| op.library() == kind)
        .flat_map(|op| op.exports().map(|(symbol, _, _)| symbol))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_the_runtime_and_the_driver_are_told_apart() {
        for name in [
            "libcudart.so",
            "libcudart.so.12",
            "libcudart.so.12.9.79",
            "libcudart.so.13",
        ] {
            assert_eq!(kind_from_name(name), Some(CudaLibrary::Runtime), "{name}");
        }
        for name in ["libcuda.so", "libcuda.so.1", "libcuda.so.535.261.03"] {
            assert_eq!(kind_from_name(name), Some(CudaLibrary::Driver), "{name}");
        }
        for name in ["libnccl.so", "libnccl.so.2", "libnccl.so.2.27.5"] {
            assert_eq!(kind_from_name(name), Some(CudaLibrary::Nccl), "{name}");
        }
        for name in [
            "libcudadebugger.so.1",
            "libcudart_static.a",
            "libcuda.so-old",
            "libcudnn.so.9",
            "libc.so.6",
            "libcuda",
            "xlibcuda.so.1",
            "libnccl-net.so",
            "libnccl_static.a",
        ] {
            assert_eq!(kind_from_name(name), None, "{name}");
        }
    }

    #[test]
    fn versions_come_from_the_name_after_so() {
        assert_eq!(
            version_from_name("libcudart.so.12.9.79").as_deref(),
            Some("12.9.79")
        );
        assert_eq!(
            version_from_name("libcuda.so.535.261.03").as_deref(),
            Some("535.261.03")
        );
        assert_eq!(version_from_name("libcudart.so.13").as_deref(), Some("13"));
        assert_eq!(
            version_from_name("libnccl.so.2.27.5").as_deref(),
            Some("2.27.5")
        );
        assert_eq!(version_from_name("libcuda.so"), None);
        assert_eq!(version_from_name("libcuda.so.1.bak"), None);
        assert_eq!(version_from_name("libcudnn.so.9.1"), None);
    }

    #[test]
    fn a_symlinks_target_gives_the_more_precise_version() {
        let dir = std::env::temp_dir().join(format!("ingero-version-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        let real = dir.join("libcuda.so.535.261.03");
        std::fs::write(&real, b"\x7fELF").expect("write");
        let link = dir.join("libcuda.so.1");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        assert_eq!(version_of(&link).as_deref(), Some("535.261.03"));
        assert_eq!(version_of(&real).as_deref(), Some("535.261.03"));
        let plain = dir.join("libcudart.so.13");
        std::fs::write(&plain, b"\x7fELF").expect("write");
        assert_eq!(version_of(&plain).as_deref(), Some("13"));
        let renamed = dir.join("copy.so");
        std::fs::write(&renamed, b"\x7fELF").expect("write");
        assert_eq!(version_of(&renamed), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn exports_decide_the_kind_of_an_oddly_named_copy() {
        assert_eq!(
            kind_from_exports(["cuInit", "cuDriverGetVersion"]),
            Some(CudaLibrary::Driver)
        );
        assert_eq!(
            kind_from_exports(["cudaMalloc", "cudaFree", "cuInit"]),
            Some(CudaLibrary::Runtime)
        );
        assert_eq!(
            kind_from_exports(["ncclGetVersion", "ncclAllReduce", "cuInit"]),
            Some(CudaLibrary::Nccl)
        );
        assert_eq!(kind_from_exports(["cudaMalloc", "cuInit"]), None);
        assert_eq!(kind_from_exports(["malloc", "free"]), None);
        assert_eq!(kind_from_exports([]), None);
    }

    #[test]
    fn probed_symbols_follow_the_op_table() {
        let runtime = probed_symbols(CudaLibrary::Runtime);
        assert!(runtime.contains(&"cudaMalloc"));
        assert!(runtime.contains(&"cudaLaunchKernel_ptsz"));
        let total: usize = CudaOp::ALL.iter().map(|op| op.exports().count()).sum();
        assert_eq!(
            runtime.len()
                + probed_symbols(CudaLibrary::Driver).len()
                + probed_symbols(CudaLibrary::Nccl).len(),
            total
        );
        assert!(probed_symbols(CudaLibrary::Nccl).contains(&"ncclAllReduceConfig"));
    }
}
