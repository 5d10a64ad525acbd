//! The text forms of values written as strings: a launch configuration (the `launch`
//! argument), grid and block dimensions, and a label state slice's name.

use crate::model::LaunchConfig;

/// Name of a state slice: `key=value`.
pub fn state_name(key: &str, value: &str) -> String {
    format!("{key}={value}")
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
        "func={:#x} grid={} block={} smem={} stream={:#x}",
        l.func,
        dim3(l.grid),
        dim3(l.block),
        l.shared_mem,
        l.stream
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
    let hex = |v: &str| u64::from_str_radix(v.strip_prefix("0x")?, 16).ok();
    let l = LaunchConfig {
        func: hex(field("func")?)?,
        grid: parse_dim3(field("grid")?)?,
        block: parse_dim3(field("block")?)?,
        shared_mem: field("smem")?.parse().ok()?,
        stream: hex(field("stream")?)?,
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
    fn dim3_round_trips_and_rejects_garbage() {
        assert_eq!(parse_dim3(&dim3([1024, 2, 3])), Some([1024, 2, 3]));
        assert_eq!(parse_dim3("1x2"), None);
        assert_eq!(parse_dim3("1x2x3x4"), None);
        assert_eq!(parse_dim3("axbxc"), None);
    }
}
