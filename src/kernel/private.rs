//! Private files and directories: what keel stores (sessions, logs, exports, spilled tool
//! output) holds code and often secrets, so it is created owner-only (directories 0700, files
//! 0600) whatever the process umask, and existing directories that others can read are
//! reported; a directory that must be private (the daemon's socket directory) is checked with
//! lstat. Only creates and checks; never prints (warnings are returned as strings).

use std::fs::{self, DirBuilder, File, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Mode of every directory keel creates.
pub const DIR_MODE: u32 = 0o700;
/// Mode of every file keel creates.
pub const FILE_MODE: u32 = 0o600;

/// Creates `dir` and any missing parents as 0700. Directories that already exist are left as
/// they are (see [`loose_dir_warning`]).
pub fn create_dir_all(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let mut missing = Vec::new();
    let mut cur = Some(dir);
    while let Some(d) = cur.filter(|d| !d.as_os_str().is_empty() && !d.exists()) {
        missing.push(d.to_path_buf());
        cur = d.parent();
    }
    DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dir)?;
    // The umask may have removed owner bits: set the exact mode on what was created here.
    for d in missing {
        fs::set_permissions(&d, Permissions::from_mode(DIR_MODE))?;
    }
    Ok(())
}

/// Options for a new owner-only file (`mode` 0600, then exactly 0600 after creation).
pub fn options() -> OpenOptions {
    let mut o = OpenOptions::new();
    o.mode(FILE_MODE);
    o
}

/// Makes an open file exactly 0600 (a umask can only have removed bits; this restores the
/// owner's read and write).
pub fn fix_mode(file: &File) -> io::Result<()> {
    file.set_permissions(Permissions::from_mode(FILE_MODE))
}

/// Writes `bytes` to `path` (created or truncated) as an owner-only file.
pub fn write_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = options()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)?;
    fix_mode(&file)?;
    file.write_all(bytes)
}

/// Opens `path` for writing in place (not truncated), creating it owner-only if it does not
/// exist.
pub fn open_rw(path: &Path) -> io::Result<File> {
    open_in_place(path, false)
}

/// Opens `path` for appending, creating it owner-only if it does not exist.
pub fn append_file(path: &Path) -> io::Result<File> {
    let file = options().append(true).create(true).open(path)?;
    fix_mode(&file)?;
    Ok(file)
}

/// Opens a lock file for reading and writing in place (not truncated), creating it
/// owner-only.
pub fn open_lock(path: &Path) -> io::Result<File> {
    open_in_place(path, true)
}

/// Opens `path` for writing (and reading when `read`) without truncating it, creating it
/// owner-only.
fn open_in_place(path: &Path, read: bool) -> io::Result<File> {
    let file = options()
        .read(read)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    fix_mode(&file)?;
    Ok(file)
}

/// The effective uid of this process: the owner a private directory must have.
pub fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// What makes a directory unfit to hold what only its owner may reach (the daemon's socket
/// and locks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirProblem {
    Symlink,
    NotDir,
    /// Owned by this uid.
    Owner(u32),
    /// Group or others have access: its mode.
    Mode(u32),
}

/// Why a directory that must be private cannot be used.
#[derive(Debug)]
pub enum DirError {
    /// Its lstat failed.
    Inspect(io::Error),
    /// It was missing and could not be made.
    Create(io::Error),
    /// It breaks the rule; `owner` is its uid.
    Unfit { problem: DirProblem, owner: u32 },
}

/// Makes `dir` ready for private files: created 0700 if missing (missing parents too,
/// whatever the umask), then checked with [`check_dir`] for the effective uid. An existing
/// directory is never changed.
pub fn prepare_dir(dir: &Path) -> Result<(), DirError> {
    match fs::symlink_metadata(dir) {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            create_private_dir(dir).map_err(DirError::Create)?
        }
        Err(e) => return Err(DirError::Inspect(e)),
    }
    check_dir(dir, euid())
}

fn create_private_dir(dir: &Path) -> io::Result<()> {
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        create_dir_all(parent)?;
    }
    match DirBuilder::new().mode(DIR_MODE).create(dir) {
        // Made here: set the exact mode (the umask may have removed owner bits).
        Ok(()) => fs::set_permissions(dir, Permissions::from_mode(DIR_MODE)),
        // Someone else made it meanwhile: it is checked like any existing directory.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// lstat-checks `dir` against the rule: a real directory (not a symlink), owned by `uid`,
/// `mode & 0o077 == 0`.
pub fn check_dir(dir: &Path, uid: u32) -> Result<(), DirError> {
    let meta = fs::symlink_metadata(dir).map_err(DirError::Inspect)?;
    let mode = meta.permissions().mode() & 0o7777;
    let problem = if meta.file_type().is_symlink() {
        DirProblem::Symlink
    } else if !meta.is_dir() {
        DirProblem::NotDir
    } else if meta.uid() != uid {
        DirProblem::Owner(meta.uid())
    } else if mode & 0o077 != 0 {
        DirProblem::Mode(mode)
    } else {
        return Ok(());
    };
    Err(DirError::Unfit {
        problem,
        owner: meta.uid(),
    })
}

/// A warning for the first of `dirs` that exists and that group or others can access
/// (`None` when all are private or absent): one line, with the command that fixes it.
pub fn loose_dir_warning(dirs: &[&Path]) -> Option<String> {
    let loose: Vec<(&Path, u32)> = dirs
        .iter()
        .filter_map(|d| {
            let meta = fs::symlink_metadata(d).ok()?;
            let mode = meta.permissions().mode() & 0o777;
            (meta.is_dir() && mode & 0o077 != 0).then_some((*d, mode))
        })
        .collect();
    let (first, mode) = loose.first()?;
    let all: Vec<String> = loose.iter().map(|(d, _)| d.display().to_string()).collect();
    Some(format!(
        "{} is accessible to other users (mode {mode:04o}); keel's sessions and logs hold code \
         and secrets: run `chmod 700 {}`",
        first.display(),
        all.join(" ")
    ))
}

/// Flushes a directory entry to stable storage (after creating or renaming a file in it).
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(test)]
    DIR_SYNCS.with(|n| n.set(n.get() + 1));
    File::open(dir)?.sync_all()
}

/// Flushes a file's data (and the metadata needed to read it back) to stable storage.
pub fn sync_data(file: &File) -> io::Result<()> {
    #[cfg(test)]
    DATA_SYNCS.with(|n| n.set(n.get() + 1));
    file.sync_data()
}

#[cfg(test)]
thread_local! {
    /// Directory syncs made by this thread (tests check that new files are made durable).
    pub static DIR_SYNCS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    /// File data syncs made by this thread (tests check how often a session is synced).
    pub static DATA_SYNCS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn created_dirs_and_files_are_owner_only_even_with_an_open_umask() {
        let d = tempfile::tempdir().unwrap();
        let old = nix::sys::stat::umask(nix::sys::stat::Mode::empty());
        let deep = d.path().join("home/sessions/--x--");
        let made = create_dir_all(&deep);
        let file = d.path().join("home/f.html");
        let written = write_file(&file, b"x");
        nix::sys::stat::umask(old);
        made.unwrap();
        written.unwrap();
        assert_eq!(mode(&d.path().join("home")), 0o700);
        assert_eq!(mode(&d.path().join("home/sessions")), 0o700);
        assert_eq!(mode(&deep), 0o700);
        assert_eq!(mode(&file), 0o600);
    }

    #[test]
    fn loose_directories_get_one_warning_naming_them() {
        let d = tempfile::tempdir().unwrap();
        let (a, b, c) = (d.path().join("a"), d.path().join("b"), d.path().join("c"));
        for p in [&a, &b] {
            fs::create_dir(p).unwrap();
        }
        fs::set_permissions(&a, Permissions::from_mode(0o700)).unwrap();
        assert_eq!(loose_dir_warning(&[&a, &c]), None);
        fs::set_permissions(&b, Permissions::from_mode(0o755)).unwrap();
        let w = loose_dir_warning(&[&a, &b, &c]).unwrap();
        assert!(
            w.starts_with(&format!("{} is accessible", b.display())),
            "{w}"
        );
        assert!(w.contains("mode 0755"), "{w}");
        assert!(w.ends_with(&format!("chmod 700 {}`", b.display())), "{w}");
    }
}
