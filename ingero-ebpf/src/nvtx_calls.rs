//! The NVTX entry points the fallback uprobes attach to (when a process has no injection tool
//! of ingero's): one row per function, with where its message is. The attach cookie is the
//! row's value, so the kernel side knows how to read the message and user space which call
//! fired.
//!
//! Only the global-domain C API is here: `nvtxDomain*` calls need the tool's domain handles,
//! and without a tool every domain is NULL anyway (`nvtxDomainCreateA` returns NULL).

/// Where a call's message is at entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageAt {
    /// No message (`nvtxRangePop`, `nvtxRangeEnd`).
    None,
    /// `rdi` is a NUL-terminated byte string (the `A` forms).
    Ascii,
    /// `rdi` is a NUL-terminated `wchar_t` string, UTF-32 on Linux (the `W` forms).
    Wide,
    /// `rdi` is an `nvtxEventAttributes_t*` (the `Ex` forms): `messageType` at +32, the
    /// message pointer at +40 (v2 layout, 48 bytes).
    Attributes,
}

macro_rules! nvtx_calls {
    ($($variant:ident = $value:literal, $symbol:literal, $at:ident;)*) => {
        /// An NVTX function the fallback probes.
        #[repr(u16)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum NvtxCall {
            $($variant = $value,)*
        }

        impl NvtxCall {
            /// Every call, in value order.
            pub const ALL: &'static [NvtxCall] = &[$(NvtxCall::$variant,)*];

            pub fn from_u16(v: u16) -> Option<NvtxCall> {
                match v {
                    $($value => Some(NvtxCall::$variant),)*
                    _ => None,
                }
            }

            /// The symbol name (exported by `libnvToolsExt.so.1` and `libnvtx3interop.so.1`,
            /// local in torch's `libtorch_python.so`).
            pub fn symbol(self) -> &'static str {
                match self {
                    $(NvtxCall::$variant => $symbol,)*
                }
            }

            /// Where the message is at entry.
            pub fn message_at(self) -> MessageAt {
                match self {
                    $(NvtxCall::$variant => MessageAt::$at,)*
                }
            }
        }
    };
}

nvtx_calls! {
    RangePushA = 1, "nvtxRangePushA", Ascii;
    RangePushW = 2, "nvtxRangePushW", Wide;
    RangePushEx = 3, "nvtxRangePushEx", Attributes;
    RangePop = 4, "nvtxRangePop", None;
    RangeStartA = 5, "nvtxRangeStartA", Ascii;
    RangeStartW = 6, "nvtxRangeStartW", Wide;
    RangeStartEx = 7, "nvtxRangeStartEx", Attributes;
    RangeEnd = 8, "nvtxRangeEnd", None;
    MarkA = 9, "nvtxMarkA", Ascii;
    MarkW = 10, "nvtxMarkW", Wide;
    MarkEx = 11, "nvtxMarkEx", Attributes;
}

/// What a call does to the thread's ranges, for pairing in user space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NvtxAction {
    Push,
    Pop,
    /// Start and end: recorded as instants, since without a tool every id is 0.
    Start,
    End,
    Mark,
}

impl NvtxCall {
    pub fn action(self) -> NvtxAction {
        match self {
            NvtxCall::RangePushA | NvtxCall::RangePushW | NvtxCall::RangePushEx => NvtxAction::Push,
            NvtxCall::RangePop => NvtxAction::Pop,
            NvtxCall::RangeStartA | NvtxCall::RangeStartW | NvtxCall::RangeStartEx => {
                NvtxAction::Start
            }
            NvtxCall::RangeEnd => NvtxAction::End,
            NvtxCall::MarkA | NvtxCall::MarkW | NvtxCall::MarkEx => NvtxAction::Mark,
        }
    }
}

/// `messageType` values of `nvtxEventAttributes_t`.
pub mod message_type {
    pub const ASCII: i32 = 1;
    pub const UNICODE: i32 = 2;
    pub const REGISTERED: i32 = 3;
}

/// Offsets in `nvtxEventAttributes_t` (x86-64, v2 layout).
pub mod attributes {
    /// `size` (u16): at least [`V2_SIZE`] for the fields below to exist.
    pub const SIZE: usize = 2;
    pub const MESSAGE_TYPE: usize = 32;
    pub const MESSAGE: usize = 40;
    pub const V2_SIZE: u16 = 48;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_symbols_are_distinct() {
        for (i, c) in NvtxCall::ALL.iter().enumerate() {
            assert_eq!(NvtxCall::from_u16(*c as u16), Some(*c));
            assert_eq!(*c as u16, i as u16 + 1, "values are dense and ordered");
            for d in &NvtxCall::ALL[i + 1..] {
                assert_ne!(c.symbol(), d.symbol());
            }
        }
        assert_eq!(NvtxCall::from_u16(0), None);
    }
}
