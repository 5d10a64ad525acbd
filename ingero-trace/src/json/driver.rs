//! An NVIDIA driver message's line (`type: "driver"`): its time and text, and for an Xid (or
//! an NVSwitch SXid) report what it says: the code, the GPU's bus id, the process the driver
//! named, and the code's meaning, severity and advice from ingero's catalog.

use serde::ser::SerializeMap;

use crate::model::DriverMessage;

pub(super) fn entries<M: SerializeMap>(d: &DriverMessage, map: &mut M) -> Result<(), M::Error> {
    map.serialize_entry("type", "driver")?;
    map.serialize_entry("ts_ns", &d.ts_ns)?;
    map.serialize_entry("text", &d.text)?;
    if d.truncated {
        map.serialize_entry("truncated", &true)?;
    }
    let Some(x) = d.xid() else {
        return Ok(());
    };
    let info = x.info();
    map.serialize_entry(if x.switch { "sxid" } else { "xid" }, &x.code)?;
    map.serialize_entry("pci", &x.pci)?;
    if let Some(m) = &x.mig {
        map.serialize_entry("mig", m)?;
    }
    map.serialize_entry("pid", &x.pid)?;
    map.serialize_entry("process", &x.process)?;
    map.serialize_entry("meaning", info.meaning)?;
    map.serialize_entry("severity", info.severity.text())?;
    map.serialize_entry("action", info.action)?;
    Ok(())
}
