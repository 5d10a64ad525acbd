//! What `cargo xtask cycles` reads from one source file: the paths it names into its own crate
//! (`use crate::…`, `use super::{…}`, `crate::a::b::f()` in code), the modules it declares
//! (`mod x;`, with `#[path]` and `#[cfg(test)]`), and whether the whole file is test-only.
//!
//! A small lexer, not a Rust parser: comments and string contents never yield paths, brackets
//! are balanced to skip `#[cfg(test)]` items whole and to follow inline `mod x { … }` blocks
//! (whose `super` is not the file's).

/// One token; strings keep their text (for `#[path = "…"]`), lifetimes and numbers are dropped
/// or kept as identifiers, whichever is harmless.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    Ident(String),
    Str(String),
    /// `::`
    PathSep,
    Punct(char),
}

#[derive(Clone, Debug)]
struct Tok {
    kind: Kind,
    line: usize,
}

/// A path into the crate, as written, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsePath {
    /// Inline modules (`mod x { … }`) around the path, outermost first.
    pub inline: Vec<String>,
    /// The segments, starting with `crate`, `super`, `self` or (in `use`) a relative name.
    pub segments: Vec<String>,
    pub line: usize,
}

/// A `mod name;` declaration (a module in another file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModDecl {
    /// Inline modules around the declaration, outermost first.
    pub inline: Vec<String>,
    pub name: String,
    /// `#[path = "…"]`, as written.
    pub path: Option<String>,
    /// Under `#[cfg(test)]`: a test module, left out of the graph.
    pub test: bool,
}

/// Everything the graph needs from one file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileFacts {
    pub uses: Vec<UsePath>,
    pub mods: Vec<ModDecl>,
    /// `#![cfg(test)]` at the top: the whole file is a test module.
    pub test_only: bool,
}

/// Reads the facts of one file's text.
pub fn parse(text: &str) -> FileFacts {
    let toks = lex(text);
    let mut p = Parser {
        toks: &toks,
        i: 0,
        facts: FileFacts::default(),
        depth: 0,
        inline: Vec::new(),
    };
    p.file();
    p.facts
}

fn is_ident_start(c: char) -> bool {
    c == '_' || c.is_alphabetic()
}

fn is_ident_char(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

/// Tokens of `text`, without comments; string contents are kept as one token.
fn lex(text: &str) -> Vec<Tok> {
    let s: Vec<char> = text.chars().collect();
    let at = |i: usize| s.get(i).copied().unwrap_or('\0');
    let mut toks = Vec::new();
    let mut i = 0;
    let mut line = 1;
    while i < s.len() {
        let c = s[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && at(i + 1) == '/' {
            while i < s.len() && s[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            // Block comments nest in Rust.
            let mut nest = 0usize;
            while i < s.len() {
                if s[i] == '/' && at(i + 1) == '*' {
                    nest += 1;
                    i += 2;
                } else if s[i] == '*' && at(i + 1) == '/' {
                    nest -= 1;
                    i += 2;
                    if nest == 0 {
                        break;
                    }
                } else {
                    line += usize::from(s[i] == '\n');
                    i += 1;
                }
            }
        } else if c == '"' {
            let start = line;
            let (text, next, lines) = quoted(&s, i + 1);
            toks.push(Tok {
                kind: Kind::Str(text),
                line: start,
            });
            line += lines;
            i = next;
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime/label ('a), which is skipped.
            if at(i + 1) == '\\' {
                i += 3;
                while i < s.len() && s[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                i += 1;
                while i < s.len() && is_ident_char(s[i]) {
                    i += 1;
                }
            }
        } else if is_ident_start(c) || c.is_ascii_digit() {
            let start = i;
            while i < s.len() && is_ident_char(s[i]) {
                i += 1;
            }
            let word: String = s[start..i].iter().collect();
            // Raw strings: r"…", r#"…"#, br"…", cr#"…"#.
            if matches!(word.as_str(), "r" | "br" | "cr") && matches!(at(i), '"' | '#') {
                let mut hashes = 0;
                while at(i + hashes) == '#' {
                    hashes += 1;
                }
                if at(i + hashes) == '"' {
                    let start_line = line;
                    let mut j = i + hashes + 1;
                    let body = j;
                    while j < s.len() {
                        if s[j] == '"' && (1..=hashes).all(|k| at(j + k) == '#') {
                            break;
                        }
                        line += usize::from(s[j] == '\n');
                        j += 1;
                    }
                    toks.push(Tok {
                        kind: Kind::Str(s[body..j.min(s.len())].iter().collect()),
                        line: start_line,
                    });
                    i = j + 1 + hashes;
                    continue;
                }
                if hashes == 1 && is_ident_start(at(i + 1)) && word == "r" {
                    // A raw identifier: r#type.
                    i += 1;
                    let start = i;
                    while i < s.len() && is_ident_char(s[i]) {
                        i += 1;
                    }
                    toks.push(Tok {
                        kind: Kind::Ident(s[start..i].iter().collect()),
                        line,
                    });
                    continue;
                }
            }
            toks.push(Tok {
                kind: Kind::Ident(word),
                line,
            });
        } else if c == ':' && at(i + 1) == ':' {
            toks.push(Tok {
                kind: Kind::PathSep,
                line,
            });
            i += 2;
        } else {
            toks.push(Tok {
                kind: Kind::Punct(c),
                line,
            });
            i += 1;
        }
    }
    toks
}

/// A string's text from just after its opening quote: (text, index after the closing quote,
/// newlines inside).
fn quoted(s: &[char], mut i: usize) -> (String, usize, usize) {
    let mut text = String::new();
    let mut lines = 0;
    while i < s.len() && s[i] != '"' {
        if s[i] == '\\' {
            i += 1;
        }
        if let Some(&c) = s.get(i) {
            lines += usize::from(c == '\n');
            text.push(c);
        }
        i += 1;
    }
    (text, i + 1, lines)
}

struct Parser<'t> {
    toks: &'t [Tok],
    i: usize,
    facts: FileFacts,
    /// Brace depth.
    depth: usize,
    /// Inline modules we are inside: (name, the depth inside their braces).
    inline: Vec<(String, usize)>,
}

impl Parser<'_> {
    fn kind(&self, i: usize) -> Option<&Kind> {
        self.toks.get(i).map(|t| &t.kind)
    }

    fn ident(&self, i: usize) -> Option<&str> {
        match self.kind(i) {
            Some(Kind::Ident(s)) => Some(s),
            _ => None,
        }
    }

    fn punct(&self, i: usize, c: char) -> bool {
        self.kind(i) == Some(&Kind::Punct(c))
    }

    fn line(&self, i: usize) -> usize {
        self.toks.get(i).map_or(0, |t| t.line)
    }

    fn inline_names(&self) -> Vec<String> {
        self.inline.iter().map(|(n, _)| n.clone()).collect()
    }

    fn file(&mut self) {
        // Attributes read so far that apply to the next item.
        let mut test = false;
        let mut path: Option<String> = None;
        while self.i < self.toks.len() {
            if self.punct(self.i, '#') {
                let inner = self.punct(self.i + 1, '!');
                let (cfg_test, path_attr) = self.attribute();
                if inner {
                    if cfg_test && self.inline.is_empty() {
                        self.facts.test_only = true;
                    }
                } else {
                    test |= cfg_test;
                    path = path_attr.or(path);
                }
                continue;
            }
            if let Some(decl) = self.mod_decl() {
                self.facts.mods.push(ModDecl {
                    inline: self.inline_names(),
                    name: decl,
                    path: path.take(),
                    test,
                });
                test = false;
                continue;
            }
            if test {
                // Any other item under #[cfg(test)]: its uses are the tests'.
                self.skip_item();
                test = false;
                path = None;
                continue;
            }
            match self.kind(self.i).cloned() {
                Some(Kind::Ident(word)) if word == "use" => {
                    self.i += 1;
                    self.use_item();
                }
                Some(Kind::Ident(word)) if word == "mod" => {
                    // `mod name {`: an inline module.
                    if let (Some(name), true) =
                        (self.ident(self.i + 1), self.punct(self.i + 2, '{'))
                    {
                        let name = name.to_owned();
                        self.depth += 1;
                        self.inline.push((name, self.depth));
                        self.i += 3;
                    } else {
                        self.i += 1;
                    }
                    path = None;
                }
                Some(Kind::Ident(word))
                    if matches!(word.as_str(), "crate" | "super" | "self")
                        && self.kind(self.i + 1) == Some(&Kind::PathSep)
                        && !self.after_pub_in() =>
                {
                    self.code_path();
                }
                Some(Kind::Punct('{')) => {
                    self.depth += 1;
                    self.i += 1;
                }
                Some(Kind::Punct('}')) => {
                    if self.inline.last().is_some_and(|(_, d)| *d == self.depth) {
                        self.inline.pop();
                    }
                    self.depth = self.depth.saturating_sub(1);
                    self.i += 1;
                }
                Some(Kind::Punct(';')) => {
                    path = None;
                    self.i += 1;
                }
                _ => self.i += 1,
            }
        }
    }

    /// Reads `#[…]` or `#![…]` at the cursor: whether it is `cfg(test)`, and a `path = "…"`.
    fn attribute(&mut self) -> (bool, Option<String>) {
        let mut j = self.i + 1;
        if self.punct(j, '!') {
            j += 1;
        }
        if !self.punct(j, '[') {
            self.i = j;
            return (false, None);
        }
        let start = j + 1;
        let mut nest = 0usize;
        while j < self.toks.len() {
            match self.kind(j) {
                Some(Kind::Punct('[')) => nest += 1,
                Some(Kind::Punct(']')) => {
                    nest -= 1;
                    if nest == 0 {
                        break;
                    }
                }
                _ => {}
            }
            j += 1;
        }
        let body = &self.toks[start.min(j)..j];
        self.i = j + 1;
        let kinds: Vec<&Kind> = body.iter().map(|t| &t.kind).collect();
        let ident = |k: &Kind, s: &str| matches!(k, Kind::Ident(w) if w == s);
        let cfg_test = kinds.len() == 4
            && ident(kinds[0], "cfg")
            && kinds[1] == &Kind::Punct('(')
            && ident(kinds[2], "test")
            && kinds[3] == &Kind::Punct(')');
        let path = match kinds.as_slice() {
            [p, Kind::Punct('='), Kind::Str(s)] if ident(p, "path") => Some(s.clone()),
            _ => None,
        };
        (cfg_test, path)
    }

    /// `[pub[(…)]] mod name ;` at the cursor: the name, the cursor moved past it.
    fn mod_decl(&mut self) -> Option<String> {
        let mut j = self.i;
        if self.ident(j) == Some("pub") {
            j += 1;
            if self.punct(j, '(') {
                while j < self.toks.len() && !self.punct(j, ')') {
                    j += 1;
                }
                j += 1;
            }
        }
        if self.ident(j) != Some("mod") {
            return None;
        }
        let name = self.ident(j + 1)?.to_owned();
        if !self.punct(j + 2, ';') {
            return None;
        }
        self.i = j + 3;
        Some(name)
    }

    /// Skips one item: up to a `;` outside brackets, or to the brace that closes its body.
    fn skip_item(&mut self) {
        let mut nest = 0usize;
        while self.i < self.toks.len() {
            let k = self.kind(self.i).cloned();
            self.i += 1;
            match k {
                Some(Kind::Punct('(' | '[' | '{')) => nest += 1,
                Some(Kind::Punct(c @ (')' | ']' | '}'))) => {
                    nest = nest.saturating_sub(1);
                    if nest == 0 && c == '}' {
                        return;
                    }
                }
                Some(Kind::Punct(';')) if nest == 0 => return,
                _ => {}
            }
        }
    }

    /// Whether the path at the cursor is the one of `pub(in path)` (a visibility, no import).
    fn after_pub_in(&self) -> bool {
        self.i >= 2 && self.ident(self.i - 1) == Some("in") && self.punct(self.i - 2, '(')
    }

    /// A path in code (`crate::a::b::f()`): its leading segments.
    fn code_path(&mut self) {
        let line = self.line(self.i);
        let mut segments = Vec::new();
        while let Some(word) = self.ident(self.i) {
            segments.push(word.to_owned());
            self.i += 1;
            if self.kind(self.i) == Some(&Kind::PathSep) && self.ident(self.i + 1).is_some() {
                self.i += 1;
            } else {
                break;
            }
        }
        self.facts.uses.push(UsePath {
            inline: self.inline_names(),
            segments,
            line,
        });
    }

    /// A `use` tree, cursor just after `use` (also `impl Trait + use<'a>`, which names nothing).
    fn use_item(&mut self) {
        let line = self.line(self.i);
        let starts_tree = matches!(
            self.kind(self.i),
            Some(Kind::Ident(_) | Kind::PathSep | Kind::Punct('{'))
        );
        if !starts_tree {
            return;
        }
        let mut paths = Vec::new();
        self.use_tree(Vec::new(), &mut paths);
        let inline = self.inline_names();
        for segments in paths {
            if segments.is_empty() || segments[0].is_empty() {
                continue;
            }
            self.facts.uses.push(UsePath {
                inline: inline.clone(),
                segments,
                line,
            });
        }
    }

    /// One tree of a `use`, each path it imports pushed to `out` (a leading `::` marks an
    /// external crate: the path then starts with an empty segment and is dropped).
    fn use_tree(&mut self, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
        let mut path = prefix;
        loop {
            match self.kind(self.i).cloned() {
                Some(Kind::PathSep) => {
                    if path.is_empty() {
                        path.push(String::new());
                    }
                    self.i += 1;
                }
                Some(Kind::Ident(word)) if word == "as" => {
                    self.i += 2;
                    break;
                }
                Some(Kind::Ident(word)) => {
                    // `self` inside a group names the group's own path.
                    if word != "self" || path.is_empty() {
                        path.push(word);
                    }
                    self.i += 1;
                }
                Some(Kind::Punct('{')) => {
                    self.i += 1;
                    while self.i < self.toks.len() {
                        if self.punct(self.i, '}') {
                            self.i += 1;
                            break;
                        }
                        if self.punct(self.i, ',') {
                            self.i += 1;
                            continue;
                        }
                        let before = self.i;
                        self.use_tree(path.clone(), out);
                        if self.i == before {
                            // Not a tree (malformed text): step over rather than loop.
                            self.i += 1;
                        }
                    }
                    return;
                }
                Some(Kind::Punct('*')) => {
                    self.i += 1;
                    break;
                }
                _ => break,
            }
        }
        if !path.is_empty() {
            out.push(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(text: &str) -> Vec<String> {
        parse(text)
            .uses
            .iter()
            .map(|u| {
                let mut s = u.inline.join("/");
                if !s.is_empty() {
                    s.push('|');
                }
                s + &u.segments.join("::")
            })
            .collect()
    }

    #[test]
    fn use_trees_expand_and_comments_and_strings_are_not_code() {
        let text = r##"
            //! See [`crate::doc::Only`].
            use crate::{a::{B, c::D}, e::{self, F}};
            use super::*;
            use std::fmt; use ::ext::X;
            /* crate::block::comment /* nested */ crate::still::comment */
            const S: &str = "crate::in::string";
            const R: &str = r#"crate::raw "quoted" string"#;
            const C: char = '{';
            fn f<'a>(x: &'a u8) -> u8 { crate::g::h(x) + super::super::k::V }
            pub(in crate::vis) struct P;
            impl T for U { fn t(&self) -> impl Sized + use<'_> { self::m::n() } }
        "##;
        assert_eq!(
            paths(text),
            [
                "crate::a::B",
                "crate::a::c::D",
                "crate::e",
                "crate::e::F",
                "super",
                "std::fmt",
                "crate::g::h",
                "super::super::k::V",
                "self::m::n",
            ]
        );
    }

    #[test]
    fn test_items_are_skipped_and_inline_modules_are_followed() {
        let text = r#"
            #[cfg(test)]
            mod tests { use crate::only::in_tests; }
            #[cfg(test)]
            use crate::test::import;
            #[cfg(test)]
            #[path = "x_tests.rs"]
            mod x_tests;
            #[path = "other.rs"]
            pub(crate) mod other;
            mod inner {
                use super::Outer;
                fn f() { let v = [0u8; 2]; }
            }
            use crate::after::Inner;
        "#;
        let facts = parse(text);
        assert_eq!(paths(text), ["inner|super::Outer", "crate::after::Inner"]);
        assert_eq!(
            facts.mods,
            [
                ModDecl {
                    inline: vec![],
                    name: "x_tests".into(),
                    path: Some("x_tests.rs".into()),
                    test: true,
                },
                ModDecl {
                    inline: vec![],
                    name: "other".into(),
                    path: Some("other.rs".into()),
                    test: false,
                },
            ]
        );
        assert!(!facts.test_only);
        assert!(parse("#![cfg(test)]\nuse crate::a;").test_only);
    }
}
