//! What an NVIDIA driver fault line says: its Xid code, the GPU, the process, and what to do.
//!
//! The NVIDIA kernel driver reports GPU faults as "Xid" lines in the kernel log
//! (`NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the
//! bus.`), and the NVSwitch driver reports switch faults the same way as "SXid" lines. The agent
//! captures the NVIDIA driver's messages from the kernel's printk tracepoint; this module reads
//! what such a line says ([`parse_xid`]) and explains its code from NVIDIA's published Xid
//! catalog ([`xid_info`]), so a trace can say why a GPU's work stopped and whose fault it was.

/// One Xid or SXid line, as the driver printed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XidReport {
    /// The Xid (or SXid) code.
    pub code: u32,
    /// The GPU's (or NVSwitch's) PCI bus id as printed, without `PCI:` (`0000:3b:00`).
    pub pci: String,
    /// On a MIG GPU, the instance the driver attributed the fault to (`GPU-I:01 GPU-CI:02`).
    pub mig: Option<String>,
    /// The process the driver blamed; `None` when it printed none or `'<unknown>'`.
    pub pid: Option<u32>,
    /// That process's name; `None` when it printed none or `<unknown>`.
    pub process: Option<String>,
    /// The rest of the message, after the code and the pid and name fields, trimmed.
    pub detail: String,
    /// Whether this is an NVSwitch (SXid) line.
    pub switch: bool,
}

impl XidReport {
    /// `Xid 79`, or `SXid 24007` for an NVSwitch's.
    pub fn name(&self) -> String {
        let kind = if self.switch { "SXid" } else { "Xid" };
        format!("{kind} {}", self.code)
    }

    /// What reported it: `GPU 0000:3b:00` (with its MIG instance, if any), or
    /// `NVSwitch 0000:c6:00.0`.
    pub fn reporter(&self) -> String {
        let what = if self.switch { "NVSwitch" } else { "GPU" };
        format!("{what} {}", self.device())
    }

    /// The bus id, with the MIG instance when the driver named one (`0000:3b:00 GPU-I:01`).
    pub fn device(&self) -> String {
        match &self.mig {
            Some(m) => format!("{} {m}", self.pci),
            None => self.pci.clone(),
        }
    }

    /// What the code means and what to do about it.
    pub fn info(&self) -> XidInfo {
        if self.switch {
            // SXid codes are documented per switch generation in the Fabric Manager guide; the
            // one thing every SXid line says for itself is whether it was fatal.
            sxid_info(self.detail.starts_with("Fatal"))
        } else {
            xid_info(self.code)
        }
    }
}

/// Reads an Xid or SXid line; `None` for any other text (another driver message, a line cut
/// short before its code is complete).
pub fn parse_xid(text: &str) -> Option<XidReport> {
    let (switch, after) = find_marker(text)?;
    let (inside, after) = after.split_once(')')?;
    // On a MIG GPU the bus id is followed by the instance the fault is attributed to
    // (`PCI:0000:3b:00 GPU-I:01 GPU-CI:02`).
    let (bus, mig) = match inside.split_once(' ') {
        Some((bus, mig)) => (bus, Some(mig.trim())),
        None => (inside, None),
    };
    if mig.is_some_and(|m| !m.split_whitespace().all(|t| t.starts_with("GPU-"))) {
        return None;
    }
    // Older drivers printed the bus id without the `PCI:` prefix (`Xid (0000:03:00): 14, ...`).
    let pci = bus.strip_prefix("PCI:").unwrap_or(bus);
    let bus_id = |c: char| c.is_ascii_hexdigit() || c == ':' || c == '.';
    if pci.is_empty() || !pci.chars().all(bus_id) {
        return None;
    }
    // The driver always prints a comma after the code, so a line cut inside the code (`79`
    // cut to `7`) is not read as another code.
    let (code, rest) = after.strip_prefix(':')?.trim_start().split_once(',')?;
    if code.is_empty() || !code.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let code = code.parse().ok()?;
    let mut rest = rest.trim();
    let mut pid = None;
    let mut process = None;
    if let Some(field) = rest.strip_prefix("pid=") {
        let (value, tail) = split_field(field);
        pid = known(value).and_then(|value| value.parse().ok());
        rest = tail;
    }
    if let Some(field) = rest.strip_prefix("name=") {
        let (value, tail) = split_field(field);
        process = known(value).map(str::to_owned);
        rest = tail;
    }
    Some(XidReport {
        code,
        pci: pci.to_owned(),
        mig: mig.filter(|m| !m.is_empty()).map(str::to_owned),
        pid,
        process,
        detail: rest.to_owned(),
        switch,
    })
}

/// Finds `Xid (` or `SXid (` as a word of its own; returns whether it is an SXid and the text
/// after the parenthesis.
fn find_marker(text: &str) -> Option<(bool, &str)> {
    for (at, marker) in text.match_indices("Xid (") {
        let (before, after) = text.split_at_checked(at)?;
        let after = after.strip_prefix(marker)?;
        let stem = before.strip_suffix('S');
        let last = stem.unwrap_or(before).chars().next_back();
        if last.is_none_or(|c| !c.is_alphanumeric()) {
            return Some((stem.is_some(), after));
        }
    }
    None
}

/// Splits `value, tail` at its first comma, both trimmed; a field with no comma is the last.
fn split_field(field: &str) -> (&str, &str) {
    let (value, tail) = field.split_once(',').unwrap_or((field, ""));
    (value.trim(), tail.trim())
}

/// A field's value without its quotes; `None` for the driver's `<unknown>` or an empty value.
fn known(value: &str) -> Option<&str> {
    let value = value.trim_matches('\'');
    (!value.is_empty() && value != "<unknown>").then_some(value)
}

/// Whose fault an Xid is, which says who has to act.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XidSeverity {
    /// The GPU, its memory or its link failed: drain the node, reset or replace the GPU.
    Hardware,
    /// The driver or GSP firmware failed: reset the GPU, update the driver.
    Driver,
    /// The application's own fault, e.g. an illegal address: fix the code; the GPU is fine.
    Application,
    /// An error already corrected, or a change recorded (a row remapped, a corrected link
    /// error): nothing to do now, but worth watching.
    Info,
    /// A code ingero's catalog does not know.
    Unknown,
}

impl XidSeverity {
    /// The severity's name: `hardware`, `driver`, `application`, `info` or `unknown`.
    pub fn text(self) -> &'static str {
        match self {
            Self::Hardware => "hardware",
            Self::Driver => "driver",
            Self::Application => "application",
            Self::Info => "info",
            Self::Unknown => "unknown",
        }
    }

    /// Whether the GPU is suspect, so that work on it should not simply be restarted.
    pub fn is_fatal_to_work(self) -> bool {
        matches!(self, Self::Hardware | Self::Driver)
    }
}

/// What an Xid code means and what to do about it.
#[derive(Clone, Copy, Debug)]
pub struct XidInfo {
    /// A short description (`GPU has fallen off the bus`).
    pub meaning: &'static str,
    /// Whose fault it is.
    pub severity: XidSeverity,
    /// What to do about it.
    pub action: &'static str,
}

/// What Xid `code` means; a code not in ingero's catalog gives meaning `not in ingero's
/// catalog` and severity [`XidSeverity::Unknown`].
pub fn xid_info(code: u32) -> XidInfo {
    let (severity, action) = judgment(code);
    XidInfo {
        meaning: meaning(code),
        severity,
        action,
    }
}

/// What an NVSwitch SXid means, by whether its line says it was fatal.
pub fn sxid_info(fatal: bool) -> XidInfo {
    let (meaning, severity, action) = match fatal {
        true => ("NVSwitch fatal error", XidSeverity::Hardware, SWITCH_FATAL),
        false => (
            "NVSwitch non-fatal error",
            XidSeverity::Info,
            SWITCH_NON_FATAL,
        ),
    };
    XidInfo {
        meaning,
        severity,
        action,
    }
}

/// The meaning of an uncatalogued code.
const NOT_CATALOGUED: &str = "not in ingero's catalog";

/// NVIDIA's Xid catalog, in ingero's words. A code whose meaning ingero is not sure of is left
/// out rather than guessed.
fn meaning(code: u32) -> &'static str {
    match code {
        8 => "GPU stopped processing (idle timeout)",
        13 => "graphics engine exception (often an out-of-range access in a kernel)",
        31 => "GPU memory page fault (often an illegal address in a kernel)",
        32 => "invalid or corrupted push buffer stream (often a PCIe fault)",
        38 => "driver firmware error (FECS watchdog timeout)",
        43 => "GPU stopped processing (a kernel was killed or hung)",
        45 => "preemptive cleanup after an earlier error or a killed process",
        48 => "double-bit ECC error",
        56 => "display engine error",
        57 => "error programming the video memory interface",
        61 => "internal micro-controller breakpoint or warning",
        62 => "internal micro-controller halt",
        63 => "ECC page retirement or row remapping recorded",
        64 => "ECC page retirement or row remapping failed",
        65 => "video processor exception (NVENC1 encoder)",
        68 => "video processor exception (NVDEC0 decoder)",
        69 => "graphics engine class error",
        74 => "NVLink error",
        79 => "GPU has fallen off the bus",
        92 => "high single-bit ECC error rate",
        94 => "contained ECC error",
        95 => "uncontained ECC error",
        109 => "context switch timeout",
        119 => "GSP firmware RPC timeout",
        120 => "GSP firmware error",
        121 => "corrected error on the C2C link to the Grace CPU",
        122 => "SPI PMU RPC read failure",
        123 => "SPI PMU RPC write failure",
        140 => "unrecovered ECC error (memory could not be retired or remapped)",
        143 => "GPU initialization error",
        // Blackwell's NVLink 5 units (SAW, RLW, TLW, TREX, NVLPW_CTRL, NETIR, MSE), one code each.
        144..=150 => "NVLink 5 error (the detail names the failing unit)",
        154 => "GPU recovery action changed (reset or reboot required)",
        155 => "NVLink link taken down on purpose (software-defined error)",
        _ => NOT_CATALOGUED,
    }
}

// Actions, most of them shared by several codes.
const FIX_APP: &str = "debug the application (compute-sanitizer, cuda-gdb); the GPU is fine";
const RESET: &str = "drain the node and reset the GPU; replace it if the error recurs";
const RESET_UPDATE: &str = "reset the GPU; update the driver if the error recurs";
const RESTART_UPDATE: &str = "restart the application; update the driver if the error recurs";
const NVLINK: &str = "reset the GPU or reboot; check `nvidia-smi nvlink`, the far end may fail";
const AFTER: &str = "see the Xid logged before it; alone it only means a process was stopped";
const REMAP: &str = "none now; reset the GPU when convenient so the remapping takes effect";
const REBOOT: &str = "reboot the node; check PCIe, power and cooling; replace the GPU if it recurs";
const WATCH: &str = "none now (corrected); replace the GPU if the ECC counts keep climbing";
const RESTART: &str = "restart the application that hit it; reset the GPU when convenient";
const RETRAIN: &str = "none now; reset the GPU at a service window to retrain the link";
const RECOVER: &str = "do what the detail says (drain P2P, GPU reset or node reboot)";
const LINK_DOWN: &str = "reset the GPU; find out what took the link down";
const LOOK_UP: &str = "look the code up in NVIDIA's Xid catalog";
const SWITCH_FATAL: &str = "drain the node; reset the NVSwitches and GPUs (or reboot)";
const SWITCH_NON_FATAL: &str = "none now; look the SXid up in the Fabric Manager guide";

/// Whose fault each catalogued code is, and what to do about it.
fn judgment(code: u32) -> (XidSeverity, &'static str) {
    use XidSeverity::{Application, Driver, Hardware, Info, Unknown};
    match code {
        13 | 31 | 43 => (Application, FIX_APP),
        45 => (Application, AFTER),
        32 | 48 | 57 | 64 | 95 | 122 | 123 | 140 | 143 => (Hardware, RESET),
        63 => (Info, REMAP),
        74 | 144..=150 => (Hardware, NVLINK),
        79 => (Hardware, REBOOT),
        92 => (Info, WATCH),
        94 => (Hardware, RESTART),
        121 => (Info, RETRAIN),
        154 => (Hardware, RECOVER),
        38 | 56 | 61 | 62 | 109 | 119 | 120 => (Driver, RESET_UPDATE),
        8 | 65 | 68 | 69 => (Driver, RESTART_UPDATE),
        155 => (Driver, LINK_DOWN),
        _ => (Unknown, LOOK_UP),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use XidSeverity::{Application, Driver, Hardware, Info, Unknown};

    /// Lines the drivers print, in today's and older formats, the NVSwitch line last.
    const LINES: [&str; 10] = [
        "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the \
         bus.",
        "NVRM: Xid (PCI:0000:01:00): 31, pid=2768, name=python, Ch 00000008, intr 00000000. MMU \
         Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f1d_e4000000. Fault is of type \
         FAULT_PDE ACCESS_TYPE_VIRT_READ",
        "NVRM: Xid (PCI:0000:00:1e): 13, Graphics SM Warp Exception on (GPC 0, TPC 0): Out Of \
         Range Address",
        "NVRM: Xid (PCI:0000:b7:00): 48, pid=91237, name=python3, An uncorrectable double bit \
         error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0.",
        "NVRM: Xid (PCI:0000:18:00): 94, pid=12345, name=pt_main_thread, Contained: SM (0x1). \
         RST: No, D-RST: No",
        "NVRM: Xid (PCI:0000:3b:00): 119, pid=1, name=systemd, Timeout after 6s of waiting for \
         RPC response from GPU0 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20801348 0x8).",
        "NVRM: Xid (PCI:0000:3b:00): 31, pid=abc, name=train, Ch 00000008",
        "NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping",
        "[  966.5] NVRM: Xid (0000:01:00): 31, Ch 0000000b, engmask 00000120, intr 10000000",
        "nvidia-nvswitch3: SXid (PCI:0000:c6:00.0): 24007, Fatal, Link 48 sourcetrack TCEN0 \
         crumbstore ECC DBE Error (First)",
    ];
    /// What each of [`LINES`] says: code, bus id, pid, process (`-` for none), and the words its
    /// detail starts with (it runs to the end of the line).
    const SAYS: [&str; 10] = [
        "79 0000:3b:00 - - GPU has",
        "31 0000:01:00 2768 python Ch 00000008",
        "13 0000:00:1e - - Graphics SM",
        "48 0000:b7:00 91237 python3 An uncorrectable",
        "94 0000:18:00 12345 pt_main_thread Contained:",
        "119 0000:3b:00 1 systemd Timeout after",
        "31 0000:3b:00 - train Ch 00000008",
        "63 0000:10:1c 1896 - Row Remapper",
        "31 0000:01:00 - - Ch 0000000b",
        "24007 0000:c6:00.0 - - Fatal, Link",
    ];

    #[test]
    fn reads_the_drivers_lines() {
        for (line, says) in LINES.into_iter().zip(SAYS) {
            let says: Vec<&str> = says.splitn(5, ' ').collect();
            let [code, pci, pid, process, start]: [&str; 5] = says.try_into().unwrap();
            let given = |field: &str| (field != "-").then(|| field.to_owned());
            let expected = XidReport {
                code: code.parse().unwrap(),
                pci: pci.to_owned(),
                mig: None,
                pid: given(pid).map(|pid| pid.parse().unwrap()),
                process: given(process),
                detail: line[line.find(start).unwrap()..].to_owned(),
                switch: line.contains("SXid"),
            };
            assert_eq!(parse_xid(line).as_ref(), Some(&expected));
            assert_eq!(parse_xid(&format!(" \t{line}\n")), Some(expected));
        }
    }

    #[test]
    fn names_the_report_and_its_reporter() {
        let x = parse_xid(LINES[0]).expect("an Xid");
        assert_eq!(
            (x.name(), x.reporter()),
            ("Xid 79".into(), "GPU 0000:3b:00".into())
        );
        let s = parse_xid(LINES[9]).expect("an SXid");
        let named = (s.name(), s.reporter());
        assert_eq!(named, ("SXid 24007".into(), "NVSwitch 0000:c6:00.0".into()));
        let mig = parse_xid("NVRM: Xid (PCI:0000:3b:00 GPU-I:01): 43, x").expect("an Xid");
        assert_eq!(mig.reporter(), "GPU 0000:3b:00 GPU-I:01");
    }

    #[test]
    fn a_mig_instance_is_kept_apart_from_the_bus_id() {
        let line = "NVRM: Xid (PCI:0000:3b:00 GPU-I:01 GPU-CI:02): 43, pid=77, name=serve, \
                    Ch 00000010";
        let x = parse_xid(line).expect("an Xid");
        assert_eq!((x.code, x.pci.as_str()), (43, "0000:3b:00"));
        assert_eq!(x.mig.as_deref(), Some("GPU-I:01 GPU-CI:02"));
        assert_eq!((x.pid, x.process.as_deref()), (Some(77), Some("serve")));
        let only = parse_xid("NVRM: Xid (PCI:0000:3b:00 GPU-I:05): 31, pid=1, name=a, x");
        assert_eq!(only.and_then(|x| x.mig).as_deref(), Some("GPU-I:05"));
        assert_eq!(parse_xid("NVRM: Xid (PCI:0000:3b:00 junk): 31, x"), None);
    }

    #[test]
    fn other_text_is_not_an_xid() {
        for text in [
            "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.183.01",
            "NVRM: GPU at PCI:0000:3b:00: GPU-5a2f1c3e-0000-0000-0000-000000000000",
            "",
            "\n",
            "garbage ünïcode \u{0}\u{ffff}",
            "NVRM: Xid (PCI:0000:3b",
            "NVRM: Xid (PCI:0000:3b:00): 79",
            "NVRM: Xid (PCI:0000:3b:00): , GPU has fallen off the bus.",
            "NVRM: Xid (PCI:0000:3b:00): +79, x",
            "NVRM: Xid (PCI:0000:3b:00): 99999999999, x",
            "NVRM: Xid (PCI:): 79, x",
            "NVRM: Xid (PCI:zz:00): 79, x",
            "NVRM: Xid (PCI:0000:3b:00) 79, x",
            "NVRM: FooXid (PCI:0000:3b:00): 79, x",
        ] {
            assert_eq!(parse_xid(text), None, "{text:?}");
        }
    }

    #[test]
    fn a_line_cut_short_never_gives_another_code() {
        for line in LINES {
            let code = parse_xid(line).map(|report| report.code);
            for (at, _) in line.char_indices() {
                let cut = line.get(..at).and_then(parse_xid).map(|report| report.code);
                assert!(cut.is_none() || cut == code, "{:?}", line.get(..at));
            }
        }
    }

    #[test]
    fn explains_codes() {
        let says = |code| (xid_info(code).meaning, xid_info(code).severity);
        assert_eq!(says(79), ("GPU has fallen off the bus", Hardware));
        assert_eq!((says(13).1, says(119).1), (Application, Driver));
        assert_eq!(says(147), says(144));
        assert_eq!(says(9999), (NOT_CATALOGUED, Unknown));
        let switch = |line: &str| parse_xid(line).map(|report| report.info().meaning);
        assert_eq!(switch(LINES[9]), Some("NVSwitch fatal error"));
        let calm = LINES[9].replace("Fatal", "Non-fatal");
        assert_eq!(switch(&calm), Some("NVSwitch non-fatal error"));
        let calm = parse_xid(&calm).map(|report| report.info().severity);
        assert_eq!(calm, Some(Info));
        // Corrected errors and recorded remaps call for no action now.
        assert_eq!([says(63).1, says(92).1, says(121).1], [Info; 3]);
        let all = [Hardware, Driver, Application, Info, Unknown];
        let texts = all.map(XidSeverity::text);
        assert_eq!(
            texts,
            ["hardware", "driver", "application", "info", "unknown"]
        );
        let fatal = all.map(XidSeverity::is_fatal_to_work);
        assert_eq!(fatal, [true, true, false, false, false]);
    }

    #[test]
    fn the_catalog_is_whole_and_distinct() {
        let asked = [
            8, 13, 31, 32, 38, 43, 45, 48, 56, 57, 61, 62, 63, 64, 65, 68, 69, 74,
        ];
        let more = [
            79, 92, 94, 95, 109, 119, 120, 121, 122, 123, 140, 143, 154, 155,
        ];
        for code in asked.into_iter().chain(more).chain(144..=150) {
            assert_ne!(xid_info(code).severity, Unknown, "Xid {code}");
        }
        let mut seen: Vec<&str> = Vec::new();
        for code in 0..=1000 {
            let info = xid_info(code);
            // A code has a meaning exactly when it has a judgment: the two tables agree.
            let catalogued = info.meaning != NOT_CATALOGUED;
            assert_eq!(catalogued, info.severity != Unknown, "Xid {code}");
            assert!(!info.meaning.is_empty() && !info.action.is_empty());
            // Only the NVLink 5 codes share an entry.
            let shared = (145..=150).contains(&code);
            assert!(
                !catalogued || shared || !seen.contains(&info.meaning),
                "Xid {code}"
            );
            seen.push(info.meaning);
        }
    }
}
