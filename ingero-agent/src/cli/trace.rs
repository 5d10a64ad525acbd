//! `ingero trace`: the flags, and the [`DaemonConfig`] they make for the tracing daemon
//! ([`crate::daemon`]), which attaches, drains and shows or records until the duration ends or
//! a signal arrives; or, with `-- CMD ARGS…`, until that command (run as the user who ran
//! sudo, with NVTX capture on) exits.

use std::{ffi::OsString, path::PathBuf, process::ExitCode, time::Duration};

use anyhow::{Result, bail};
use clap::Args;

use ingero_annotate::socket_path::nvtx_agent_socket_path;
use ingero_trace::model::SessionInfo;
use ingero_trace::write::RecorderConfig;

use super::otlp::OtlpArgs;
use super::run::NvtxFlags;
use crate::{
    annotate::IngestConfig,
    daemon::{self, CommandConfig, DaemonConfig, RecordConfig},
    export::otlp::live::{engine::EngineConfig, run::LiveSettings},
    launch::{nvtx_env_here, user::invoking_user},
    timeline::merger::MergerConfig,
};

#[derive(Args, Debug)]
pub struct TraceArgs {
    /// Trace only these processes (comma separated; their forked children too).
    #[arg(long, value_delimiter = ',', value_name = "PID")]
    pub pid: Option<Vec<u32>>,
    /// Attach to this libcudart, libcuda or libnccl instead of discovering them (repeatable).
    #[arg(long = "cuda-lib", value_name = "PATH")]
    pub cuda_lib: Vec<PathBuf>,
    /// Stop after this long (for example `30s`, `5m`); default: until Ctrl-C.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub duration: Option<Duration>,
    /// Print one JSON object per event on stdout instead of the live table.
    #[arg(long)]
    pub json: bool,
    /// Bytes per ring buffer: a power of two, at least a page.
    #[arg(long, value_name = "BYTES", default_value_t = 8 << 20)]
    pub ringbuf_size: u64,
    /// List this many kernels under the live table (launches and API time); 0: none.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top_kernels: usize,
    #[command(flatten)]
    pub annotate: AnnotateFlags,
    #[command(flatten)]
    pub record: RecordFlags,
    #[command(flatten)]
    pub nvtx: NvtxFlags,
    #[command(flatten)]
    pub otlp: OtlpArgs,
    #[command(flatten)]
    pub otlp_live: OtlpLiveFlags,
    /// Run this command once the probes are attached (as the user who ran sudo, with NVTX
    /// capture on), trace it and its descendants, and stop when it exits; ingero exits with
    /// its code. Ctrl-C goes to the command.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

/// Recording flags of `ingero trace`.
#[derive(Args, Debug)]
pub struct RecordFlags {
    /// Record a Perfetto trace (`--record=false` turns it off even with -o). Default directory:
    /// ~/.ingero/traces/ of the invoking user (under sudo, SUDO_USER's), one file per session.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub record: Option<bool>,
    /// Write the recording to this file instead (implies --record).
    #[arg(short = 'o', long = "output", value_name = "PATH")]
    pub output: Option<PathBuf>,
    /// Start a new file (self-contained) when the current one reaches this size.
    #[arg(long, value_name = "BYTES", default_value_t = ingero_trace::write::DEFAULT_MAX_FILE_SIZE)]
    pub max_file_size: u64,
    /// Delete the oldest recordings of the trace directory beyond this total.
    #[arg(long, value_name = "BYTES", default_value_t = ingero_trace::write::DEFAULT_MAX_TOTAL_SIZE)]
    pub max_total_size: u64,
    /// Compression of the chunks the recording is written in: 1 (default) ingero's encoder,
    /// which builds the zlib stream from the packets' structure (fastest, and smaller than
    /// libdeflate's level 1 on CUDA calls); 2 … 12 libdeflate's levels (12 smallest); 0
    /// writes packets uncompressed.
    #[arg(long, value_name = "LEVEL", default_value_t = ingero_trace::write::DEFAULT_COMPRESSION_LEVEL,
          value_parser = clap::value_parser!(u32).range(0..=12))]
    pub compression_level: u32,
    /// How long records are held to put them in timestamp order before writing.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "250ms")]
    pub reorder_window: Duration,
    /// The name this host goes by among the hosts of a job: written in the recording (its
    /// session and Perfetto's SystemInfo), it is what `query`/`explain` over a directory of
    /// several hosts' recordings and the merged Perfetto bundle call the host [default: the
    /// host name]
    #[arg(long, value_name = "NAME", value_parser = machine_name)]
    pub machine_name: Option<String>,
    /// The machine id stamped on every packet, instead of the hash of /etc/machine-id: for
    /// simulating several hosts on one machine (tests), or setting unique ids past a few
    /// dozen hosts (docs/recording.md).
    #[arg(long, value_name = "ID", hide = true,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub machine_id: Option<u32>,
}

/// `--machine-name`: one line of text, not empty.
fn machine_name(s: &str) -> Result<String, String> {
    let name = s.trim();
    if name.is_empty() {
        return Err("the machine name is empty".into());
    }
    if name.chars().any(char::is_control) {
        return Err("the machine name holds control characters".into());
    }
    Ok(name.to_owned())
}

impl RecordFlags {
    /// Whether to record: `--record[=BOOL]` decides when given; else `-o`, or `implied` (what
    /// another flag needs: `--otlp-endpoint`).
    fn enabled(&self, implied: bool) -> bool {
        self.record.unwrap_or(self.output.is_some() || implied)
    }

    /// How to record; `None` when not recording. The session metadata is the daemon's, but
    /// for the machine name.
    fn config(&self, implied: bool) -> Option<RecordConfig> {
        self.enabled(implied).then(|| RecordConfig {
            recorder: RecorderConfig {
                path: self.output.clone(),
                max_file_size: self.max_file_size,
                max_total_size: self.max_total_size,
                compression_level: self.compression_level,
                machine_id: self.machine_id,
                session: SessionInfo {
                    machine_name: self.machine_name.clone().unwrap_or_default(),
                    ..SessionInfo::default()
                },
                ..RecorderConfig::default()
            },
            merger: MergerConfig {
                window: self.reorder_window,
                ..MergerConfig::default()
            },
        })
    }
}

/// Flags of the live OTLP export only `ingero trace` has.
#[derive(Args, Debug)]
pub struct OtlpLiveFlags {
    /// Bytes of recent events the live export keeps to fold each group when it ends (the
    /// oldest go first; a group older than what is kept is sent marked incomplete).
    #[arg(long, value_name = "BYTES", default_value_t = 128 << 20)]
    pub otlp_history_size: usize,
    /// How long the live export keeps events for span annotations still to arrive (a span is
    /// sent when it ends): a request or step span up to this long is exported exactly.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "30s", value_name = "DURATION")]
    pub otlp_horizon: Duration,
    /// How often metrics are sent.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "10s", value_name = "DURATION")]
    pub otlp_metrics_interval: Duration,
    /// How long the end of tracing waits for the Collector to take what is queued (then
    /// the rest is counted as dropped).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "5s", value_name = "DURATION")]
    pub otlp_shutdown_timeout: Duration,
}

impl TraceArgs {
    /// The live export's settings: `None` without an endpoint. The spans are computed from
    /// what the recording writes, so `--otlp-endpoint` records (to the default directory, with
    /// its retention) unless told where; with `--record=false` it is an error. An endpoint from
    /// the environment alone does not start a recording: without one it is said and left
    /// unused, so a variable meant for other programs never stops tracing or fills a disk.
    fn otlp_settings(&self) -> Result<Option<LiveSettings>> {
        let Some(config) = self.otlp.config()? else {
            return Ok(None);
        };
        if !self.record.enabled(self.otlp_records()) {
            if self.otlp.otlp_endpoint.is_some() {
                bail!(
                    "--otlp-endpoint cannot go with --record=false: the spans are computed from what the recording writes"
                );
            }
            eprintln!(
                "ingero: not exporting to {} (from the environment): OTLP export needs --record",
                config.traces.url
            );
            return Ok(None);
        }
        let f = &self.otlp_live;
        Ok(Some(LiveSettings {
            engine: EngineConfig {
                group_by: config.group_by.clone(),
                requests: true,
                horizon_ns: u64::try_from(f.otlp_horizon.as_nanos()).unwrap_or(u64::MAX),
                history_bytes: f.otlp_history_size,
            },
            config,
            shutdown_grace: f.otlp_shutdown_timeout,
            metrics_every: f.otlp_metrics_interval,
        }))
    }
}

/// Annotation ingest flags of `ingero trace`.
#[derive(Args, Debug)]
pub struct AnnotateFlags {
    /// Accept annotations from applications on the annotation socket.
    #[arg(long)]
    pub annotate: bool,
    /// Socket path (default: /run/ingero/annotate.sock when /run is writable, else
    /// ~/.ingero/annotate/annotate.sock; $INGERO_ANNOTATE_SOCKET overrides).
    #[arg(long, value_name = "PATH", requires = "annotate")]
    pub annotate_socket: Option<PathBuf>,
    /// Let members of this group write annotations (directory 0710, socket 0770), for a job
    /// that runs unprivileged while the agent runs under sudo.
    #[arg(long, value_name = "GROUP", requires = "annotate")]
    pub annotate_group: Option<String>,
    /// Most annotation connections open at once.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub annotate_max_conns: usize,
    /// Lines per second per connection (token bucket; the burst is the same size).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub annotate_rate: u32,
}

impl AnnotateFlags {
    /// The socket server's settings; `None` without `--annotate`.
    fn config(&self) -> Option<IngestConfig> {
        self.annotate.then(|| IngestConfig {
            socket_path: self.annotate_socket.clone(),
            group: self.annotate_group.clone(),
            max_conns: self.annotate_max_conns,
            rate_per_conn: self.annotate_rate,
            burst: self.annotate_rate,
            ..IngestConfig::default()
        })
    }
}

impl TraceArgs {
    /// Whether the flags ask for something only a recording gives: `--otlp-endpoint` (an
    /// endpoint from the environment alone does not).
    fn otlp_records(&self) -> bool {
        self.otlp.otlp_endpoint.is_some()
    }

    /// What the daemon is to do.
    pub fn config(&self) -> Result<DaemonConfig> {
        Ok(DaemonConfig {
            pids: self.pid.clone(),
            cuda_libs: self.cuda_lib.clone(),
            duration: self.duration,
            json: self.json,
            ringbuf_size: self.ringbuf_size,
            ingest: self.annotate.config(),
            record: self.record.config(self.otlp_records()),
            top_kernels: self.top_kernels,
            command: None,
            nvtx_allowed_uid: None,
            otlp: self.otlp_settings()?,
        })
    }

    /// The command to run, when one follows `--`: as the invoking user, with the NVTX
    /// environment (its notices printed now, before tracing starts).
    fn command_config(&self) -> Result<Option<CommandConfig>> {
        let Some((program, args)) = self.command.split_first() else {
            return Ok(None);
        };
        let user = invoking_user()?;
        let nvtx = nvtx_env_here(self.nvtx.library(), &nvtx_agent_socket_path());
        for notice in &nvtx.notices {
            eprintln!("ingero: {notice}");
        }
        let mut env = nvtx.vars;
        if let Some(user) = &user {
            // What login would set; the rest of the environment is sudo's, passed on as is.
            env.push(("HOME".into(), user.home.clone().into_os_string()));
            env.push(("USER".into(), user.name.clone().into()));
            env.push(("LOGNAME".into(), user.name.clone().into()));
        }
        Ok(Some(CommandConfig {
            program: program.clone(),
            args: args.to_vec(),
            env,
            user,
        }))
    }
}

pub fn run(args: TraceArgs) -> Result<ExitCode> {
    let mut config = args.config()?;
    config.command = args.command_config()?;
    // The command's injection library connects to the NVTX socket as the command's user.
    config.nvtx_allowed_uid = config
        .command
        .as_ref()
        .and_then(|c| c.user.as_ref())
        .map(|u| u.uid);
    daemon::run(config)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        trace: TraceArgs,
    }

    fn parse(args: &[&str]) -> Result<TraceArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("trace").chain(args.iter().copied())).map(|c| c.trace)
    }

    #[test]
    fn a_command_follows_the_double_dash_and_keeps_its_flags() {
        let a = parse(&[
            "--record",
            "-o",
            "f.pftrace",
            "--",
            "python",
            "-u",
            "t.py",
            "--json",
        ])
        .expect("parses");
        assert_eq!(a.command, ["python", "-u", "t.py", "--json"]);
        assert!(!a.json, "--json after -- is the command's");
        assert_eq!(a.record.output, Some(PathBuf::from("f.pftrace")));
        assert!(parse(&["--json"]).expect("parses").command.is_empty());
        // Without `--`, a word is not taken for a command.
        assert!(parse(&["python"]).is_err());
    }

    #[test]
    fn the_machine_name_and_id_reach_the_recorder() {
        let a = parse(&[
            "--record",
            "--machine-name",
            " gpu-node-17 ",
            "--machine-id",
            "4242",
        ])
        .expect("parses");
        let rec = a.record.config(false).expect("recording").recorder;
        assert_eq!(rec.session.machine_name, "gpu-node-17");
        assert_eq!(rec.machine_id, Some(4242));
        let default = parse(&["--record"]).expect("parses").record.config(false);
        let rec = default.expect("recording").recorder;
        assert_eq!(rec.session.machine_name, "", "the daemon's host name then");
        assert_eq!(rec.machine_id, None);
        assert!(parse(&["--machine-name", " "]).is_err());
        assert!(parse(&["--machine-name", "a\nb"]).is_err());
        assert!(
            parse(&["--machine-id", "0"]).is_err(),
            "0 means this host to Perfetto"
        );
    }

    #[test]
    fn the_otlp_flag_records_and_makes_the_live_settings() {
        // The flag alone records (to the default directory): its spans are what is written.
        let implied = parse(&["--otlp-endpoint", "http://c:4318"]).expect("parses");
        let c = implied.config().expect("config");
        assert!(c.record.is_some() && c.otlp.is_some());
        assert_eq!(c.record.expect("recording").recorder.path, None);
        let no_record = parse(&["--otlp-endpoint", "http://c:4318", "--record=false"]);
        let err = no_record
            .expect("parses")
            .config()
            .map(|_| ())
            .expect_err("an error with --record=false");
        assert!(format!("{err:#}").contains("--record=false"), "{err:#}");
        let a = parse(&[
            "-o",
            "run.pftrace",
            "--otlp-endpoint",
            "http://c:4318",
            "--otlp-group-by",
            "step,phase",
            "--otlp-horizon",
            "5s",
        ])
        .expect("parses");
        let s = a.config().expect("config").otlp.expect("export on");
        assert_eq!(s.config.traces.url, "http://c:4318/v1/traces");
        assert_eq!(s.engine.group_by, ["step", "phase"]);
        assert_eq!(s.engine.horizon_ns, 5_000_000_000);
        assert_eq!(s.shutdown_grace, Duration::from_secs(5), "the default");
        let off = parse(&["-o", "run.pftrace"]).expect("parses");
        // (No endpoint flag; the test's environment names none either.)
        if std::env::var_os("OTEL_EXPORTER_OTLP_ENDPOINT").is_none()
            && std::env::var_os("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_none()
        {
            assert!(off.config().expect("config").otlp.is_none());
        }
    }
}
