//! Safe unpacking of an uploaded bundle (tar, optionally gzipped): regular
//! files and directories only, no path escaping the build dir, no links,
//! bounded size and file count.

use std::fs;
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};

use super::BuildError;

/// Bounds on an unpacked bundle.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UnpackLimits {
    pub max_bytes: u64,
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
    let invalid =
        |e: io::Error| BuildError::Bundle(format!("the bundle is not a valid tar archive: {e}"));
    let mut archive = tar::Archive::new(reader);
    let mut total: u64 = 0;
    let mut files = 0usize;
    for entry in archive.entries().map_err(invalid)? {
        let mut entry = entry.map_err(invalid)?;
        let raw = entry.path().map_err(invalid)?.into_owned();
        let shown = raw.display().to_string();
        let kind = entry.header().entry_type();
        if kind.is_symlink() || kind.is_hard_link() {
            return Err(BuildError::Bundle(format!(
                "the bundle contains a link `{shown}`: links are not allowed"
            )));
        }
        if !(kind.is_file() || kind.is_dir()) {
            // pax/GNU metadata entries are consumed by the tar crate itself.
            return Err(BuildError::Bundle(format!(
                "the bundle entry `{shown}` is not a regular file or directory"
            )));
        }
        let Some(relative) = safe_relative_path(&raw) else {
            if kind.is_dir() && shown.trim_end_matches('/') == "." {
                continue;
            }
            return Err(BuildError::Bundle(format!(
                "the bundle entry `{shown}` escapes the build directory"
            )));
        };
        let target = dest.join(&relative);
        if kind.is_dir() {
            fs::create_dir_all(&target)
                .map_err(|e| BuildError::Io(format!("unpack `{shown}`: {e}")))?;
            continue;
        }
        files += 1;
        if files > limits.max_files {
            return Err(BuildError::Bundle(format!(
                "the bundle has more than {} files",
                limits.max_files
            )));
        }
        let size = entry.header().size().map_err(invalid)?;
        total = total.saturating_add(size);
        if total > limits.max_bytes {
            return Err(BuildError::Bundle(format!(
                "the bundle unpacks to more than {} MiB",
                limits.max_bytes >> 20
            )));
        }
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent)
                .map_err(|e| BuildError::Io(format!("unpack `{shown}`: {e}")))?;
        }
        let mut out = fs::File::create(&target)
            .map_err(|e| BuildError::Io(format!("unpack `{shown}`: {e}")))?;
        io::copy(&mut (&mut entry).take(size), &mut out).map_err(invalid)?;
    }
    Ok(())
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
                .contains("more than 3 files")
        );
    }
}
