//! Small helpers shared across modules.

use anyhow::Context;

/// Truncates `s` to at most `max` bytes, on a character boundary.
pub(crate) fn truncate_utf8(s: &mut String, max: usize) {
    if s.len() <= max {
        return;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
}

/// `text` with every control character (C0, DEL, C1) and the Unicode line
/// and paragraph separators escaped (`\n`, `\r`, `\t`, `\\`, else
/// `\u{..}`), so that text from a guest stays on the one log line it is
/// logged on and can neither forge another nor drive a terminal.
pub(crate) fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    let special = |c: char| c.is_control() || c == '\\' || c == '\u{2028}' || c == '\u{2029}';
    if !text.contains(special) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\\' => out.push_str("\\\\"),
            c if special(c) => out.extend(c.escape_unicode()),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Makes a directory's entries durable (a file created or renamed in it):
/// `fsync` of the file alone does not cover its name after a power cut.
pub(crate) fn sync_dir(dir: &std::path::Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// SHA-256 of `bytes`, in lowercase hex.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// Writes a file atomically (temp file, fsync, rename); the caller syncs
/// the directory. The temp file's name is unique: two writers of one
/// deployment (a build, and a turn recompiling it after another host
/// adopted that build) must not write into each other's file.
pub(crate) fn write_atomic(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension(format!("tmp-{}", uuid::Uuid::now_v7().simple()));
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// A UUIDv7 whose 74 bits after the timestamp are all fresh randomness
/// (`Uuid::now_v7` spends 42 of them on a counter shared by the process):
/// for ids that are capabilities, such as session ids, which a bare
/// invocation key's holders must not guess from a neighbour's.
pub(crate) fn random_v7() -> uuid::Uuid {
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    random_v7_at(millis)
}

/// `random_v7` at a given millisecond: the tests hold one millisecond
/// fixed, which a machine's clock cannot be relied on to do.
fn random_v7_at(millis: u64) -> uuid::Uuid {
    use rand::RngCore;
    let mut random = [0u8; 10];
    rand::rng().fill_bytes(&mut random);
    uuid::Builder::from_unix_timestamp_millis(millis, &random).into_uuid()
}

/// Creates `dir` and its missing parents with mode 0700 (on Unix): the
/// data dir holds the journal and, by default, the master key. A directory
/// that exists keeps its mode.
pub fn create_private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

/// Writes a file readable only by its owner (mode 0600), durably: the file
/// and its directory entry are synced (the master key, a minted key).
pub fn write_secret_file(path: &std::path::Path, secret: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    file.write_all(secret.as_bytes())?;
    file.write_all(b"\n")?;
    file.sync_all()?;
    if let Some(parent) = path.parent() {
        sync_dir(parent).with_context(|| format!("cannot sync {}", parent.display()))?;
    }
    Ok(())
}

/// Raises the soft open-file limit to the hard one: every open stream is a
/// socket (the server's clients, the bench's idle streams). Failing is not an
/// error: the process runs with the limit it has.
#[cfg(unix)]
pub(crate) fn raise_open_file_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid, writable `rlimit`.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return;
    }
    if limit.rlim_cur < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max;
        // SAFETY: `limit` is a valid `rlimit`; the soft limit does not exceed the hard one.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) };
    }
}

#[cfg(not(unix))]
pub fn raise_open_file_limit() {}

/// reqwest is built with `rustls-no-provider` (host/Cargo.toml): it takes
/// the process's rustls provider, which this makes ring, the one the guests'
/// outbound client uses too. Call it before building a reqwest client; a
/// second call does nothing (the Err only says one is installed).
pub fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Whether a JSON text holds a string with a NUL character: `\u0000`
/// unescaped once (a raw NUL is not valid JSON). Text with NUL is refused
/// where it would enter a stored record (a request's body, a guest's tool
/// call), on every engine alike: PostgreSQL's `text` and `jsonb` cannot
/// hold it.
pub(crate) fn json_has_nul(json: &str) -> bool {
    let mut bytes = json.as_bytes().iter();
    while let Some(&byte) = bytes.next() {
        if byte != b'\\' {
            continue;
        }
        // An escape: `\uXXXX` or one escaped character.
        if bytes.next() == Some(&b'u') && bytes.as_slice().starts_with(b"0000") {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::json_has_nul;

    #[test]
    fn a_nul_is_found_in_any_string_and_only_there() {
        assert!(json_has_nul(r#"{"input":"a\u0000b"}"#));
        assert!(json_has_nul(r#"{"a\u0000":1}"#));
        assert!(json_has_nul(r#"{"x":"\\\u0000"}"#)); // a backslash, then NUL
        assert!(!json_has_nul(r#"{"x":"\\u0000"}"#)); // a backslash, then the text u0000
        assert!(json_has_nul(r#"{"x":"\u00001"}"#)); // NUL, then the digit 1
        assert!(!json_has_nul(r#"{"x":"\u0001 \n \" 0000"}"#));
        assert!(!json_has_nul(r#"{"x":"u0000"}"#));
    }

    /// Ids made in one millisecond carry fresh randomness where `now_v7`
    /// puts a counter: consecutive ones are far apart, in no order. The
    /// millisecond is held here; the e2e test (keys.rs) cannot hold it.
    #[test]
    fn ids_of_one_millisecond_differ_in_all_their_random_bits() {
        let millis = 1_764_000_000_123;
        let ids: Vec<u128> = (0..64)
            .map(|_| super::random_v7_at(millis).as_u128())
            .collect();
        // rand_a (12 bits) and the top 30 of rand_b: `now_v7`'s counter bits.
        let counter = |id: u128| ((id >> 64) & 0xfff) << 30 | ((id >> 32) & 0x3fff_ffff);
        for pair in ids.windows(2) {
            assert_eq!(pair[0] >> 80, u128::from(millis), "{:032x}", pair[0]);
            assert_eq!(uuid::Uuid::from_u128(pair[1]).get_version_num(), 7);
            let gap = counter(pair[0]).abs_diff(counter(pair[1]));
            assert!(
                gap > 1 << 20,
                "consecutive ids are {gap} apart in their first random bits: {:032x} {:032x}",
                pair[0],
                pair[1]
            );
        }
    }

    #[test]
    fn truncates_on_a_char_boundary() {
        let mut s = "héllo".to_string();
        super::truncate_utf8(&mut s, 2);
        assert_eq!(s, "h");
        let mut s = "abc".to_string();
        super::truncate_utf8(&mut s, 10);
        assert_eq!(s, "abc");
    }

    #[test]
    fn escapes_control_characters_onto_one_line() {
        let cases = [
            ("plain text, é and 😀", "plain text, é and 😀"),
            (
                "ok\n2026-11-26T10:00:00Z  INFO forged",
                "ok\\n2026-11-26T10:00:00Z  INFO forged",
            ),
            ("a\r\nb\tc", "a\\r\\nb\\tc"),
            ("\u{1b}[31mred", "\\u{1b}[31mred"),
            ("nul\0 del\u{7f} c1\u{85}", "nul\\u{0} del\\u{7f} c1\\u{85}"),
            ("ls\u{2028}ps\u{2029}", "ls\\u{2028}ps\\u{2029}"),
            // A backslash is escaped too, so an escape cannot be faked.
            ("a\\nb", "a\\\\nb"),
        ];
        for (text, logged) in cases {
            assert_eq!(super::escape_controls(text), logged, "{text:?}");
        }
    }
}
