//! [`Json`]: a report as JSON text, written straight from the report's rows rather than through
//! a [`Value`] tree (with 20,000 requests the tree costs several times the text in time and
//! memory). The text is the same: `preserve_order` keeps struct fields in order in both.
//! [`Json::value`] still builds the tree, for inspecting a report.

use std::fmt;

use serde::Serialize;
use serde_json::Value;

/// A report, shown as compact JSON.
pub struct Json<T>(pub(super) T);

impl<T: Serialize> Json<T> {
    /// The report as a JSON tree (`null` if it cannot be serialised).
    pub fn value(&self) -> Value {
        serde_json::to_value(&self.0).unwrap_or(Value::Null)
    }
}

impl<T: Serialize> fmt::Display for Json<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Reports are plain structs of numbers and strings, whose serialising cannot fail;
        // should it, the text is what the tree's would be (`null`).
        match serde_json::to_string(&self.0) {
            Ok(text) => f.write_str(&text),
            Err(_) => f.write_str("null"),
        }
    }
}
