//! [`Table`]: rows of text cells rendered either as an aligned text table (numbers to the
//! right) or as CSV (RFC 4180 quoting), so the two formats never disagree on content.

use std::fmt::Write as _;

/// Headers and rows of cells.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Table {
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

fn numeric(cell: &str) -> bool {
    cell.starts_with(|c: char| c.is_ascii_digit() || c == '+' || c == '-') && !cell.contains(' ')
}

impl Table {
    pub fn new(headers: &[&str]) -> Table {
        Table {
            headers: headers.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    /// Aligned columns, two spaces apart; text left, numbers right.
    pub fn text(&self) -> String {
        let cols = self.headers.len();
        let mut width = vec![0usize; cols];
        for r in std::iter::once(&self.headers).chain(&self.rows) {
            for (i, c) in r.iter().enumerate().take(cols) {
                width[i] = width[i].max(c.chars().count());
            }
        }
        let mut out = String::new();
        for (n, r) in std::iter::once(&self.headers).chain(&self.rows).enumerate() {
            let mut line = String::new();
            for (i, c) in r.iter().enumerate().take(cols) {
                if i > 0 {
                    line.push_str("  ");
                }
                let pad = width[i] - c.chars().count();
                if n > 0 && numeric(c) {
                    line.push_str(&" ".repeat(pad));
                    line.push_str(c);
                } else {
                    line.push_str(c);
                    line.push_str(&" ".repeat(pad));
                }
            }
            let _ = writeln!(out, "{}", line.trim_end());
        }
        out
    }

    pub fn csv(&self) -> String {
        let mut out = String::new();
        for r in std::iter::once(&self.headers).chain(&self.rows) {
            let cells: Vec<String> = r.iter().map(|c| csv_cell(c)).collect();
            let _ = writeln!(out, "{}", cells.join(","));
        }
        out
    }
}

/// Quotes a CSV cell when it holds a comma, quote or line break.
pub fn csv_cell(c: &str) -> String {
    if c.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", c.replace('"', "\"\""))
    } else {
        c.to_owned()
    }
}

/// The first header of a table whose rows are several hosts'.
pub fn host_header(with_host: bool) -> Vec<&'static str> {
    if with_host { vec!["host"] } else { Vec::new() }
}

/// The first cell of a row of such a table.
pub fn host_cell(with_host: bool, host: &Option<String>) -> Vec<String> {
    if with_host {
        vec![host.clone().unwrap_or_else(|| "-".to_owned())]
    } else {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligns_text_and_quotes_csv() {
        let mut t = Table::new(&["op", "count"]);
        t.push(vec!["cudaMalloc".into(), "3".into()]);
        t.push(vec!["a,b".into(), "12".into()]);
        assert_eq!(
            t.text(),
            "op          count\ncudaMalloc      3\na,b            12\n"
        );
        assert_eq!(t.csv(), "op,count\ncudaMalloc,3\n\"a,b\",12\n");
    }
}
