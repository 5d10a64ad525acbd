//! Encoding of the NVIDIA drivers' messages: an instant on the machine-wide `NVIDIA driver`
//! track, on the plain sequence (messages are rare, and a first pass over the file finds them
//! without opening a chunk, as `explain` wants). The instant is named by what the message
//! reports ([`DriverMessage::title`]) and carries the text, from which a reader learns the
//! rest, and the Xid's fields for the Perfetto UI to show.

use super::error::Result;
use super::labels::LabelSink;
use super::recorder::Recorder;
use super::tracks::{Hint, TrackKey};
use crate::model::DriverMessage;
use crate::proto::{DebugAnnotation, TrackEvent};
use crate::vocab::{Category, DriverArg};

impl Recorder {
    /// Writes one driver message (see the module docs).
    pub(super) fn write_driver(&mut self, d: &DriverMessage) -> Result<()> {
        let track = LabelSink::track(self, &TrackKey::Driver, Hint { pid: 0, comm: "" })?;
        let mut args = Vec::with_capacity(6);
        let text = |v: &str| DebugAnnotation {
            string_value: Some(v.to_owned()),
            ..Default::default()
        };
        let uint = |v: u64| DebugAnnotation {
            uint_value: Some(v),
            ..Default::default()
        };
        args.push(self.named(DriverArg::Text.text(), text(&d.text)));
        if d.truncated {
            let yes = DebugAnnotation {
                bool_value: Some(true),
                ..Default::default()
            };
            args.push(self.named(DriverArg::Truncated.text(), yes));
        }
        if let Some(x) = d.xid() {
            args.push(self.named(DriverArg::Xid.text(), uint(u64::from(x.code))));
            args.push(self.named(DriverArg::Pci.text(), text(&x.pci)));
            if let Some(pid) = x.pid {
                args.push(self.named(DriverArg::Pid.text(), uint(u64::from(pid))));
            }
            args.push(self.named(DriverArg::Meaning.text(), text(x.info().meaning)));
        }
        let te = TrackEvent {
            name: Some(d.title()),
            category_iids: vec![Category::Driver.iid()],
            debug_annotations: args,
            ..Default::default()
        };
        // As a label's: the seek marks bound it, so a read of a window that holds it reads the
        // stretch it is in (a first pass reads it whatever it skips: it is not on a label
        // track).
        self.instant(track, d.ts_ns, te)
    }
}
