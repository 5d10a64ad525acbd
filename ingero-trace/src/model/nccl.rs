//! NCCL's calls as ingero models them: the element types and reduction operators collectives
//! take, the communicator a call runs on (and what the agent knew of it), and NCCL's error
//! codes.
//!
//! A communicator is known to the process by its handle (`ncclComm_t`), which differs on every
//! rank. What ties the ranks of one communicator together is the unique id every rank passed to
//! `ncclCommInitRank`: its first 16 bytes (the root's random magic and its address) are the same
//! on every rank, so the agent turns them into [`Communicator::id`]. A communicator split from
//! another takes its id from its parent's and the split's color, which every member of the new
//! communicator shares too. With [`Communicator::id`] and a collective's place in its
//! communicator's order (its `seq`), the calls that make up one collective can be found on every
//! rank and on every host.

use std::borrow::Cow;

/// An `ncclDataType_t`, as the call passed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NcclType(pub u32);

/// NCCL's element types in value order (`ncclInt8` = 0 …), with their sizes in bytes.
const TYPES: [(&str, u64); 12] = [
    ("int8", 1),
    ("uint8", 1),
    ("int32", 4),
    ("uint32", 4),
    ("int64", 8),
    ("uint64", 8),
    ("float16", 2),
    ("float32", 4),
    ("float64", 8),
    ("bfloat16", 2),
    ("float8e4m3", 1),
    ("float8e5m2", 1),
];

impl NcclType {
    /// The type's name (`float32`); `None` for a value NCCL does not define (or a newer one).
    pub fn name(self) -> Option<&'static str> {
        TYPES.get(self.0 as usize).map(|(name, _)| *name)
    }

    /// Bytes per element; `None` for an unknown type.
    pub fn size(self) -> Option<u64> {
        TYPES.get(self.0 as usize).map(|(_, size)| *size)
    }

    /// As written in recordings and JSON: the name, or `unknown:<raw>`.
    pub fn text(self) -> Cow<'static, str> {
        match self.name() {
            Some(name) => Cow::Borrowed(name),
            None => Cow::Owned(format!("unknown:{}", self.0)),
        }
    }

    /// Reads [`Self::text`]'s output; `None` for anything else.
    pub fn from_text(text: &str) -> Option<NcclType> {
        if let Some(raw) = text.strip_prefix("unknown:") {
            return raw.parse().ok().map(NcclType);
        }
        TYPES
            .iter()
            .position(|(name, _)| *name == text)
            .map(|i| NcclType(i as u32))
    }
}

/// An `ncclRedOp_t`: a built-in reduction, or one the program made
/// (`ncclRedOpCreatePreMulSum`), numbered from 5 on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NcclRedOp(pub u32);

/// The built-in reductions in value order (`ncclSum` = 0 …).
const RED_OPS: [&str; 5] = ["sum", "prod", "max", "min", "avg"];

impl NcclRedOp {
    /// As written in recordings and JSON: `sum`, `prod`, `max`, `min`, `avg`, or `custom:<raw>`
    /// for an operator the program created.
    pub fn text(self) -> Cow<'static, str> {
        match RED_OPS.get(self.0 as usize) {
            Some(name) => Cow::Borrowed(name),
            None => Cow::Owned(format!("custom:{}", self.0)),
        }
    }

    /// Reads [`Self::text`]'s output; `None` for anything else.
    pub fn from_text(text: &str) -> Option<NcclRedOp> {
        if let Some(raw) = text.strip_prefix("custom:") {
            return raw.parse().ok().map(NcclRedOp);
        }
        RED_OPS
            .iter()
            .position(|name| *name == text)
            .map(|i| NcclRedOp(i as u32))
    }
}

/// The communicator a call ran on, and what the agent knew of it when it was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Communicator {
    /// The `ncclComm_t` handle (this process's own; other ranks hold other handles).
    pub comm: u64,
    /// The communicator's identity, the same on every rank (see the module docs); `None` when
    /// the agent did not see it created (before tracing started, or by `ncclCommInitAll` and
    /// `ncclCommInitRankScalable`, whose ids are out of the probes' reach).
    pub id: Option<u64>,
    /// This process's rank in it, when known.
    pub rank: Option<i32>,
    /// How many ranks it has, when known.
    pub nranks: Option<i32>,
}

/// How a communicator was split from another (`ncclCommSplit`, `ncclCommShrink`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CommSplit {
    /// The communicator split.
    pub parent: u64,
    /// `ncclCommSplit`'s color (the ranks passing one color form one communicator); for
    /// `ncclCommShrink`, how many ranks were excluded.
    pub color: i32,
    /// `ncclCommSplit`'s key (the order of ranks in the new one); for `ncclCommShrink` its
    /// flags.
    pub key: i32,
}

/// The identity of the communicator split from the one named `parent_id` with `color`: every
/// member of the new communicator computes the same value (a 64-bit mix of the two).
pub fn split_id(parent_id: u64, color: i32) -> u64 {
    mix(parent_id ^ mix(u64::from(color as u32) ^ 0x6e63_636c_7370_6c74))
}

/// The identity of the communicator made from a unique id whose first 16 bytes are `words`.
pub fn unique_id(words: [u64; 2]) -> u64 {
    mix(words[0] ^ mix(words[1]))
}

/// The id of the Perfetto flow that joins the calls making up collective `seq` of the
/// communicator named `id` on every rank (their slices, in time order, are joined by arrows:
/// the last is the rank that came last). Never 0, which Perfetto does not take as a flow.
pub fn collective_flow(id: u64, seq: u64) -> u64 {
    mix(id ^ mix(seq ^ 0x636f_6c6c_6563_7469)).max(1)
}

/// splitmix64's finaliser: every input bit reaches every output bit.
fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The name of an `ncclResult_t`.
pub fn nccl_error_name(code: i32) -> Option<&'static str> {
    Some(match code {
        0 => "ncclSuccess",
        1 => "ncclUnhandledCudaError",
        2 => "ncclSystemError",
        3 => "ncclInternalError",
        4 => "ncclInvalidArgument",
        5 => "ncclInvalidUsage",
        6 => "ncclRemoteError",
        7 => "ncclInProgress",
        _ => return None,
    })
}

/// Whether an NCCL call's return says its work was taken: success, or `ncclInProgress` (a
/// non-blocking communicator queued it).
pub fn nccl_accepted(ret: i32) -> bool {
    ret == 0 || ret == 7
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_and_operators_round_trip_through_their_text() {
        for raw in 0..20 {
            let t = NcclType(raw);
            assert_eq!(NcclType::from_text(&t.text()), Some(t), "{raw}");
            let op = NcclRedOp(raw);
            assert_eq!(NcclRedOp::from_text(&op.text()), Some(op), "{raw}");
        }
        assert_eq!(NcclType(7).text(), "float32");
        assert_eq!(NcclType(7).size(), Some(4));
        assert_eq!(NcclType(9).text(), "bfloat16");
        assert_eq!(NcclType(9).size(), Some(2));
        assert_eq!(NcclType(12).size(), None);
        assert_eq!(NcclType(12).text(), "unknown:12");
        assert_eq!(NcclRedOp(4).text(), "avg");
        assert_eq!(NcclRedOp(5).text(), "custom:5");
        assert_eq!(NcclType::from_text("float"), None);
        assert_eq!(NcclRedOp::from_text("custom:x"), None);
    }

    #[test]
    fn ids_differ_with_any_word_and_split_ids_with_the_color() {
        let a = unique_id([0x1234, 0x0200_93d9_c000_0202]);
        assert_ne!(a, unique_id([0x1235, 0x0200_93d9_c000_0202]));
        assert_ne!(a, unique_id([0x1234, 0x0200_93d9_c000_0203]));
        assert_eq!(a, unique_id([0x1234, 0x0200_93d9_c000_0202]));
        assert_ne!(split_id(a, 0), split_id(a, 1));
        assert_ne!(split_id(a, 0), a);
        assert_eq!(split_id(a, 3), split_id(a, 3));
        assert_eq!(collective_flow(a, 7), collective_flow(a, 7));
        assert_ne!(collective_flow(a, 7), collective_flow(a, 8));
        assert_ne!(collective_flow(a, 7), collective_flow(split_id(a, 0), 7));
    }

    #[test]
    fn nccl_results_are_named_and_in_progress_is_accepted() {
        assert_eq!(nccl_error_name(4), Some("ncclInvalidArgument"));
        assert_eq!(nccl_error_name(8), None);
        assert!(nccl_accepted(0) && nccl_accepted(7));
        assert!(!nccl_accepted(4));
    }
}
