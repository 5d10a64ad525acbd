//! Tests of the apt source parsing that enabling Debian's non-free components relies on.

use super::*;

const DEBIAN_SOURCES: &str = "\
Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
";

#[test]
fn deb822_stanzas_give_the_fields_to_copy() {
    let stanzas = deb822_stanzas(DEBIAN_SOURCES);
    assert_eq!(
        stanzas.len(),
        2,
        "deb-src is not a binary source: {stanzas:?}"
    );
    assert_eq!(stanzas[0].uris, "http://deb.debian.org/debian");
    assert_eq!(stanzas[0].suites, ["bookworm", "bookworm-updates"]);
    assert_eq!(stanzas[0].components, ["main"]);
    assert_eq!(
        stanzas[0].nonfree_stanza(),
        "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\n\
         Components: contrib non-free non-free-firmware\n\
         Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
    );
}

#[test]
fn one_line_entries_with_and_without_options() {
    let text = "\
# a comment
deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main
deb http://deb.debian.org/debian bookworm-updates main contrib
deb-src http://deb.debian.org/debian bookworm main
";
    let entries = one_line_entries(text);
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0].suite, "bookworm");
    assert_eq!(entries[1].components, ["main", "contrib"]);
    assert_eq!(
        entries[0].nonfree_stanza(),
        "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\n\
         Components: contrib non-free non-free-firmware\n\
         Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
    );
    assert!(!entries[1].nonfree_stanza().contains("Signed-By"));
}

#[test]
fn versions_and_codenames_are_read() {
    let madison = " libcuda1 | 535.261.03-1 | http://deb.debian.org/debian bookworm/non-free amd64 Packages\n";
    assert_eq!(madison_versions(madison), ["535.261.03-1"]);
    assert!(madison_versions("").is_empty());
    let os = "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nVERSION_CODENAME=bookworm\n";
    assert_eq!(os_codename(os).as_deref(), Some("bookworm"));
    assert_eq!(os_codename("ID=debian\n"), None);
}
