//! Who recorded the file, in the two forms readers look for: Perfetto's `SystemInfo` packet
//! (its `machine_name` names the host's `machine` row when Perfetto v58+ merges the traces of
//! several hosts) and the session packet's arguments (machine name and clock quality, which
//! ingero's own reader and the multi-host reports use).

use crate::model::SessionInfo;
use crate::proto::{DebugAnnotation, SystemInfo, Utsname};
use crate::vocab::SessionArg;

/// The `SystemInfo` written at the start of every file.
pub(super) fn system_info(s: &SessionInfo) -> SystemInfo {
    let text = |v: &str| (!v.is_empty()).then(|| v.to_owned());
    SystemInfo {
        utsname: Some(Utsname {
            sysname: Some("Linux".to_owned()),
            release: text(&s.kernel),
            machine: Some(std::env::consts::ARCH.to_owned()),
        }),
        machine_name: text(s.machine()),
    }
}

/// The session packet's machine name (when set) and clock quality (when known), named by
/// their [`SessionArg`] words.
pub(super) fn session_args(s: &SessionInfo) -> Vec<DebugAnnotation> {
    let named = |k: SessionArg| DebugAnnotation {
        name: Some(k.text().to_owned()),
        ..Default::default()
    };
    let mut args = Vec::with_capacity(4);
    if !s.machine_name.is_empty() {
        args.push(DebugAnnotation {
            string_value: Some(s.machine_name.clone()),
            ..named(SessionArg::MachineName)
        });
    }
    if let Some(q) = s.clock {
        for (k, v) in [
            (SessionArg::ClockMaxErrorUs, q.maxerror_us),
            (SessionArg::ClockEstErrorUs, q.esterror_us),
        ] {
            args.push(DebugAnnotation {
                uint_value: Some(v),
                ..named(k)
            });
        }
        args.push(DebugAnnotation {
            bool_value: Some(q.unsynchronized),
            ..named(SessionArg::ClockUnsynchronized)
        });
    }
    args
}
