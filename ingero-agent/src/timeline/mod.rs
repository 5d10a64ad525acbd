//! The trace timeline: clock conversion (and, later, the merger and label state).

pub mod clock;
pub mod merger;
pub mod record;
