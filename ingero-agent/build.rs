//! Chooses the eBPF object the agent embeds: the committed one, or the one named by
//! `INGERO_EBPF_OBJECT` (CI sets it to a rebuilt object when the toolchain moved on).

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=INGERO_EBPF_OBJECT");
    let path = match std::env::var("INGERO_EBPF_OBJECT") {
        Ok(p) if !p.is_empty() => PathBuf::from(p),
        _ => {
            let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
            manifest.join("../ingero-ebpf/prebuilt/ingero-ebpf.o")
        }
    };
    println!("cargo:rerun-if-changed={}", path.display());
    println!("cargo:rustc-env=INGERO_EBPF_OBJECT_PATH={}", path.display());
}
