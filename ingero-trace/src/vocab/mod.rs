//! Every word of ingero's recordings beyond the Perfetto schema, each defined once: the
//! debug-annotation keys ([`ArgKey`]), the event names ([`EventName`]: CUDA ops from
//! `ingero_ebpf::CudaOp`'s table, off-CPU reasons, lifecycle ops, the `ingero` track's
//! instants), categories ([`Category`]), track names ([`TrackName`]), the statistics groups
//! ([`StatsGroup`]) and the text forms of values (launch configurations, dimensions,
//! pointers, state slice names, NCCL calls' arguments) with their parsers.
//!
//! The writer interns these tables and the reader resolves what it reads through the same
//! tables, so a word renamed or added here changes both sides at once: a row needs no second
//! edit anywhere. Protobuf field numbers live in `proto::messages`, the same way.

/// Declares a vocabulary: an enum whose variants each have one text, with `ALL` (in
/// declaration order: the order fixed iids are given in), `text()` and `from_text()`.
macro_rules! words {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant, )*
        }

        impl $name {
            /// Every word, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            /// The word as written in a recording.
            pub const fn text(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)*
                }
            }

            /// The word whose text is `text`.
            pub fn from_text(text: &str) -> Option<$name> {
                match text {
                    $($text => Some($name::$variant),)*
                    _ => None,
                }
            }
        }
    };
}
// The submodules below see the macro by textual scope; the rest of the crate through this.
pub(crate) use words;

mod args;
mod launch;
mod names;
mod nccl;

pub use args::{
    ARG_KEYS, ArgKey, DriverArg, LABEL_PREFIX, NVTX_DOMAIN_LABEL, NVTX_LABEL, NvtxArg,
    ProcessLabel, SeekArg, SessionArg, StatsGroup,
};
pub use launch::{
    dim3, launch_text, parse_dim3, parse_launch, parse_ptr, ptr_text, state_name, state_value,
};
pub use names::{Category, EventName, Instant, NVTX_DOMAIN_SEPARATOR, TrackName};
pub use nccl::{NcclFields, nccl_text, parse_nccl};
