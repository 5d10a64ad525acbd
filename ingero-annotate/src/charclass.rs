//! Characters a label value must not contain: Unicode general categories Cc
//! (controls, including C1), Cf (invisible format characters: bidi overrides,
//! zero-width characters, the BOM, tag characters), Zl and Zp (line and
//! paragraph separators).
//!
//! Rust's `char` does not expose general categories and a full Unicode
//! database would be a large dependency for four categories, so the Cf set is
//! a compact range table taken from Unicode 15.1 (a superset of earlier
//! versions' Cf). The table is exported in the contract JSON; the Python
//! package carries the same table and a test checks they agree.

/// Inclusive code point ranges of general category Cf (Unicode 15.1).
pub const CF_RANGES: &[(u32, u32)] = &[
    (0x00AD, 0x00AD),   // SOFT HYPHEN
    (0x0600, 0x0605),   // ARABIC NUMBER SIGN .. ARABIC NUMBER MARK ABOVE
    (0x061C, 0x061C),   // ARABIC LETTER MARK
    (0x06DD, 0x06DD),   // ARABIC END OF AYAH
    (0x070F, 0x070F),   // SYRIAC ABBREVIATION MARK
    (0x0890, 0x0891),   // ARABIC POUND/PIASTRE MARK ABOVE
    (0x08E2, 0x08E2),   // ARABIC DISPUTED END OF AYAH
    (0x180E, 0x180E),   // MONGOLIAN VOWEL SEPARATOR
    (0x200B, 0x200F),   // ZERO WIDTH SPACE .. RIGHT-TO-LEFT MARK
    (0x202A, 0x202E),   // bidi embeddings and overrides
    (0x2060, 0x2064),   // WORD JOINER .. INVISIBLE PLUS
    (0x2066, 0x206F),   // bidi isolates, deprecated format characters
    (0xFEFF, 0xFEFF),   // ZERO WIDTH NO-BREAK SPACE (BOM)
    (0xFFF9, 0xFFFB),   // interlinear annotation controls
    (0x110BD, 0x110BD), // KAITHI NUMBER SIGN
    (0x110CD, 0x110CD), // KAITHI NUMBER SIGN ABOVE
    (0x13430, 0x1343F), // Egyptian hieroglyph format controls
    (0x1BCA0, 0x1BCA3), // shorthand format controls
    (0x1D173, 0x1D17A), // musical symbol format controls
    (0xE0001, 0xE0001), // LANGUAGE TAG
    (0xE0020, 0xE007F), // tag characters
];

/// Inclusive ranges of categories Cc, Zl and Zp.
pub const CC_ZL_ZP_RANGES: &[(u32, u32)] = &[
    (0x0000, 0x001F), // C0 controls
    (0x007F, 0x009F), // DEL and C1 controls
    (0x2028, 0x2028), // LINE SEPARATOR (Zl)
    (0x2029, 0x2029), // PARAGRAPH SEPARATOR (Zp)
];

/// Whether `c` is in category Cc, Cf, Zl or Zp.
#[inline]
pub fn is_forbidden_char(c: char) -> bool {
    let cp = c as u32;
    // Fast path: printable ASCII is by far the common case.
    if (0x20..0x7F).contains(&cp) {
        return false;
    }
    in_ranges(CC_ZL_ZP_RANGES, cp) || in_ranges(CF_RANGES, cp)
}

/// The first forbidden character in `s`, if any.
#[inline]
pub fn find_forbidden_char(s: &str) -> Option<char> {
    // All forbidden ASCII bytes are < 0x20 or 0x7F; if every byte is
    // printable ASCII there is nothing to look up.
    if s.bytes().all(|b| (0x20..0x7F).contains(&b)) {
        return None;
    }
    s.chars().find(|c| is_forbidden_char(*c))
}

fn in_ranges(ranges: &[(u32, u32)], cp: u32) -> bool {
    // The tables are short (≤ 21 entries) and sorted; a binary search keeps
    // the non-ASCII path cheap without a lookup structure.
    ranges
        .binary_search_by(|&(lo, hi)| {
            if hi < cp {
                std::cmp::Ordering::Less
            } else if lo > cp {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_sorted_and_disjoint() {
        for table in [CF_RANGES, CC_ZL_ZP_RANGES] {
            for w in table.windows(2) {
                assert!(w[0].0 <= w[0].1 && w[0].1 < w[1].0, "{w:?}");
            }
        }
    }

    #[test]
    fn known_members_are_forbidden() {
        for c in [
            '\u{0}',
            '\t',
            '\n',
            '\r',
            '\u{1b}',
            '\u{7f}',
            '\u{80}',
            '\u{85}',
            '\u{9f}', // Cc
            '\u{ad}',
            '\u{200b}',
            '\u{200d}',
            '\u{200e}',
            '\u{202e}',
            '\u{2066}',
            '\u{2069}',
            '\u{feff}',
            '\u{e0001}',
            '\u{e007f}',
            '\u{1343f}', // Cf
            '\u{2028}',
            '\u{2029}', // Zl, Zp
        ] {
            assert!(is_forbidden_char(c), "U+{:04X}", c as u32);
        }
    }

    #[test]
    fn neighbours_and_ordinary_text_are_allowed() {
        for c in [
            ' ',
            '~',
            'a',
            '\u{a0}',
            '\u{ac}',
            '\u{ae}',
            '\u{200a}',
            '\u{2010}',
            '\u{2027}',
            '\u{2065}',
            '\u{2070}',
            '\u{fffc}',
            '\u{e0000}',
            '\u{e0080}',
        ] {
            assert!(!is_forbidden_char(c), "U+{:04X}", c as u32);
        }
        for s in ["llama-3-8b", "épsilon", "日本語", "🚀 launch", "a\u{2065}b"] {
            assert_eq!(find_forbidden_char(s), None, "{s:?}");
        }
    }

    #[test]
    fn finds_the_first_forbidden_char_in_mixed_text() {
        assert_eq!(find_forbidden_char("ok\u{202e}evil"), Some('\u{202e}'));
        assert_eq!(find_forbidden_char("é\u{85}"), Some('\u{85}'));
        assert_eq!(find_forbidden_char("tab\there"), Some('\t'));
    }

    #[test]
    fn exhaustive_count_matches_the_tables() {
        let n = (0..=0x10FFFFu32)
            .filter_map(char::from_u32)
            .filter(|c| is_forbidden_char(*c))
            .count();
        let expected: u32 = CF_RANGES
            .iter()
            .chain(CC_ZL_ZP_RANGES)
            .map(|(lo, hi)| hi - lo + 1)
            .sum();
        assert_eq!(n as u32, expected);
        // 65 Cc + 2 (Zl, Zp) + 170 Cf in Unicode 15.1.
        assert_eq!(expected, 65 + 2 + 170);
    }
}
