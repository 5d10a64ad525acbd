//! Trace and span ids, and W3C `traceparent` values.
//!
//! - A step's trace id is a 128-bit hash of (run id, `step`, value), so every rank's step N,
//!   on any host, lands in one trace without coordination; a request's is the hash of (run
//!   id, `request_id`, value) unless its annotation carries a `traceparent`, whose trace it
//!   joins (with the parent span id it names). Other groupings hash all their key=value pairs.
//! - A span id is a 64-bit hash of the trace id, the host's machine id, the process part of
//!   the group, its values and its start on the trace clock: the same recording gives the
//!   same ids live and replayed, and two hosts' spans never share one.
//!
//! The hash is FNV-1a (128 and 64 bits) over length-prefixed fields, each 64-bit half then
//! finished with MurmurHash3's `fmix64` so that ids of neighbouring steps differ in every
//! byte (FNV alone changes few bits for a changed last byte, and samplers read the low bytes).
//! Stable across releases and platforms (docs/fleet.md spells it out, so other tools can
//! compute a step's trace id).

/// FNV-1a, 128 bits, over `fields`, each prefixed by its length (so `("ab","c")` and
/// `("a","bc")` differ).
pub fn fnv1a128(fields: &[&[u8]]) -> u128 {
    const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
    let mut h = OFFSET;
    let mut eat = |b: u8| {
        h ^= u128::from(b);
        h = h.wrapping_mul(PRIME);
    };
    for f in fields {
        for b in (f.len() as u64).to_le_bytes() {
            eat(b);
        }
        for b in *f {
            eat(*b);
        }
    }
    h
}

/// FNV-1a, 64 bits, over length-prefixed `fields`.
pub fn fnv1a64(fields: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |b: u8| {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    };
    for f in fields {
        for b in (f.len() as u64).to_le_bytes() {
            eat(b);
        }
        for b in *f {
            eat(*b);
        }
    }
    h
}

/// MurmurHash3's 64-bit finaliser: every input bit affects every output bit.
pub fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

/// A trace id from `run_id` and the pairs it is keyed by; never all zeros (invalid in OTLP).
pub fn trace_id(run_id: &str, pairs: &[(&str, &str)]) -> [u8; 16] {
    let mut fields: Vec<&[u8]> = vec![b"ingero.trace", run_id.as_bytes()];
    for (k, v) in pairs {
        fields.push(k.as_bytes());
        fields.push(v.as_bytes());
    }
    let h = fnv1a128(&fields);
    let (hi, lo) = (fmix64((h >> 64) as u64), fmix64(h as u64));
    ((u128::from(hi) << 64) | u128::from(lo))
        .max(1)
        .to_be_bytes()
}

/// A span id (see the module docs); never all zeros.
pub fn span_id(
    trace_id: &[u8; 16],
    machine_id: u32,
    process: Option<u32>,
    values: &[&str],
    start_ns: u64,
) -> [u8; 8] {
    let machine = machine_id.to_le_bytes();
    let process = process.map_or([0xff; 5], |p| {
        let b = p.to_le_bytes();
        [1, b[0], b[1], b[2], b[3]]
    });
    let start = start_ns.to_le_bytes();
    let mut fields: Vec<&[u8]> = vec![trace_id, &machine, &process, &start];
    fields.extend(values.iter().map(|v| v.as_bytes()));
    fmix64(fnv1a64(&fields)).max(1).to_be_bytes()
}

/// The trace and parent span a W3C `traceparent` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceParent {
    pub trace_id: [u8; 16],
    pub parent_span_id: [u8; 8],
    pub sampled: bool,
}

/// Parses `00-<32 hex>-<16 hex>-<2 hex>` (version 00; later versions may append fields, as
/// the W3C recommendation allows). All-zero ids and version `ff` are invalid.
pub fn parse_traceparent(text: &str) -> Option<TraceParent> {
    let mut parts = text.trim().split('-');
    let version = parts.next()?;
    let (trace, parent, flags) = (parts.next()?, parts.next()?, parts.next()?);
    if version.len() != 2 || version.eq_ignore_ascii_case("ff") || hex_bytes::<1>(version).is_none()
    {
        return None;
    }
    if version == "00" && parts.next().is_some() {
        return None;
    }
    let trace_id = hex_bytes::<16>(trace)?;
    let parent_span_id = hex_bytes::<8>(parent)?;
    let flags = hex_bytes::<1>(flags)?;
    if trace_id == [0; 16] || parent_span_id == [0; 8] {
        return None;
    }
    Some(TraceParent {
        trace_id,
        parent_span_id,
        sampled: flags[0] & 1 == 1,
    })
}

fn hex_bytes<const N: usize>(s: &str) -> Option<[u8; N]> {
    if s.len() != 2 * N || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// Lower-case hex of an id.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_matches_the_published_vectors_for_one_field() {
        // FNV-1a 64 of "a" is 0xaf63dc4c8601ec8c; with the length prefix the input is the 8
        // bytes of 1u64 then "a", which the plain algorithm gives too.
        let mut plain: u64 = 0xcbf2_9ce4_8422_2325;
        for b in 1u64.to_le_bytes().iter().chain(b"a") {
            plain ^= u64::from(*b);
            plain = plain.wrapping_mul(0x0000_0100_0000_01b3);
        }
        assert_eq!(fnv1a64(&[b"a"]), plain);
        assert_ne!(fnv1a64(&[b"ab", b"c"]), fnv1a64(&[b"a", b"bc"]));
        assert_ne!(fnv1a128(&[b"ab", b"c"]), fnv1a128(&[b"a", b"bc"]));
    }

    #[test]
    fn every_rank_of_a_step_shares_a_trace_and_not_a_span() {
        let a = trace_id("job-7", &[("step", "812")]);
        assert_eq!(a, trace_id("job-7", &[("step", "812")]));
        assert_ne!(a, trace_id("job-7", &[("step", "813")]));
        assert_ne!(a, trace_id("job-8", &[("step", "812")]));
        let s = |m, p| span_id(&a, m, Some(p), &["812"], 5);
        assert_ne!(s(1, 10), s(1, 11));
        assert_ne!(s(1, 10), s(2, 10));
        assert_ne!(span_id(&a, 1, None, &["812"], 5), s(1, 10));
    }

    #[test]
    fn traceparent_is_parsed_strictly() {
        let tp = parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
            .expect("valid");
        assert_eq!(hex(&tp.trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(hex(&tp.parent_span_id), "00f067aa0ba902b7");
        assert!(tp.sampled);
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473x-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        ] {
            assert_eq!(parse_traceparent(bad), None, "{bad}");
        }
        // A later version may carry more fields.
        assert!(
            parse_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-x")
                .is_some()
        );
    }
}
