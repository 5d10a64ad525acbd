//! [`DriverMessage`]: a kernel log message of the NVIDIA drivers, as the agent captured it
//! (the `printk:console` tracepoint) and as a recording holds it. The writer and the reader
//! share this form; what a message says (an Xid report of a GPU fault, and what that Xid
//! means) is read from its text by [`super::xid`], so the text is the one thing kept.

use super::xid::{XidReport, parse_xid};

/// One NVIDIA driver message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriverMessage {
    /// When the kernel logged it (CLOCK_MONOTONIC ns, the clock of the CUDA calls).
    pub ts_ns: u64,
    /// The message, as the driver printed it (`NVRM: Xid (PCI:0000:3b:00): 79, …`).
    pub text: String,
    /// The message was longer than the probe copies: its end is cut.
    pub truncated: bool,
}

impl DriverMessage {
    /// The Xid (or NVSwitch SXid) report the message is, if it is one.
    pub fn xid(&self) -> Option<XidReport> {
        parse_xid(&self.text)
    }
}

impl DriverMessage {
    /// A short name for the message: `Xid 79: GPU has fallen off the bus` (`SXid …` for an
    /// NVSwitch), or the driver's own prefix for any other message.
    pub fn title(&self) -> String {
        match self.xid() {
            Some(x) => format!("{}: {}", x.name(), x.info().meaning),
            None => self
                .text
                .split(':')
                .next()
                .filter(|p| !p.is_empty() && p.len() < self.text.len())
                .unwrap_or("NVIDIA driver")
                .to_owned(),
        }
    }
}
