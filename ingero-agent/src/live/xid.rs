//! The line `ingero trace` prints on stderr when the NVIDIA driver reports a GPU fault: which
//! GPU, which code and what it means, whose process, and what to do.

use ingero_trace::model::XidReport;

/// `GPU 0000:3b:00 reported Xid 79 (GPU has fallen off the bus; hardware) for pid 1234
/// (python3): drain the node …`.
pub fn xid_line(x: &XidReport) -> String {
    let info = x.info();
    let mut line = format!(
        "{} reported {} ({}; {})",
        x.reporter(),
        x.name(),
        info.meaning,
        info.severity.text()
    );
    match (x.pid, &x.process) {
        (Some(pid), Some(name)) => line.push_str(&format!(" for pid {pid} ({name})")),
        (Some(pid), None) => line.push_str(&format!(" for pid {pid}")),
        _ => {}
    }
    line.push_str(": ");
    line.push_str(info.action);
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use ingero_trace::model::parse_xid;

    #[test]
    fn names_the_gpu_the_code_the_process_and_the_advice() {
        let x = parse_xid(
            "NVRM: Xid (PCI:0000:b7:00): 48, pid=91237, name=python3, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0.",
        )
        .expect("an Xid line");
        let line = xid_line(&x);
        assert!(
            line.starts_with("GPU 0000:b7:00 reported Xid 48 ("),
            "{line}"
        );
        assert!(
            line.contains("; hardware) for pid 91237 (python3): "),
            "{line}"
        );
        assert!(line.ends_with(x.info().action), "{line}");
    }

    #[test]
    fn an_nvswitch_fault_names_no_process() {
        let x = parse_xid(
            "nvidia-nvswitch3: SXid (PCI:0000:c6:00.0): 24007, Fatal, Link 48 sourcetrack TCEN0 crumbstore ECC DBE Error (First)",
        )
        .expect("an SXid line");
        let line = xid_line(&x);
        assert!(
            line.starts_with("NVSwitch 0000:c6:00.0 reported SXid 24007 ("),
            "{line}"
        );
        assert!(!line.contains(" for pid "), "{line}");
    }
}
