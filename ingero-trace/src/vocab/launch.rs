//! The text forms of values written as strings: a launch configuration (the `launch`
//! argument), grid and block dimensions, pointers, and a label state slice's name. Each has its
//! parser here too, beside the function that writes it.

use std::fmt;

use crate::model::LaunchConfig;

/// Name of a state slice: `key=value`.
pub fn state_name(key: &str, value: &str) -> String {
    format!("{key}={value}")
}

/// The value in a state slice's `name` (see [`state_name`]) for its track's label `key`;
/// `None` when the name is not `key=…`.
pub fn state_value<'a>(name: &'a str, key: &str) -> Option<&'a str> {
    name.strip_prefix(key).and_then(|v| v.strip_prefix('='))
}

/// A pointer (a function, a stream): `0x7f00aa`, lowercase, `0x0` for null.
pub fn ptr_text(p: u64) -> String {
    Ptr(p).to_string()
}

/// [`ptr_text`]'s form as `Display`: [`launch_text`] formats its two pointers in place rather
/// than through a string each (past the interner's cap it runs for every launch).
struct Ptr(u64);

impl fmt::Display for Ptr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// Parses [`ptr_text`]'s output: `0x` then hexadecimal digits (either case, as
/// `u64::from_str_radix` takes them); `None` for anything else, such as a number without the
/// prefix.
#[inline]
pub fn parse_ptr(s: &str) -> Option<u64> {
    u64::from_str_radix(s.strip_prefix("0x")?, 16).ok()
}

/// `1024x1x1`.
pub fn dim3(d: [u32; 3]) -> String {
    format!("{}x{}x{}", d[0], d[1], d[2])
}

/// Parses [`dim3`]'s output; `None` for anything else.
pub fn parse_dim3(s: &str) -> Option<[u32; 3]> {
    let mut it = s.split('x').map(|p| p.parse::<u32>().ok());
    let d = [it.next()??, it.next()??, it.next()??];
    it.next().is_none().then_some(d)
}

/// `func=0x7f00aa grid=16x4x1 block=32x8x1 smem=1024 stream=0xabcd` (the value of `launch`).
pub fn launch_text(l: &LaunchConfig) -> String {
    format!(
        "func={} grid={} block={} smem={} stream={}",
        Ptr(l.func),
        dim3(l.grid),
        dim3(l.block),
        l.shared_mem,
        Ptr(l.stream)
    )
}

/// Parses [`launch_text`]'s output; `None` for anything else.
pub fn parse_launch(s: &str) -> Option<LaunchConfig> {
    let mut parts = s.split(' ');
    let mut field = |name: &str| {
        parts
            .next()
            .and_then(|p| p.strip_prefix(name))
            .and_then(|p| p.strip_prefix('='))
    };
    let l = LaunchConfig {
        func: parse_ptr(field("func")?)?,
        grid: parse_dim3(field("grid")?)?,
        block: parse_dim3(field("block")?)?,
        shared_mem: field("smem")?.parse().ok()?,
        stream: parse_ptr(field("stream")?)?,
    };
    parts.next().is_none().then_some(l)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_text_round_trips_and_rejects_garbage() {
        let l = LaunchConfig {
            func: 0x7f00_aa00,
            grid: [16, 4, 1],
            block: [32, 8, 1],
            shared_mem: 1024,
            stream: 0,
        };
        let text = launch_text(&l);
        assert_eq!(
            text,
            "func=0x7f00aa00 grid=16x4x1 block=32x8x1 smem=1024 stream=0x0"
        );
        assert_eq!(parse_launch(&text), Some(l));
        assert_eq!(parse_launch("func=0x1 grid=1x1x1 block=1x1x1 smem=0"), None);
        assert_eq!(parse_launch(&format!("{text} extra=1")), None);
        assert_eq!(
            parse_launch("func=1 grid=1x1x1 block=1x1x1 smem=0 stream=0x0"),
            None
        );
    }

    #[test]
    fn pointers_round_trip_and_need_their_prefix() {
        for p in [0, 1, 0xabcd, 0x7f00_aa00, u64::MAX] {
            assert_eq!(parse_ptr(&ptr_text(p)), Some(p));
        }
        assert_eq!(ptr_text(0), "0x0");
        assert_eq!(ptr_text(0x7F00_AA00), "0x7f00aa00");
        assert_eq!(parse_ptr("0xABcd"), Some(0xabcd));
        assert_eq!(parse_ptr("1234"), None);
        assert_eq!(parse_ptr("0x"), None);
        assert_eq!(parse_ptr("0X1"), None);
        assert_eq!(parse_ptr("0x1g"), None);
    }

    #[test]
    fn state_names_give_back_their_value() {
        assert_eq!(
            state_value(&state_name("phase", "train"), "phase"),
            Some("train")
        );
        assert_eq!(state_value(&state_name("phase", ""), "phase"), Some(""));
        assert_eq!(state_value(&state_name("k", "a=b"), "k"), Some("a=b"));
        assert_eq!(state_value("phase=train", "step"), None);
        assert_eq!(state_value("phasetrain", "phase"), None);
    }

    #[test]
    fn dim3_round_trips_and_rejects_garbage() {
        assert_eq!(parse_dim3(&dim3([1024, 2, 3])), Some([1024, 2, 3]));
        assert_eq!(parse_dim3("1x2"), None);
        assert_eq!(parse_dim3("1x2x3x4"), None);
        assert_eq!(parse_dim3("axbxc"), None);
    }
}
