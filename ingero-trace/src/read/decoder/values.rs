//! [`Val`]: a debug annotation's value as the general path keeps it, and the number reading
//! of a string value (pointers are written as `0x…` strings, `vocab::ptr_text`).

use std::sync::Arc;

use crate::vocab;

/// A debug-annotation value.
#[derive(Clone, Debug, PartialEq)]
pub enum Val {
    U(u64),
    I(i64),
    B(bool),
    F(f64),
    S(Arc<str>),
}

impl Val {
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Val::U(v) => Some(*v),
            Val::I(v) => u64::try_from(*v).ok(),
            Val::B(b) => Some(u64::from(*b)),
            Val::F(_) => None,
            Val::S(s) => parse_num(s),
        }
    }
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Val::I(v) => Some(*v),
            other => other.as_u64().and_then(|v| i64::try_from(v).ok()),
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Val::S(s) => Some(s),
            _ => None,
        }
    }
}

/// A string argument as a number: a pointer (`0x…`) or decimal.
pub(super) fn parse_num(s: &str) -> Option<u64> {
    vocab::parse_ptr(s).or_else(|| s.parse().ok())
}
