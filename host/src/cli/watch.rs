//! `agenthost dev`'s watch: which changes in an agent project are its
//! sources (a change rebuilds and redeploys) and which are not (build
//! outputs, dependencies, the dev server's own data, editors' scratch files).
//!
//! The watch itself is `notify` (inotify, FSEvents or
//! ReadDirectoryChangesW as the platform has), with a quiet period of our
//! own: the paths of a burst of writes (an editor's save is several events)
//! come as one batch. Reads are not changes: inotify reports each open,
//! the build's own among them. Directories that are never sources
//! (`target/`, `node_modules/`, `.venv/`, ignored ones) are not watched at
//! all: a `.venv` alone holds thousands of directories.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;

use super::lang;
use crate::build::manifest::Manifest;

/// How long the tree must be quiet before a burst of changes counts as one.
const QUIET: Duration = Duration::from_millis(400);

/// What in a project is not a source, read from its manifest and ignore files.
pub(super) struct Sources {
    root: PathBuf,
    /// Top-level directories that never are (`target`, `.git`, the language's).
    skip_dirs: Vec<&'static str>,
    /// The built component (`agent.entry`), relative to the root.
    entry: PathBuf,
    /// `.gitignore` and `.agentignore` at the root, as packaging reads them.
    ignored: Gitignore,
    /// Where the dev server keeps its data, when it is inside the project.
    data_dir: Option<PathBuf>,
}

/// Whether the top-level `name` is the skipped directory `dir` or its
/// temporary sibling: cargo makes `target` as `target` plus six random
/// letters and digits (`target6TIIyp`) and renames it, which once made the
/// first `dev` of a Rust agent redeploy with no edit.
/// (Only `target`'s: `.git` plus six letters is `.gitignore`.)
fn skipped(name: &str, dir: &str) -> bool {
    match name.strip_prefix(dir) {
        Some("") => true,
        Some(rest) if dir == "target" => {
            rest.len() == 6 && rest.bytes().all(|b| b.is_ascii_alphanumeric())
        }
        _ => false,
    }
}

impl Sources {
    /// Reads `root`'s manifest and ignore files; `data_dir` is left out too.
    pub(super) fn read(root: &Path, data_dir: &Path) -> Sources {
        let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
        let manifest = std::fs::read_to_string(root.join("agenthost.toml"))
            .ok()
            .and_then(|text| Manifest::parse(&text).ok());
        let mut skip_dirs = vec!["target", ".git"];
        let mut entry = PathBuf::new();
        if let Some(manifest) = &manifest {
            skip_dirs.extend(lang::always_left_out(manifest.agent.language));
            entry = PathBuf::from(manifest.agent.entry());
        }
        let mut builder = GitignoreBuilder::new(&root);
        for name in [".gitignore", ".agentignore"] {
            // A missing file adds nothing; a malformed line is skipped.
            let _ = builder.add(root.join(name));
        }
        let ignored = builder.build().unwrap_or_else(|_| Gitignore::empty());
        let data_dir = data_dir.canonicalize().ok();
        Sources {
            root,
            skip_dirs,
            entry,
            ignored,
            data_dir,
        }
    }

    pub(super) fn root(&self) -> &Path {
        &self.root
    }

    /// Whether a change at `path` (absolute) is a change of the agent's sources.
    pub(super) fn is_source(&self, path: &Path) -> bool {
        let Ok(relative) = path.strip_prefix(&self.root) else {
            return false;
        };
        if relative.as_os_str().is_empty() || relative == self.entry {
            return false;
        }
        if let Some(data) = &self.data_dir
            && path.starts_with(data)
        {
            return false;
        }
        let mut components = relative.components();
        if let Some(first) = components.next()
            && let Some(first) = first.as_os_str().to_str()
            && self.skip_dirs.iter().any(|d| skipped(first, d))
        {
            return false;
        }
        if relative
            .components()
            .any(|c| c.as_os_str() == "__pycache__" || c.as_os_str() == ".git")
        {
            return false;
        }
        let name = relative
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        // Editors' scratch files: vim's swap files and its write test
        // (`4913`), backups (`x~`), Emacs' lock files (`.#x`).
        if name.ends_with('~')
            || name.ends_with(".swp")
            || name.ends_with(".swx")
            || name.starts_with(".#")
            || name == "4913"
        {
            return false;
        }
        !self
            .ignored
            .matched_path_or_any_parents(relative, path.is_dir())
            .is_ignore()
    }

    /// The directories under the root worth watching (every one that may hold sources).
    fn dirs(&self) -> Vec<PathBuf> {
        let mut dirs = vec![self.root.clone()];
        let mut next = 0;
        while next < dirs.len() {
            let dir = dirs[next].clone();
            next += 1;
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if entry.file_type().is_ok_and(|t| t.is_dir()) && self.is_source(&path) {
                    dirs.push(path);
                }
            }
        }
        dirs
    }
}

/// The changes of one project's sources, a batch per burst.
pub(super) struct Watch {
    watcher: RecommendedWatcher,
    changes: mpsc::UnboundedReceiver<Vec<PathBuf>>,
    data_dir: PathBuf,
    sources: Sources,
}

impl Watch {
    /// Starts watching `root` (but not `data_dir`, nor what is not a source).
    pub(super) fn start(root: &Path, data_dir: &Path) -> anyhow::Result<Watch> {
        let (sender, changes) = mpsc::unbounded_channel();
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            match event {
                // A read (an open, a close after reading or writing) changes
                // nothing that a create, modify, rename or remove does not say.
                Ok(event) if matches!(event.kind, EventKind::Access(_)) => {}
                Ok(event) => {
                    let _ = sender.send(event.paths);
                }
                Err(err) => tracing::warn!(error = %err, "watching the project"),
            }
        })?;
        let mut watch = Watch {
            watcher,
            changes,
            data_dir: data_dir.to_path_buf(),
            sources: Sources::read(root, data_dir),
        };
        for dir in watch.sources.dirs() {
            watch.add(&dir);
        }
        Ok(watch)
    }

    fn add(&mut self, dir: &Path) {
        if let Err(err) = self.watcher.watch(dir, RecursiveMode::NonRecursive) {
            tracing::warn!(error = %err, dir = %dir.display(), "cannot watch a directory");
        }
    }

    /// Waits for the next change of the sources, then for the tree to be
    /// quiet; returns the first path that changed (relative to the root).
    /// `None`: the watch stopped.
    pub(super) async fn changed(&mut self) -> Option<PathBuf> {
        loop {
            let mut paths = self.changes.recv().await?;
            // The rest of the burst, and whatever came meanwhile (during a build).
            while let Ok(Some(more)) = tokio::time::timeout(QUIET, self.changes.recv()).await {
                paths.extend(more);
            }
            // The ignore files or the manifest may have changed: read them again.
            self.sources = Sources::read(self.sources.root(), &self.data_dir);
            let mut first = None;
            let mut kept = None;
            let mut new_dirs = Vec::new();
            for path in paths {
                if !self.sources.is_source(&path) {
                    continue;
                }
                if path.is_dir() {
                    new_dirs.push(path.clone());
                }
                if kept.is_none() && path.exists() {
                    kept = Some(path.clone());
                }
                first.get_or_insert(path);
            }
            if !new_dirs.is_empty() {
                // New directories: watch them and what they hold.
                for dir in self.sources.dirs() {
                    if new_dirs.iter().any(|new| dir.starts_with(new)) {
                        self.add(&dir);
                    }
                }
            }
            // An editor's (or `sed -i`'s) temporary file may lead the
            // burst: name a path that is still there when there is one.
            if let Some(path) = kept.or(first) {
                let relative = path.strip_prefix(self.sources.root()).unwrap_or(&path);
                return Some(relative.to_path_buf());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_leave_out_build_outputs_dependencies_data_and_scratch_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::write(
            root.join("agenthost.toml"),
            "[app]\nslug = \"x\"\n[agent]\nlanguage = \"python\"\n",
        )
        .unwrap();
        std::fs::write(root.join(".gitignore"), "*.log\nbuild/\n").unwrap();
        std::fs::write(root.join(".agentignore"), "notes.md\n").unwrap();
        for sub in [".agenthost", "build", "pkg", ".venv/lib"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        let sources = Sources::read(&root, &root.join(".agenthost"));
        for source in ["app.py", "pkg/tools.py", "agenthost.toml", ".gitignore"] {
            assert!(sources.is_source(&root.join(source)), "{source}");
        }
        for not in [
            "agent.wasm",
            "target/debug/x",
            "target6TIIyp/debug/x",
            "target6TIIyp",
            ".git/index",
            ".venv/lib/site.py",
            "pkg/__pycache__/tools.cpython-312.pyc",
            ".agenthost/agenthost.redb",
            "debug.log",
            "build/out.js",
            "notes.md",
            "app.py~",
            ".app.py.swp",
            ".#app.py",
            "4913",
        ] {
            assert!(!sources.is_source(&root.join(not)), "{not}");
        }
        // Only an exact six-letter suffix is cargo's: these are sources.
        for source in ["targets/x.py", "target_helpers.py", "targetABCDEFG/x.py"] {
            assert!(sources.is_source(&root.join(source)), "{source}");
        }
        assert!(!sources.is_source(Path::new("/elsewhere/app.py")));
        let dirs = sources.dirs();
        assert!(dirs.contains(&root.join("pkg")), "{dirs:?}");
        for skipped in [".venv", "build", ".agenthost"] {
            assert!(!dirs.contains(&root.join(skipped)), "{skipped}: {dirs:?}");
        }
    }
}
