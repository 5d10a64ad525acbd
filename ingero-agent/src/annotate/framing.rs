//! Splitting a byte stream into lines, with a hard cap per line.
//!
//! Bytes arrive in arbitrary pieces (a line split across many writes, many
//! lines in one read). A line longer than the cap is reported once, as soon
//! as it is known to be too long, and its remaining bytes are skipped up to
//! the next newline, so one bad line never costs the connection. Memory per
//! connection is the partial line only.

/// One item out of the framer.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Frame<'a> {
    /// A complete line, without its `\n`.
    Line(&'a [u8]),
    /// A line exceeded the cap; its bytes are being skipped.
    TooLong,
}

/// Incremental line splitter.
#[derive(Debug)]
pub(crate) struct LineFramer {
    max_line: usize,
    partial: Vec<u8>,
    /// Skipping the rest of an over-long line.
    discarding: bool,
}

impl LineFramer {
    /// A framer that refuses lines longer than `max_line` bytes (excluding
    /// the `\n`).
    pub(crate) fn new(max_line: usize) -> LineFramer {
        LineFramer {
            max_line,
            partial: Vec::new(),
            discarding: false,
        }
    }

    /// Feed the next bytes read, calling `on_frame` for every frame they
    /// complete.
    pub(crate) fn feed(&mut self, mut data: &[u8], mut on_frame: impl FnMut(Frame<'_>)) {
        while !data.is_empty() {
            match data.iter().position(|b| *b == b'\n') {
                Some(i) => {
                    let chunk = &data[..i];
                    data = &data[i + 1..];
                    if self.discarding {
                        self.discarding = false;
                    } else if self.partial.is_empty() {
                        // Common case: the whole line is in this read; no copy.
                        if chunk.len() > self.max_line {
                            on_frame(Frame::TooLong);
                        } else {
                            on_frame(Frame::Line(chunk));
                        }
                    } else if self.partial.len() + chunk.len() > self.max_line {
                        self.partial.clear();
                        on_frame(Frame::TooLong);
                    } else {
                        self.partial.extend_from_slice(chunk);
                        on_frame(Frame::Line(&self.partial));
                        self.partial.clear();
                    }
                }
                None => {
                    if !self.discarding {
                        if self.partial.len() + data.len() > self.max_line {
                            self.partial = Vec::new();
                            self.discarding = true;
                            on_frame(Frame::TooLong);
                        } else {
                            self.partial.extend_from_slice(data);
                        }
                    }
                    return;
                }
            }
        }
        // Release the memory of a long line once it is done with.
        if self.partial.is_empty() && self.partial.capacity() > 4096 {
            self.partial = Vec::new();
        }
    }

    /// At end of stream: the unterminated last line, if any. A complete
    /// JSON object cannot be a strict prefix of a longer one, so a writer
    /// that closed without a final newline still gets its line parsed,
    /// while a line cut off mid-way fails to parse.
    pub(crate) fn finish(&mut self) -> Option<&[u8]> {
        if self.discarding || self.partial.is_empty() {
            None
        } else {
            Some(&self.partial)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Eq)]
    enum Owned {
        Line(Vec<u8>),
        TooLong,
    }

    fn run(framer: &mut LineFramer, pieces: &[&[u8]]) -> Vec<Owned> {
        let mut out = Vec::new();
        for p in pieces {
            framer.feed(p, |f| {
                out.push(match f {
                    Frame::Line(l) => Owned::Line(l.to_vec()),
                    Frame::TooLong => Owned::TooLong,
                })
            });
        }
        out
    }

    fn line(s: &str) -> Owned {
        Owned::Line(s.as_bytes().to_vec())
    }

    #[test]
    fn many_lines_in_one_read() {
        let mut f = LineFramer::new(100);
        assert_eq!(
            run(&mut f, &[b"a\nbb\n\nccc\n"]),
            vec![line("a"), line("bb"), line(""), line("ccc")]
        );
        assert_eq!(f.finish(), None);
    }

    #[test]
    fn a_line_split_byte_by_byte() {
        let mut f = LineFramer::new(100);
        let text = b"{\"labels\":{\"a\":\"b\"}}\nnext\n";
        let pieces: Vec<&[u8]> = text.chunks(1).collect();
        assert_eq!(
            run(&mut f, &pieces),
            vec![line("{\"labels\":{\"a\":\"b\"}}"), line("next")]
        );
    }

    #[test]
    fn over_long_line_is_reported_once_and_skipped() {
        let mut f = LineFramer::new(10);
        let long = vec![b'x'; 25];
        // The long line arrives in pieces; reported once, as soon as known.
        let out = run(&mut f, &[&long[..8], &long[8..16], &long[16..], b"\nok\n"]);
        assert_eq!(out, vec![Owned::TooLong, line("ok")]);
        // Whole in one read.
        let mut f = LineFramer::new(10);
        let mut data = long.clone();
        data.extend_from_slice(b"\nok\n");
        assert_eq!(run(&mut f, &[&data]), vec![Owned::TooLong, line("ok")]);
        // Partial then completed over the cap inside the newline chunk.
        let mut f = LineFramer::new(10);
        assert_eq!(
            run(&mut f, &[b"xxxxxx", b"xxxxxx\nok\n"]),
            vec![Owned::TooLong, line("ok")]
        );
    }

    #[test]
    fn exactly_at_the_cap_is_fine() {
        let mut f = LineFramer::new(4);
        assert_eq!(
            run(&mut f, &[b"ab", b"cd\n", b"abcd\n"]),
            vec![line("abcd"), line("abcd")]
        );
    }

    #[test]
    fn finish_returns_an_unterminated_tail() {
        let mut f = LineFramer::new(100);
        assert_eq!(run(&mut f, &[b"one\ntw", b"o"]), vec![line("one")]);
        assert_eq!(f.finish(), Some(&b"two"[..]));
        let mut f = LineFramer::new(3);
        assert_eq!(run(&mut f, &[b"toolong"]), vec![Owned::TooLong]);
        assert_eq!(f.finish(), None, "a skipped line is not returned");
    }
}
