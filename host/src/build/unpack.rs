//! Safe unpacking of an uploaded bundle (tar, optionally gzipped): regular
//! files and directories only, no path escaping the build dir, no links,
//! bounded entry count, unpacked size and metadata.
//!
//! The archive is read in the tar crate's raw mode, which hands over every
//! header as it is, including the GNU long-name/long-link and PAX members
//! the crate would otherwise read whole into memory before a check could
//! run. Their declared size is checked first (`MAX_HEADER_BYTES`), and the
//! long name or PAX `path` they carry is applied here.

use std::fs;
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};

use tar::EntryType;

use super::BuildError;

/// The most bytes a GNU long-name/long-link or PAX header member may
/// declare: far above any real path, far below anything that hurts.
pub(crate) const MAX_HEADER_BYTES: u64 = 64 * 1024;

/// Bounds on an unpacked bundle.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UnpackLimits {
    /// The sum of every member's declared size (files, directories and
    /// metadata members alike).
    pub max_bytes: u64,
    /// Files and directories (every entry that is not metadata).
    pub max_files: usize,
}

impl Default for UnpackLimits {
    fn default() -> Self {
        UnpackLimits {
            max_bytes: 512 << 20,
            max_files: 10_000,
        }
    }
}

/// A relative path made only of normal components, or `None`.
pub(crate) fn safe_relative_path(path: impl AsRef<Path>) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for part in path.as_ref().components() {
        match part {
            Component::Normal(p) => out.push(p),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    (!out.as_os_str().is_empty()).then_some(out)
}

/// The metadata members that describe the next entry.
#[derive(Default)]
struct Pending {
    long_name: Option<Vec<u8>>,
    long_link: Option<Vec<u8>>,
    pax: Option<Vec<u8>>,
}

fn invalid(e: io::Error) -> BuildError {
    BuildError::Bundle(format!("the bundle is not a valid tar archive: {e}"))
}

fn bundle_error(message: impl Into<String>) -> BuildError {
    BuildError::Bundle(message.into())
}

/// Reads a metadata member whole, once its declared size passed the bound.
fn read_member(entry: &mut impl Read, size: u64) -> Result<Vec<u8>, BuildError> {
    let mut bytes = Vec::with_capacity(size as usize);
    entry.take(size).read_to_end(&mut bytes).map_err(invalid)?;
    Ok(bytes)
}

/// The entry's name: a GNU long name, else a PAX `path`, else the header's.
fn entry_name(header: &tar::Header, pending: &Pending) -> Result<String, BuildError> {
    let mut bytes = match &pending.long_name {
        Some(name) => name.as_slice(),
        None => pending
            .pax
            .as_deref()
            .and_then(|pax| {
                tar::PaxExtensions::new(pax)
                    .filter_map(Result::ok)
                    .find(|field| field.key_bytes() == b"path")
                    .map(|field| field.value_bytes())
            })
            .unwrap_or(&[]),
    };
    let from_header;
    if bytes.is_empty() {
        from_header = header.path_bytes();
        bytes = &from_header;
    }
    while let [rest @ .., 0] = bytes {
        bytes = rest;
    }
    String::from_utf8(bytes.to_vec())
        .map_err(|_| bundle_error("the bundle has an entry whose name is not UTF-8"))
}

/// The PAX `size` of the next entry, when it declares one.
fn pax_size(pax: Option<&[u8]>) -> Option<&[u8]> {
    tar::PaxExtensions::new(pax?)
        .filter_map(Result::ok)
        .find(|field| field.key_bytes() == b"size")
        .map(|field| field.value_bytes())
}

fn describe(kind: EntryType) -> &'static str {
    match kind {
        EntryType::GNULongName => "GNU long-name",
        EntryType::GNULongLink => "GNU long-link",
        EntryType::XHeader => "PAX extended",
        _ => "PAX global",
    }
}

fn too_many(limits: UnpackLimits) -> BuildError {
    bundle_error(format!(
        "the bundle has more than {} entries (files and directories)",
        limits.max_files
    ))
}

/// Unpacks `bundle` into `dest` (which must exist and be empty).
pub(crate) fn unpack(bundle: &Path, dest: &Path, limits: UnpackLimits) -> Result<(), BuildError> {
    let mut file =
        fs::File::open(bundle).map_err(|e| BuildError::Io(format!("open the bundle: {e}")))?;
    let mut magic = [0u8; 2];
    let gzipped = file.read_exact(&mut magic).is_ok() && magic == [0x1f, 0x8b];
    let file =
        fs::File::open(bundle).map_err(|e| BuildError::Io(format!("open the bundle: {e}")))?;
    let reader: Box<dyn Read> = if gzipped {
        Box::new(flate2::read::GzDecoder::new(file))
    } else {
        Box::new(file)
    };
    let mut archive = tar::Archive::new(reader);
    let mut total: u64 = 0;
    let mut entries = 0usize;
    let mut pending = Pending::default();
    // Raw: every header comes here unread, metadata members included.
    for entry in archive.entries().map_err(invalid)?.raw(true) {
        let mut entry = entry.map_err(invalid)?;
        let kind = entry.header().entry_type();
        let size = entry.header().entry_size().map_err(invalid)?;
        let header_member = kind.is_gnu_longname()
            || kind.is_gnu_longlink()
            || kind.is_pax_local_extensions()
            || kind.is_pax_global_extensions();
        if header_member && size > MAX_HEADER_BYTES {
            return Err(bundle_error(format!(
                "the bundle has a {} header member of {size} bytes: at most {MAX_HEADER_BYTES} are allowed",
                describe(kind)
            )));
        }
        // Every member's declared size counts, before any of it is read.
        total = total.saturating_add(size);
        if total > limits.max_bytes {
            return Err(bundle_error(format!(
                "the bundle unpacks to more than {} MiB",
                limits.max_bytes >> 20
            )));
        }
        if let Some(kept) = metadata_slot(kind, &mut pending) {
            if kept.is_some() {
                return Err(bundle_error(format!(
                    "the bundle has two {} header members for one entry",
                    describe(kind)
                )));
            }
            *kept = Some(read_member(&mut entry, size)?);
            continue;
        }
        // Directories count as much as files; so do global PAX headers.
        entries += 1;
        if entries > limits.max_files {
            return Err(too_many(limits));
        }
        if kind.is_pax_global_extensions() {
            // Describes no entry (`git archive` writes one): skipped.
            continue;
        }
        let described = std::mem::take(&mut pending);
        let shown = entry_name(entry.header(), &described)?;
        if kind.is_symlink() || kind.is_hard_link() || described.long_link.is_some() {
            return Err(bundle_error(format!(
                "the bundle contains a link `{shown}`: links are not allowed"
            )));
        }
        if !(kind.is_file() || kind.is_dir()) {
            return Err(bundle_error(format!(
                "the bundle entry `{shown}` is not a regular file or directory"
            )));
        }
        if let Some(declared) = pax_size(described.pax.as_deref())
            && declared != size.to_string().as_bytes()
        {
            return Err(bundle_error(format!(
                "the bundle entry `{shown}` has a PAX size that differs from its header's"
            )));
        }
        let Some(relative) = safe_relative_path(&shown) else {
            if kind.is_dir() && shown.trim_end_matches('/') == "." {
                continue;
            }
            return Err(bundle_error(format!(
                "the bundle entry `{shown}` escapes the build directory"
            )));
        };
        let target = dest.join(&relative);
        if kind.is_dir() {
            fs::create_dir_all(&target)
                .map_err(|e| BuildError::Io(format!("unpack `{shown}`: {e}")))?;
            continue;
        }
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent)
                .map_err(|e| BuildError::Io(format!("unpack `{shown}`: {e}")))?;
        }
        let mut out = fs::File::create(&target)
            .map_err(|e| BuildError::Io(format!("unpack `{shown}`: {e}")))?;
        io::copy(&mut (&mut entry).take(size), &mut out).map_err(invalid)?;
    }
    if pending.long_name.is_some() || pending.long_link.is_some() || pending.pax.is_some() {
        return Err(bundle_error(
            "the bundle ends with a header member that describes no entry",
        ));
    }
    Ok(())
}

/// Where a metadata member describing the next entry is kept, or `None`
/// for an entry of any other kind.
fn metadata_slot(kind: EntryType, pending: &mut Pending) -> Option<&mut Option<Vec<u8>>> {
    match kind {
        EntryType::GNULongName => Some(&mut pending.long_name),
        EntryType::GNULongLink => Some(&mut pending.long_link),
        EntryType::XHeader => Some(&mut pending.pax),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tar_with(build: impl FnOnce(&mut tar::Builder<Vec<u8>>)) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        build(&mut builder);
        builder.into_inner().unwrap()
    }

    fn unpack_bytes(bytes: &[u8]) -> Result<tempfile::TempDir, BuildError> {
        let dir = tempfile::tempdir().unwrap();
        let bundle = dir.path().join("bundle.tar");
        fs::write(&bundle, bytes).unwrap();
        let dest = dir.path().join("out");
        fs::create_dir(&dest).unwrap();
        unpack(
            &bundle,
            &dest,
            UnpackLimits {
                max_bytes: 1024,
                max_files: 3,
            },
        )?;
        Ok(dir)
    }

    fn file(builder: &mut tar::Builder<Vec<u8>>, path: &str, data: &[u8]) {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        // Write the name bytes directly so `..` survives (set_path refuses it).
        let name = &mut header.as_old_mut().name;
        name[..path.len()].copy_from_slice(path.as_bytes());
        header.set_cksum();
        builder.append(&header, data).unwrap();
    }

    #[test]
    fn unpacks_regular_files() {
        let bytes = tar_with(|b| file(b, "dir/a.txt", b"hello"));
        let dir = unpack_bytes(&bytes).unwrap();
        assert_eq!(
            fs::read(dir.path().join("out/dir/a.txt")).unwrap(),
            b"hello"
        );
    }

    #[test]
    fn refuses_escapes_links_and_excess() {
        let escape = tar_with(|b| file(b, "../evil", b"x"));
        assert!(
            unpack_bytes(&escape)
                .unwrap_err()
                .to_string()
                .contains("escapes")
        );

        let link = tar_with(|b| {
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(tar::EntryType::Symlink);
            header.set_size(0);
            b.append_link(&mut header, "l", "/etc/passwd").unwrap();
        });
        assert!(
            unpack_bytes(&link)
                .unwrap_err()
                .to_string()
                .contains("link")
        );

        let big = tar_with(|b| file(b, "big", &[0u8; 2048]));
        assert!(unpack_bytes(&big).unwrap_err().to_string().contains("MiB"));

        let many = tar_with(|b| {
            for i in 0..4 {
                file(b, &format!("f{i}"), b"x");
            }
        });
        assert!(
            unpack_bytes(&many)
                .unwrap_err()
                .to_string()
                .contains("more than 3 entries")
        );
    }

    /// A header of `kind` that declares `size` bytes, and no data after it.
    fn bare_header(kind: tar::EntryType, size: u64) -> Vec<u8> {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(kind);
        header.set_size(size);
        header.as_old_mut().name[..13].copy_from_slice(b"././@LongLink");
        header.set_cksum();
        header.as_bytes().to_vec()
    }

    #[test]
    fn refuses_oversized_header_members_before_reading_them() {
        // The declared size alone decides: none of the data is there.
        for (kind, name) in [
            (tar::EntryType::XHeader, "PAX extended"),
            (tar::EntryType::GNULongName, "GNU long-name"),
            (tar::EntryType::GNULongLink, "GNU long-link"),
            (tar::EntryType::XGlobalHeader, "PAX global"),
        ] {
            let err = unpack_bytes(&bare_header(kind, MAX_HEADER_BYTES + 1))
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(&format!("{name} header member of 65537 bytes")),
                "{name}: {err}"
            );
        }
    }

    #[test]
    fn counts_directories_and_every_declared_size() {
        let dirs = tar_with(|b| {
            for i in 0..4 {
                let mut header = tar::Header::new_gnu();
                header.set_entry_type(tar::EntryType::Directory);
                header.set_size(0);
                b.append_data(&mut header, format!("d{i}/"), &[][..])
                    .unwrap();
            }
        });
        let err = unpack_bytes(&dirs).unwrap_err().to_string();
        assert!(err.contains("more than 3 entries"), "{err}");

        // A directory declaring a size: its data would be skipped unread.
        let mut sized = bare_header(tar::EntryType::Directory, 4096);
        sized.extend_from_slice(&[0u8; 4096 + 1024]);
        let err = unpack_bytes(&sized).unwrap_err().to_string();
        assert!(err.contains("more than 0 MiB"), "{err}");
    }

    #[test]
    fn long_names_and_pax_paths_name_their_entry() {
        let long = format!("{}/agent.wasm", "d".repeat(150));
        let bytes = tar_with(|b| {
            let mut header = tar::Header::new_gnu();
            header.set_size(2);
            header.set_mode(0o644);
            b.append_data(&mut header, &long, &b"hi"[..]).unwrap();
            b.append_pax_extensions([("path", b"p/x.txt".as_slice())])
                .unwrap();
            file(b, "ignored", b"yo");
        });
        let dir = unpack_bytes(&bytes).unwrap();
        assert_eq!(fs::read(dir.path().join("out").join(&long)).unwrap(), b"hi");
        assert_eq!(fs::read(dir.path().join("out/p/x.txt")).unwrap(), b"yo");
        assert!(!dir.path().join("out/ignored").exists());

        let escape = tar_with(|b| {
            b.append_pax_extensions([("path", b"../evil".as_slice())])
                .unwrap();
            file(b, "fine", b"x");
        });
        let err = unpack_bytes(&escape).unwrap_err().to_string();
        assert!(err.contains("`../evil` escapes"), "{err}");

        let twice = tar_with(|b| {
            b.append_pax_extensions([("path", b"a".as_slice())])
                .unwrap();
            b.append_pax_extensions([("path", b"b".as_slice())])
                .unwrap();
            file(b, "fine", b"x");
        });
        let err = unpack_bytes(&twice).unwrap_err().to_string();
        assert!(err.contains("two PAX extended header members"), "{err}");

        let mut linked = bare_header(tar::EntryType::GNULongLink, 12);
        linked.extend_from_slice(&[b'x'; 512]);
        linked.extend(tar_with(|b| file(b, "fine", b"x")));
        let err = unpack_bytes(&linked).unwrap_err().to_string();
        assert!(err.contains("link `fine`"), "{err}");
    }
}
