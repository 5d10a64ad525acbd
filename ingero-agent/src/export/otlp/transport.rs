//! OTLP/HTTP: one POST of a protobuf body (gzip when configured) and what its answer means,
//! by the OTLP specification: 2xx is success, possibly partial (the response names rejected
//! items); 429, 502, 503 and 504 are retried, honouring `Retry-After` (delta-seconds or an
//! HTTP date); every other status is final; a connection failure or time-out is retried.
//! [`RetryPolicy`] spaces the retries (exponential back-off, capped, under a deadline).

use std::time::{Duration, SystemTime};

use prost::Message;
use ureq::Agent;

/// Where and how requests go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub gzip: bool,
}

/// What an answer means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Accepted; `rejected` items were refused inside it (`partial_success`).
    Accepted { rejected: u64, message: String },
    /// Try again, after `after` when the server said.
    Retry {
        after: Option<Duration>,
        why: String,
    },
    /// Refused for good.
    Rejected { why: String },
}

/// The answers retried (OTLP/HTTP "Retryable Response Codes").
pub fn retryable(status: u16) -> bool {
    matches!(status, 429 | 502 | 503 | 504)
}

/// `Retry-After`: delta-seconds, or an HTTP date (RFC 9110 IMF-fixdate) from `now`.
pub fn parse_retry_after(v: &str, now: SystemTime) -> Option<Duration> {
    let v = v.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate_to_system(v)?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// `Sun, 06 Nov 1994 08:49:37 GMT` as a time (the preferred format of RFC 9110; the obsolete
/// ones are not accepted, and a server sending one gets the ordinary back-off).
fn httpdate_to_system(v: &str) -> Option<SystemTime> {
    let mut it = v.split_ascii_whitespace();
    let (_wd, day, mon, year, time, gmt) = (
        it.next()?,
        it.next()?,
        it.next()?,
        it.next()?,
        it.next()?,
        it.next()?,
    );
    if gmt != "GMT" {
        return None;
    }
    let months = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let m = months.iter().position(|x| *x == mon)? as u32 + 1;
    let rfc3339 = format!("{year}-{m:02}-{:02}T{time}Z", day.parse::<u32>().ok()?);
    humantime::parse_rfc3339(&rfc3339).ok()
}

/// An agent for one endpoint: bounded time per request, statuses returned (not errors).
pub fn agent(timeout: Duration) -> Agent {
    Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(timeout))
        .timeout_connect(Some(timeout.min(Duration::from_secs(5))))
        .user_agent(concat!("ingero/", env!("CARGO_PKG_VERSION")))
        .build()
        .into()
}

/// The response body read at most (partial-success messages are short).
const MAX_RESPONSE: u64 = 1 << 20;

/// POSTs `body` and classifies the answer; `decode` reads a success body's partial-success
/// counts (`rejected items`, `message`).
pub fn post(
    agent: &Agent,
    ep: &Endpoint,
    body: &[u8],
    decode: fn(&[u8]) -> Option<(u64, String)>,
) -> Outcome {
    let mut req = agent
        .post(&ep.url)
        .header("Content-Type", "application/x-protobuf");
    if ep.gzip {
        req = req.header("Content-Encoding", "gzip");
    }
    for (k, v) in &ep.headers {
        req = req.header(k.as_str(), v.as_str());
    }
    let mut resp = match req.send(body) {
        Ok(r) => r,
        Err(e) => {
            return Outcome::Retry {
                after: None,
                why: format!("{e}"),
            };
        }
    };
    let status = resp.status().as_u16();
    let after = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| parse_retry_after(v, SystemTime::now()));
    let bytes = resp
        .body_mut()
        .with_config()
        .limit(MAX_RESPONSE)
        .read_to_vec()
        .unwrap_or_default();
    if (200..300).contains(&status) {
        let (rejected, message) = decode(&bytes).unwrap_or_default();
        return Outcome::Accepted { rejected, message };
    }
    let why = format!("HTTP {status}{}", status_detail(&bytes));
    if retryable(status) {
        Outcome::Retry { after, why }
    } else {
        Outcome::Rejected { why }
    }
}

/// What an error body says, when it is an OTLP `Status` (protobuf) or short text.
fn status_detail(body: &[u8]) -> String {
    #[derive(Clone, PartialEq, prost::Message)]
    struct Status {
        #[prost(int32, tag = "1")]
        code: i32,
        #[prost(string, tag = "2")]
        message: String,
    }
    if let Ok(s) = Status::decode(body) {
        if !s.message.is_empty() {
            return format!(": {}", s.message);
        }
    }
    match std::str::from_utf8(body) {
        Ok(t) if !t.trim().is_empty() && t.len() <= 200 => format!(": {}", t.trim()),
        _ => String::new(),
    }
}

/// How retries are spaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    pub initial: Duration,
    pub max: Duration,
    /// A request is given up this long after its first attempt.
    pub deadline: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            initial: Duration::from_millis(500),
            max: Duration::from_secs(30),
            deadline: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// The wait before retry number `attempt` (1 for the first): the server's `Retry-After`
    /// when it gave one (never retried sooner; one past the deadline gives the request up),
    /// else `initial` doubled per attempt up to `max`.
    pub fn wait(&self, attempt: u32, after: Option<Duration>) -> Duration {
        match after {
            Some(a) => a,
            None => self
                .initial
                .saturating_mul(1u32 << attempt.saturating_sub(1).min(16))
                .min(self.max),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_specified_statuses_are_retried() {
        for s in [429, 502, 503, 504] {
            assert!(retryable(s), "{s}");
        }
        for s in [400, 401, 403, 404, 408, 413, 500, 501] {
            assert!(!retryable(s), "{s}");
        }
    }

    #[test]
    fn retry_after_takes_seconds_or_a_date() {
        let now = humantime::parse_rfc3339("1994-11-06T08:49:30Z").expect("time");
        assert_eq!(parse_retry_after("2", now), Some(Duration::from_secs(2)));
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:00 GMT", now),
            Some(Duration::ZERO),
            "a date in the past means now"
        );
        assert_eq!(parse_retry_after("soon", now), None);
    }

    #[test]
    fn back_off_doubles_up_to_the_cap_and_the_server_wins() {
        let p = RetryPolicy {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(1),
            deadline: Duration::from_secs(10),
        };
        let waits: Vec<u64> = (1..=6)
            .map(|a| p.wait(a, None).as_millis() as u64)
            .collect();
        assert_eq!(waits, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(
            p.wait(1, Some(Duration::from_millis(700))),
            Duration::from_millis(700)
        );
        assert_eq!(
            p.wait(1, Some(Duration::from_secs(99))),
            Duration::from_secs(99)
        );
    }
}
