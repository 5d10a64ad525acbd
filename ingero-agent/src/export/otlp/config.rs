//! Where the export goes and how, from the flags and the standard OpenTelemetry environment
//! (the OTLP exporter specification's variables; a flag wins over its variable):
//!
//! | setting | flag | variables |
//! |---|---|---|
//! | traces URL | `--otlp-endpoint BASE` (+ `/v1/traces`) | `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (as is), `OTEL_EXPORTER_OTLP_ENDPOINT` (+ `/v1/traces`) |
//! | metrics URL | `--otlp-endpoint BASE` (+ `/v1/metrics`) | `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`, `OTEL_EXPORTER_OTLP_ENDPOINT` (+ `/v1/metrics`) |
//! | headers | `--otlp-header K=V` (repeatable, added last) | `OTEL_EXPORTER_OTLP_HEADERS` (`k=v,k2=v2`, values percent-decoded) |
//! | compression | `--otlp-compression gzip\|none` | `OTEL_EXPORTER_OTLP_COMPRESSION` (default gzip) |
//! | time-out per request | `--otlp-timeout` | `OTEL_EXPORTER_OTLP_TIMEOUT` (ms; default 10 s) |
//! | protocol | — | `OTEL_EXPORTER_OTLP_PROTOCOL`, `…_TRACES_PROTOCOL`: only `http/protobuf` |
//! | service name | — | `OTEL_SERVICE_NAME`, else `service.name` of `OTEL_RESOURCE_ATTRIBUTES`, else `ingero` |
//! | resource | — | `OTEL_RESOURCE_ATTRIBUTES` (`k=v,…`, percent-decoded) |

use std::time::Duration;

use anyhow::{Result, bail};

use super::names;
use super::queue::QueueLimits;
use super::transport::{Endpoint, RetryPolicy};

/// The default time-out of one request (the specification's).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// What the flags say (`None`: not given).
#[derive(Clone, Debug, Default)]
pub struct OtlpFlags {
    pub endpoint: Option<String>,
    pub headers: Vec<String>,
    pub compression: Option<String>,
    pub timeout: Option<Duration>,
    pub group_by: Vec<String>,
}

/// The export's settings, resolved.
#[derive(Clone, Debug)]
pub struct OtlpConfig {
    pub traces: Endpoint,
    pub metrics: Endpoint,
    pub timeout: Duration,
    pub retry: RetryPolicy,
    pub queue: QueueLimits,
    pub service_name: String,
    /// `OTEL_RESOURCE_ATTRIBUTES` without `service.name`.
    pub resource: Vec<(String, String)>,
    /// The label keys a step span groups by (`--otlp-group-by`, default `step`).
    pub group_by: Vec<String>,
}

/// Percent-decodes a header or resource value (W3C Baggage rules, as the specification asks).
fn decode(v: &str) -> String {
    percent_encoding::percent_decode_str(v.trim())
        .decode_utf8_lossy()
        .into_owned()
}

/// `k=v,k2=v2` (empty members skipped); a member without `=` is an error.
pub fn parse_pairs(text: &str, what: &str) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for member in text.split(',').map(str::trim).filter(|m| !m.is_empty()) {
        let Some((k, v)) = member.split_once('=') else {
            bail!("{what}: `{member}` is not KEY=VALUE");
        };
        let k = k.trim();
        if k.is_empty() {
            bail!("{what}: `{member}` has an empty key");
        }
        out.push((decode(k), decode(v)));
    }
    Ok(out)
}

/// `base` with `path` appended (one slash between).
fn join(base: &str, path: &str) -> String {
    format!("{}/{path}", base.trim_end_matches('/'))
}

fn check_url(url: &str, what: &str) -> Result<String> {
    let url = url.trim();
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        bail!("{what} `{url}`: expected an http:// or https:// URL (OTLP/HTTP)");
    }
    Ok(url.to_owned())
}

/// The service name (`OTEL_SERVICE_NAME`, else `service.name` of `OTEL_RESOURCE_ATTRIBUTES`,
/// else `ingero`) and the other resource attributes of `OTEL_RESOURCE_ATTRIBUTES`.
pub fn service_and_resource(
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(String, Vec<(String, String)>)> {
    let var = |k: &str| env(k).filter(|v| !v.trim().is_empty());
    let mut resource = match var("OTEL_RESOURCE_ATTRIBUTES") {
        Some(r) => parse_pairs(&r, "OTEL_RESOURCE_ATTRIBUTES")?,
        None => Vec::new(),
    };
    let from_resource = resource
        .iter()
        .find(|(k, _)| k == names::SERVICE_NAME)
        .map(|(_, v)| v.clone());
    resource.retain(|(k, _)| k != names::SERVICE_NAME);
    let service_name = var("OTEL_SERVICE_NAME")
        .map(|s| s.trim().to_owned())
        .or(from_resource)
        .unwrap_or_else(|| "ingero".into());
    Ok((service_name, resource))
}

impl OtlpConfig {
    /// The export's settings from `flags` and the environment `env` reads; `None` when no
    /// endpoint is named anywhere (no export).
    pub fn resolve(
        flags: &OtlpFlags,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<OtlpConfig>> {
        let var = |k: &str| env(k).filter(|v| !v.trim().is_empty());
        for k in [
            "OTEL_EXPORTER_OTLP_PROTOCOL",
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        ] {
            if let Some(p) = var(k) {
                if p.trim() != "http/protobuf" {
                    bail!("{k}={p}: ingero exports OTLP over http/protobuf only");
                }
            }
        }
        let base = flags
            .endpoint
            .clone()
            .or_else(|| var("OTEL_EXPORTER_OTLP_ENDPOINT"));
        let from_flag = flags.endpoint.is_some();
        let signal = |env_key: &str, path: &str| -> Option<String> {
            match (&base, from_flag) {
                (Some(b), true) => Some(join(b, path)),
                _ => var(env_key).or_else(|| base.as_ref().map(|b| join(b, path))),
            }
        };
        let Some(traces_url) = signal("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "v1/traces") else {
            return Ok(None);
        };
        let traces_url = check_url(&traces_url, "traces endpoint")?;
        let metrics_url = match signal("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "v1/metrics") {
            Some(u) => check_url(&u, "metrics endpoint")?,
            // Only a traces URL was named: metrics go beside it.
            None => match traces_url.strip_suffix("/v1/traces") {
                Some(b) => join(b, "v1/metrics"),
                None => join(&traces_url, "../v1/metrics"),
            },
        };
        let mut headers = match var("OTEL_EXPORTER_OTLP_HEADERS") {
            Some(h) => parse_pairs(&h, "OTEL_EXPORTER_OTLP_HEADERS")?,
            None => Vec::new(),
        };
        for h in &flags.headers {
            for (k, v) in parse_pairs(h, "--otlp-header")? {
                headers.retain(|(have, _)| !have.eq_ignore_ascii_case(&k));
                headers.push((k, v));
            }
        }
        let compression = flags
            .compression
            .clone()
            .or_else(|| var("OTEL_EXPORTER_OTLP_COMPRESSION"))
            .unwrap_or_else(|| "gzip".into());
        let gzip = match compression.trim() {
            "gzip" => true,
            "none" => false,
            other => bail!("OTLP compression `{other}`: expected gzip or none"),
        };
        let timeout = match (flags.timeout, var("OTEL_EXPORTER_OTLP_TIMEOUT")) {
            (Some(t), _) => t,
            (None, Some(ms)) => match ms.trim().parse::<u64>() {
                Ok(ms) if ms > 0 => Duration::from_millis(ms),
                _ => bail!("OTEL_EXPORTER_OTLP_TIMEOUT={ms}: expected milliseconds"),
            },
            (None, None) => DEFAULT_TIMEOUT,
        };
        let (service_name, resource) = service_and_resource(env)?;
        let group_by = if flags.group_by.is_empty() {
            vec![super::span::STEP_KEY.to_owned()]
        } else {
            flags.group_by.clone()
        };
        let endpoint = |url: String| Endpoint {
            url,
            headers: headers.clone(),
            gzip,
        };
        Ok(Some(OtlpConfig {
            traces: endpoint(traces_url),
            metrics: endpoint(metrics_url),
            timeout,
            retry: RetryPolicy::default(),
            queue: QueueLimits::default(),
            service_name,
            resource,
            group_by,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(flags: &OtlpFlags, vars: &[(&str, &str)]) -> Result<Option<OtlpConfig>> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        OtlpConfig::resolve(flags, &move |k| {
            vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn no_endpoint_means_no_export() {
        assert!(resolve(&OtlpFlags::default(), &[]).expect("ok").is_none());
    }

    #[test]
    fn endpoints_follow_the_specification() {
        let c = resolve(
            &OtlpFlags::default(),
            &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/")],
        )
        .expect("ok")
        .expect("export");
        assert_eq!(c.traces.url, "http://collector:4318/v1/traces");
        assert_eq!(c.metrics.url, "http://collector:4318/v1/metrics");
        assert!(c.traces.gzip, "gzip by default");
        assert_eq!(c.timeout, DEFAULT_TIMEOUT);
        assert_eq!(c.group_by, ["step"]);

        let c = resolve(
            &OtlpFlags::default(),
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4318"),
                (
                    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                    "https://t.example/custom",
                ),
                ("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "https://m.example/m"),
            ],
        )
        .expect("ok")
        .expect("export");
        assert_eq!(
            c.traces.url, "https://t.example/custom",
            "signal URLs as is"
        );
        assert_eq!(c.metrics.url, "https://m.example/m");

        let flags = OtlpFlags {
            endpoint: Some("http://flag:4318".into()),
            ..Default::default()
        };
        let c = resolve(
            &flags,
            &[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://env/v1/traces")],
        )
        .expect("ok")
        .expect("export");
        assert_eq!(c.traces.url, "http://flag:4318/v1/traces", "the flag wins");

        let c = resolve(
            &OtlpFlags::default(),
            &[(
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "http://t:4318/v1/traces",
            )],
        )
        .expect("ok")
        .expect("export");
        assert_eq!(
            c.metrics.url, "http://t:4318/v1/metrics",
            "metrics beside traces"
        );
        assert!(
            resolve(
                &OtlpFlags {
                    endpoint: Some("collector:4318".into()),
                    ..Default::default()
                },
                &[]
            )
            .is_err()
        );
    }

    #[test]
    fn headers_resource_and_service_name_are_read_and_decoded() {
        let flags = OtlpFlags {
            endpoint: Some("http://c:4318".into()),
            headers: vec!["Authorization=Bearer flag".into()],
            ..Default::default()
        };
        let c = resolve(
            &flags,
            &[
                (
                    "OTEL_EXPORTER_OTLP_HEADERS",
                    "authorization=Bearer%20env,x-tenant=a%2Cb",
                ),
                (
                    "OTEL_RESOURCE_ATTRIBUTES",
                    "deployment.environment=prod,service.name=trainer",
                ),
                ("OTEL_EXPORTER_OTLP_COMPRESSION", "none"),
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
            ],
        )
        .expect("ok")
        .expect("export");
        assert_eq!(
            c.traces.headers,
            [
                ("x-tenant".to_owned(), "a,b".to_owned()),
                ("Authorization".to_owned(), "Bearer flag".to_owned())
            ]
        );
        assert!(!c.traces.gzip);
        assert_eq!(c.timeout, Duration::from_millis(2500));
        assert_eq!(c.service_name, "trainer", "from the resource attributes");
        assert_eq!(
            c.resource,
            [("deployment.environment".to_owned(), "prod".to_owned())]
        );
        let c = resolve(
            &flags,
            &[
                ("OTEL_SERVICE_NAME", "svc"),
                ("OTEL_RESOURCE_ATTRIBUTES", "service.name=trainer"),
            ],
        )
        .expect("ok")
        .expect("export");
        assert_eq!(c.service_name, "svc", "OTEL_SERVICE_NAME wins");
    }

    #[test]
    fn unsupported_settings_are_errors() {
        let flags = OtlpFlags {
            endpoint: Some("http://c:4318".into()),
            ..Default::default()
        };
        assert!(resolve(&flags, &[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]).is_err());
        assert!(resolve(&flags, &[("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")]).is_ok());
        assert!(resolve(&flags, &[("OTEL_EXPORTER_OTLP_COMPRESSION", "zstd")]).is_err());
        assert!(resolve(&flags, &[("OTEL_EXPORTER_OTLP_HEADERS", "novalue")]).is_err());
        assert!(resolve(&flags, &[("OTEL_EXPORTER_OTLP_TIMEOUT", "soon")]).is_err());
    }
}
