//! The text form of an NCCL call's arguments (the value of the `nccl` argument), and its parser.
//!
//! One interned string per call holds what stays the same from one call to the next on a
//! communicator (element type, operator, root or peer, the communicator and what the agent knew
//! of it), as `launch` does for kernel launches: a training step's hundred all-reduces on one
//! communicator then cost one string. What changes per call (`count`, `stream`, `seq`) has
//! keys of its own.
//!
//! `type=float32 op=sum comm=0x55d0c0 id=5f1c2a9e81b3d004 rank=3 nranks=8`: space-separated
//! `key=value` tokens, each present only when known. A reader ignores keys it does not know, so
//! a later writer may add some.

use std::fmt::Write;

use super::launch::parse_ptr;
use crate::model::{CommSplit, Communicator, CudaArgs, NcclRedOp, NcclType};

/// What the `nccl` argument of a call says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NcclFields {
    /// A collective's or point-to-point call's element type.
    pub datatype: Option<NcclType>,
    /// A reduction's operator.
    pub red_op: Option<NcclRedOp>,
    /// A rooted collective's root.
    pub root: Option<i32>,
    /// A point-to-point call's peer.
    pub peer: Option<i32>,
    /// The communicator the call ran on, or made, or ended.
    pub on: Communicator,
    /// The communicator a new one was split from.
    pub split: Option<CommSplit>,
}

/// The `nccl` argument of an NCCL call; `None` for the calls that have none (groups, and
/// every call that is not NCCL's).
pub fn nccl_text(a: &CudaArgs) -> Option<String> {
    let mut f = NcclFields::default();
    match *a {
        CudaArgs::Collective {
            datatype,
            red_op,
            root,
            on,
            ..
        } => {
            f.datatype = Some(datatype);
            f.red_op = red_op;
            f.root = root;
            f.on = on;
        }
        CudaArgs::PointToPoint {
            datatype, peer, on, ..
        } => {
            f.datatype = Some(datatype);
            f.peer = Some(peer);
            f.on = on;
        }
        CudaArgs::CommCreate { made, split } => {
            f.on = made;
            f.split = split;
        }
        CudaArgs::CommEnd { comm } => f.on.comm = comm,
        _ => return None,
    }
    Some(f.text())
}

impl NcclFields {
    /// The text [`parse_nccl`] reads back.
    pub fn text(&self) -> String {
        let mut s = String::new();
        // Writing to a String cannot fail.
        let mut put = |args: std::fmt::Arguments<'_>| {
            if !s.is_empty() {
                s.push(' ');
            }
            let _ = s.write_fmt(args);
        };
        if let Some(t) = self.datatype {
            put(format_args!("type={}", t.text()));
        }
        if let Some(op) = self.red_op {
            put(format_args!("op={}", op.text()));
        }
        if let Some(root) = self.root {
            put(format_args!("root={root}"));
        }
        if let Some(peer) = self.peer {
            put(format_args!("peer={peer}"));
        }
        put(format_args!("comm={:#x}", self.on.comm));
        if let Some(id) = self.on.id {
            put(format_args!("id={id:016x}"));
        }
        if let Some(rank) = self.on.rank {
            put(format_args!("rank={rank}"));
        }
        if let Some(n) = self.on.nranks {
            put(format_args!("nranks={n}"));
        }
        if let Some(split) = self.split {
            put(format_args!(
                "parent={:#x} color={} key={}",
                split.parent, split.color, split.key
            ));
        }
        s
    }
}

/// Parses an `nccl` argument. Keys it does not know are skipped; a known key with a value that
/// does not parse, or a text without `comm`, gives `None`.
pub fn parse_nccl(s: &str) -> Option<NcclFields> {
    let mut f = NcclFields::default();
    let mut comm = None;
    let (mut parent, mut color, mut key) = (None, None, None);
    for token in s.split(' ') {
        let (k, v) = token.split_once('=')?;
        match k {
            "type" => f.datatype = Some(NcclType::from_text(v)?),
            "op" => f.red_op = Some(NcclRedOp::from_text(v)?),
            "root" => f.root = Some(v.parse().ok()?),
            "peer" => f.peer = Some(v.parse().ok()?),
            "comm" => comm = Some(parse_ptr(v)?),
            "id" => f.on.id = Some(u64::from_str_radix(v, 16).ok()?),
            "rank" => f.on.rank = Some(v.parse().ok()?),
            "nranks" => f.on.nranks = Some(v.parse().ok()?),
            "parent" => parent = Some(parse_ptr(v)?),
            "color" => color = Some(v.parse().ok()?),
            "key" => key = Some(v.parse().ok()?),
            _ => {}
        }
    }
    f.on.comm = comm?;
    if let (Some(parent), Some(color), Some(key)) = (parent, color, key) {
        f.split = Some(CommSplit { parent, color, key });
    }
    Some(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on() -> Communicator {
        Communicator {
            comm: 0x55d0_c000,
            id: Some(0x5f1c_2a9e_81b3_d004),
            rank: Some(3),
            nranks: Some(8),
        }
    }

    #[test]
    fn every_shape_round_trips_through_its_text() {
        let collective = CudaArgs::Collective {
            count: 1 << 20,
            datatype: NcclType(7),
            red_op: Some(NcclRedOp(0)),
            root: None,
            on: on(),
            stream: 0xab,
            seq: Some(12),
        };
        let text = nccl_text(&collective).expect("a collective has one");
        assert_eq!(
            text,
            "type=float32 op=sum comm=0x55d0c000 id=5f1c2a9e81b3d004 rank=3 nranks=8"
        );
        let f = parse_nccl(&text).expect("parses");
        assert_eq!(
            (f.datatype, f.red_op, f.on),
            (Some(NcclType(7)), Some(NcclRedOp(0)), on())
        );

        let rooted = CudaArgs::Collective {
            count: 4,
            datatype: NcclType(42),
            red_op: None,
            root: Some(-1),
            on: Communicator {
                comm: 0x10,
                ..Communicator::default()
            },
            stream: 0,
            seq: None,
        };
        let f = parse_nccl(&nccl_text(&rooted).expect("text")).expect("parses");
        assert_eq!((f.datatype, f.root), (Some(NcclType(42)), Some(-1)));
        assert_eq!(f.on.id, None);

        let p2p = CudaArgs::PointToPoint {
            count: 9,
            datatype: NcclType(9),
            peer: 5,
            on: on(),
            stream: 1,
        };
        let f = parse_nccl(&nccl_text(&p2p).expect("text")).expect("parses");
        assert_eq!((f.peer, f.on), (Some(5), on()));

        let split = CommSplit {
            parent: 0x77,
            color: -1,
            key: 2,
        };
        let created = CudaArgs::CommCreate {
            made: on(),
            split: Some(split),
        };
        let f = parse_nccl(&nccl_text(&created).expect("text")).expect("parses");
        assert_eq!((f.on, f.split), (on(), Some(split)));

        let ended = CudaArgs::CommEnd { comm: 0x99 };
        assert_eq!(nccl_text(&ended).as_deref(), Some("comm=0x99"));
        assert_eq!(nccl_text(&CudaArgs::Group), None);
    }

    #[test]
    fn unknown_keys_are_skipped_and_bad_values_rejected() {
        let f = parse_nccl("comm=0x1 future=yes rank=2").expect("parses");
        assert_eq!(f.on.rank, Some(2));
        assert_eq!(parse_nccl("rank=2"), None, "no comm");
        assert_eq!(parse_nccl("comm=1"), None, "no 0x");
        assert_eq!(parse_nccl("comm=0x1 type=float"), None);
        assert_eq!(parse_nccl("comm=0x1 id=xyz"), None);
        assert_eq!(parse_nccl("comm=0x1 rank"), None);
        assert_eq!(parse_nccl(""), None);
    }
}
