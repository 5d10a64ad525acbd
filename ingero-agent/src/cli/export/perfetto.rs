//! `ingero export perfetto`: bundles a directory of several hosts' recordings into the TAR the
//! Perfetto UI (v58+) opens as one multi-machine timeline (`ingero_trace::bundle`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde_json::json;

use crate::analyze::fleet;
use crate::cli::query::print;
use ingero_trace::bundle::{self, ClockOffset};

#[derive(Args, Debug)]
pub struct PerfettoArgs {
    /// Recording file, or a directory of one or several hosts' recordings [default:
    /// $INGERO_TRACE, else the newest recording in ~/.ingero/traces/]
    #[arg(long, value_name = "PATH")]
    pub trace: Option<PathBuf>,
    /// The archive to write (conventionally NAME.tar).
    #[arg(short = 'o', long = "output", value_name = "PATH")]
    pub output: PathBuf,
    /// Only these hosts (their machine names).
    #[arg(long, value_name = "NAME", value_delimiter = ',')]
    pub host: Vec<String>,
    /// A known offset of a host's REALTIME clock against the first host's, in ns (at one
    /// instant the host reads T when the first host reads T + NS; from a PTP or NCCL-based
    /// measurement); repeatable. Written in the manifest as that host's `clocks`.
    #[arg(long = "clock-offset", value_name = "HOST=NS")]
    pub clock_offset: Vec<String>,
    /// Say what was written as JSON (members, sizes, the manifest).
    #[arg(long)]
    pub json: bool,
}

/// `HOST=NS`.
fn offset(text: &str) -> Result<ClockOffset> {
    let (host, ns) = text
        .split_once('=')
        .with_context(|| format!("--clock-offset `{text}`: expected HOST=NS"))?;
    let offset_ns = ns
        .trim()
        .parse()
        .with_context(|| format!("--clock-offset `{text}`: NS is a whole number of ns"))?;
    Ok(ClockOffset {
        host: host.trim().to_owned(),
        offset_ns,
    })
}

pub(super) fn run(args: PerfettoArgs) -> Result<ExitCode> {
    let (found, shown) = fleet::recordings(args.trace.as_deref())?;
    let hosts = fleet::select(found, &args.host)?;
    let offsets = args
        .clock_offset
        .iter()
        .map(|o| offset(o))
        .collect::<Result<Vec<_>>>()?;
    for o in &offsets {
        match hosts.iter().position(|h| h.name == o.host) {
            None => bail!("--clock-offset {}: no such host in the bundle", o.host),
            Some(0) => bail!(
                "--clock-offset {}: the first host ({}) is the reference the others are set against",
                o.host,
                o.host
            ),
            Some(_) => {}
        }
    }
    let b = bundle::write(&hosts, &offsets, &args.output)
        .with_context(|| format!("bundling {}", shown.display()))?;
    if args.json {
        let members: Vec<_> = b
            .members
            .iter()
            .map(|m| json!({ "name": m.name, "host": m.host, "source": m.source, "bytes": m.size }))
            .collect();
        let out = json!({
            "output": args.output,
            "bytes": b.bytes,
            "members": members,
            "manifest": b.manifest,
        });
        print(&format!("{out}\n"))?;
    } else {
        let list: Vec<String> = hosts
            .iter()
            .map(|h| match h.files.len() {
                1 => format!("{} (1 file)", h.name),
                n => format!("{} ({n} files)", h.name),
            })
            .collect();
        eprintln!(
            "ingero: wrote {} ({} bytes): {} host(s): {}; open it at ui.perfetto.dev (v58 or later) as one trace",
            args.output.display(),
            b.bytes,
            hosts.len(),
            list.join(", ")
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_offsets_parse_as_host_and_signed_ns() {
        let o = offset("gpu-node-2=-2500000").expect("parses");
        assert_eq!((o.host.as_str(), o.offset_ns), ("gpu-node-2", -2_500_000));
        assert!(offset("gpu-node-2").is_err());
        assert!(offset("gpu-node-2=1.5ms").is_err());
    }
}
