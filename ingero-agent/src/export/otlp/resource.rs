//! The host's resource attributes, common to every span and metric it sends: the service
//! name, the host (name, `/etc/machine-id`, the recording's machine id), the clock's error
//! bound, the exporter itself, and what `OTEL_RESOURCE_ATTRIBUTES` adds.

use ingero_trace::clock_quality::ClockQuality;

use super::names as n;
use super::span::AttrValue;

/// Resource attributes of the host (the per-process ones are [`super::span::ProcessResource`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostResource {
    pub attributes: Vec<(String, AttrValue)>,
}

/// What the host resource is built from.
pub struct HostFacts {
    pub service_name: String,
    pub host_name: String,
    /// `/etc/machine-id`, when this host is the recording's.
    pub host_id: Option<String>,
    pub machine_id: u32,
    pub clock: Option<ClockQuality>,
    /// `OTEL_RESOURCE_ATTRIBUTES`, in order (the keys above win over them).
    pub extra: Vec<(String, String)>,
}

impl HostFacts {
    /// This host now, named `host_name` (the recording's machine name): its machine id file
    /// and clock bound.
    pub fn this_host(
        service_name: String,
        host_name: String,
        machine_id: u32,
        extra: Vec<(String, String)>,
    ) -> Self {
        HostFacts {
            service_name,
            host_name,
            host_id: read_machine_id(),
            machine_id,
            clock: ClockQuality::measure(),
            extra,
        }
    }
}

/// `/etc/machine-id` (systemd's per-install id), else the D-Bus copy.
pub fn read_machine_id() -> Option<String> {
    ["/etc/machine-id", "/var/lib/dbus/machine-id"]
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

impl HostResource {
    pub fn new(f: &HostFacts) -> HostResource {
        let mut a: Vec<(String, AttrValue)> = Vec::new();
        let s = |v: &str| AttrValue::Str(v.to_owned());
        a.push((n::SERVICE_NAME.into(), s(&f.service_name)));
        a.push((n::HOST_NAME.into(), s(&f.host_name)));
        if let Some(id) = &f.host_id {
            a.push((n::HOST_ID.into(), s(id)));
        }
        a.push((
            n::MACHINE_ID.into(),
            AttrValue::Int(i64::from(f.machine_id)),
        ));
        if let Some(c) = f.clock {
            let us = |v: u64| AttrValue::Int(i64::try_from(v).unwrap_or(i64::MAX));
            a.push((n::CLOCK_MAXERROR_US.into(), us(c.maxerror_us)));
            a.push((n::CLOCK_ESTERROR_US.into(), us(c.esterror_us)));
            a.push((n::CLOCK_UNSYNC.into(), AttrValue::Bool(c.unsynchronized)));
        }
        a.push((n::TELEMETRY_SDK_NAME.into(), s("ingero")));
        a.push((n::TELEMETRY_SDK_LANGUAGE.into(), s("rust")));
        a.push((
            n::TELEMETRY_SDK_VERSION.into(),
            s(env!("CARGO_PKG_VERSION")),
        ));
        for (k, v) in &f.extra {
            if !a.iter().any(|(have, _)| have == k) {
                a.push((k.clone(), s(v)));
            }
        }
        HostResource { attributes: a }
    }
}
