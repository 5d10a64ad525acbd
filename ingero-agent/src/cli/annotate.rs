//! `ingero annotate`: send annotations from the command line or a file and
//! report, per line, whether the agent accepted them (reply mode).
//!
//! ```text
//! ingero annotate --label step=42 --label phase=eval [--pid N] [--span-start T --span-end T]
//! ingero annotate --from-file annotations.ndjson
//! producer | ingero annotate
//! ```

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use ingero_annotate::{EncodeOptions, REPLY_HELLO, RejectReason, encode};

/// How long to wait for the agent's answer to one line.
const REPLY_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause before resending a line the agent refused as `rate_limited`.
const RATE_LIMIT_PAUSE: Duration = Duration::from_millis(20);
/// Resends of one rate-limited line before giving up on it.
const RATE_LIMIT_RETRIES: u32 = 250;
/// Line numbers listed per rejection reason in the summary.
const LINES_SHOWN: usize = 10;

/// Arguments of `ingero annotate`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct AnnotateArgs {
    /// A label as KEY=VALUE; repeat for several. Without labels, NDJSON
    /// annotation lines are read from --from-file or standard input.
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub labels: Vec<String>,
    /// Scope the annotation to this process (default: trace-wide).
    #[arg(long, requires = "labels")]
    pub pid: Option<u32>,
    /// Span start, unix nanoseconds (with --span-end).
    #[arg(long, value_name = "UNIX_NS", requires_all = ["span_end", "labels"])]
    pub span_start: Option<u64>,
    /// Span end, unix nanoseconds (with --span-start).
    #[arg(long, value_name = "UNIX_NS", requires = "span_start")]
    pub span_end: Option<u64>,
    /// Read NDJSON annotation lines from this file instead of standard input.
    #[arg(long, value_name = "PATH", conflicts_with = "labels")]
    pub from_file: Option<PathBuf>,
    /// The agent's annotation socket (default: the same rules as clients:
    /// $INGERO_ANNOTATE_SOCKET, /run/ingero/annotate.sock,
    /// ~/.ingero/annotate/annotate.sock).
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
}

/// Run the command. Returns the exit code: 0 when every line was accepted,
/// 1 when any was refused. Connection problems are errors. Blocking: call
/// it outside an async context (or from `spawn_blocking`).
pub fn run(args: AnnotateArgs) -> anyhow::Result<i32> {
    let lines = collect_lines(&args)?;
    let socket = args
        .socket
        .clone()
        .unwrap_or_else(ingero_annotate::socket_path::client_socket_path);
    let stdout = std::io::stdout();
    let summary = send_all(&socket, &lines)?;
    summary.print(&mut stdout.lock())?;
    Ok(if summary.rejected.is_empty() { 0 } else { 1 })
}

/// The lines to send: one encoded from the flags, or the input's non-empty
/// lines as they are (the agent is the judge of their validity).
fn collect_lines(args: &AnnotateArgs) -> anyhow::Result<Vec<Vec<u8>>> {
    if !args.labels.is_empty() {
        let labels = args
            .labels
            .iter()
            .map(|l| parse_label(l))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let opts = EncodeOptions {
            pid: args.pid,
            span: args.span_start.zip(args.span_end),
            ..EncodeOptions::default()
        };
        let mut line =
            encode(&labels, &opts).map_err(|e| anyhow::anyhow!("invalid annotation: {e}"))?;
        line.pop(); // the '\n'; added back when sending
        return Ok(vec![line]);
    }
    let input: Box<dyn Read> = match &args.from_file {
        Some(p) => {
            Box::new(std::fs::File::open(p).with_context(|| format!("opening {}", p.display()))?)
        }
        None => Box::new(std::io::stdin()),
    };
    let mut lines = Vec::new();
    for line in BufReader::new(input).split(b'\n') {
        let mut line = line.context("reading annotation lines")?;
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if !line.iter().all(u8::is_ascii_whitespace) {
            lines.push(line);
        }
    }
    Ok(lines)
}

/// `KEY=VALUE` (the value may contain `=`; it may be empty to clear a key).
fn parse_label(s: &str) -> anyhow::Result<(String, String)> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => bail!("--label {s:?} is not KEY=VALUE"),
    }
}

/// What happened to the lines.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Summary {
    pub(crate) total: usize,
    pub(crate) accepted: usize,
    /// Reason → 1-based line numbers.
    pub(crate) rejected: BTreeMap<String, Vec<usize>>,
}

impl Summary {
    fn print(&self, out: &mut impl Write) -> std::io::Result<()> {
        writeln!(
            out,
            "accepted {} of {} annotation line(s)",
            self.accepted, self.total
        )?;
        for (reason, lines) in &self.rejected {
            let shown: Vec<String> = lines
                .iter()
                .take(LINES_SHOWN)
                .map(usize::to_string)
                .collect();
            let more = if lines.len() > LINES_SHOWN {
                format!(", ... ({} more)", lines.len() - LINES_SHOWN)
            } else {
                String::new()
            };
            writeln!(
                out,
                "rejected {}: {reason} (line {}{more})",
                lines.len(),
                shown.join(", ")
            )?;
        }
        Ok(())
    }
}

/// Send every line in reply mode, one at a time, and tally the answers.
pub(crate) fn send_all(socket: &Path, lines: &[Vec<u8>]) -> anyhow::Result<Summary> {
    let stream = UnixStream::connect(socket).with_context(|| {
        format!(
            "connecting to the annotation socket {} (is `ingero trace --annotate` running?)",
            socket.display()
        )
    })?;
    stream
        .set_read_timeout(Some(REPLY_TIMEOUT))
        .context("setting a read timeout")?;
    stream
        .set_write_timeout(Some(REPLY_TIMEOUT))
        .context("setting a write timeout")?;
    let mut writer = stream.try_clone().context("cloning the socket")?;
    let mut reader = BufReader::new(stream);
    writer
        .write_all(format!("{REPLY_HELLO}\n").as_bytes())
        .context("sending the reply-mode hello")?;
    let mut summary = Summary {
        total: lines.len(),
        ..Summary::default()
    };
    let mut reply = String::new();
    for (i, line) in lines.iter().enumerate() {
        let mut attempts = 0;
        let verdict = loop {
            writer
                .write_all(line)
                .and_then(|()| writer.write_all(b"\n"))
                .context("sending an annotation")?;
            reply.clear();
            let n = reader
                .read_line(&mut reply)
                .context("waiting for the agent's answer")?;
            if n == 0 {
                bail!("the agent closed the connection after {i} line(s)");
            }
            let verdict = parse_reply(&reply)?;
            if verdict.as_deref() == Some(RejectReason::RateLimited.as_str())
                && attempts < RATE_LIMIT_RETRIES
            {
                attempts += 1;
                std::thread::sleep(RATE_LIMIT_PAUSE);
                continue;
            }
            break verdict;
        };
        match verdict {
            None => summary.accepted += 1,
            Some(reason) => summary.rejected.entry(reason).or_default().push(i + 1),
        }
    }
    Ok(summary)
}

/// `{"ok":true}` → `None`; `{"ok":false,"error":"r"}` → `Some(r)`.
fn parse_reply(reply: &str) -> anyhow::Result<Option<String>> {
    let v: serde_json::Value = serde_json::from_str(reply.trim_end())
        .with_context(|| format!("unexpected answer from the agent: {reply:?}"))?;
    match v.get("ok").and_then(serde_json::Value::as_bool) {
        Some(true) => Ok(None),
        Some(false) => Ok(Some(
            v.get("error")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("unknown")
                .to_owned(),
        )),
        None => bail!("unexpected answer from the agent: {reply:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_parse() {
        assert_eq!(
            parse_label("step=42").ok(),
            Some(("step".into(), "42".into()))
        );
        assert_eq!(parse_label("q=a=b").ok(), Some(("q".into(), "a=b".into())));
        assert_eq!(
            parse_label("clear=").ok(),
            Some(("clear".into(), String::new()))
        );
        assert!(parse_label("novalue").is_err());
        assert!(parse_label("=v").is_err());
    }

    #[test]
    fn replies_parse() {
        assert_eq!(parse_reply("{\"ok\":true}\n").ok(), Some(None));
        assert_eq!(
            parse_reply("{\"ok\":false,\"error\":\"bad_key\"}\n").ok(),
            Some(Some("bad_key".into()))
        );
        assert!(parse_reply("nonsense").is_err());
    }

    #[test]
    fn flags_encode_one_line() {
        let args = AnnotateArgs {
            labels: vec!["step=42".into(), "phase=eval".into()],
            pid: Some(7),
            span_start: Some(5),
            span_end: Some(9),
            ..AnnotateArgs::default()
        };
        let lines = collect_lines(&args).unwrap_or_default();
        assert_eq!(
            lines,
            vec![
                br#"{"labels":{"step":"42","phase":"eval"},"pid":7,"span_start":5,"span_end":9}"#
                    .to_vec()
            ]
        );
        let bad = AnnotateArgs {
            labels: vec!["bad key=1".into()],
            ..AnnotateArgs::default()
        };
        assert!(collect_lines(&bad).is_err());
    }

    #[test]
    fn summary_text() {
        let mut s = Summary {
            total: 3,
            accepted: 1,
            ..Summary::default()
        };
        s.rejected.insert("bad_key".into(), vec![2, 3]);
        let mut out = Vec::new();
        s.print(&mut out).unwrap_or_default();
        assert_eq!(
            String::from_utf8_lossy(&out),
            "accepted 1 of 3 annotation line(s)\nrejected 2: bad_key (line 2, 3)\n"
        );
    }
}
