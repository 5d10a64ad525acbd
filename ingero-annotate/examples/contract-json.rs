//! Prints the annotation contract as JSON, so other implementations (the
//! Python package's tests) can check they agree with it.
//!
//! `cargo run -p ingero-annotate --example contract-json` prints the
//! constants, key rules, forbidden character ranges, reason names and socket
//! path rules. With `--check`, it instead reads lines from stdin and prints,
//! for each, `ok` or the name of the reason the agent would refuse it for
//! (relative to the current clock).

use std::io::{BufRead, Write};

use ingero_annotate::charclass::{CC_ZL_ZP_RANGES, CF_RANGES};
use ingero_annotate::{keys, limits, socket_path};
use serde_json::json;

fn main() -> std::io::Result<()> {
    if std::env::args().nth(1).as_deref() == Some("--check") {
        return check_stdin();
    }
    let key_bytes: String = (0u8..=127)
        .filter(|b| keys::is_key_byte(*b))
        .map(char::from)
        .collect();
    let contract = json!({
        "protocol_version": limits::PROTOCOL_VERSION,
        "max_labels": limits::MAX_LABELS,
        "max_key_bytes": limits::MAX_KEY_BYTES,
        "max_value_bytes": limits::MAX_VALUE_BYTES,
        "max_line_bytes": limits::MAX_LINE_BYTES,
        "max_clock_skew_ns": limits::MAX_CLOCK_SKEW_NS,
        "pid_max": limits::PID_MAX,
        "key_charset": keys::KEY_CHARSET,
        "key_bytes": key_bytes,
        "cf_ranges": CF_RANGES,
        "cc_zl_zp_ranges": CC_ZL_ZP_RANGES,
        "well_known_keys": keys::WELL_KNOWN_KEYS,
        "reject_reasons": ingero_annotate::RejectReason::ALL.map(|r| r.as_str()),
        "reply_hello": ingero_annotate::REPLY_HELLO,
        "socket": {
            "env": socket_path::SOCKET_ENV,
            "name": socket_path::SOCKET_NAME,
            "run_dir": socket_path::RUN_SOCKET_DIR,
            "home_dir": socket_path::HOME_SOCKET_DIR,
        },
        "nvtx": {
            "socket_env": socket_path::NVTX_SOCKET_ENV,
            "socket_name": socket_path::NVTX_SOCKET_NAME,
            "library_env": socket_path::NVTX_LIBRARY_ENV,
            "library_name": socket_path::NVTX_LIBRARY_NAME,
            "injection_env": socket_path::NVTX_INJECTION_ENV,
        },
    });
    let mut out = std::io::stdout().lock();
    writeln!(out, "{contract:#}")
}

fn check_stdin() -> std::io::Result<()> {
    let stdin = std::io::stdin().lock();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for line in stdin.split(b'\n') {
        let line = line?;
        let now = ingero_annotate::now_realtime_ns();
        match ingero_annotate::parse_line(&line, now) {
            Ok(_) => writeln!(out, "ok")?,
            Err(e) => writeln!(out, "{}", e.reason)?,
        }
    }
    out.flush()
}
