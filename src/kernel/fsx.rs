//! Opening files by descriptor, without a check-then-open race (issue 43, `DESIGN.md` §14):
//! the file tools, checkpoints and rewind judge the file they opened, not the name they
//! checked, so a background process swapping a symlink in between gains nothing.
//!
//! - **Beneath a root** ([`Beneath`]): writes, snapshot reads and rewind's writes and removals.
//!   The root is opened once; every path under it is opened with
//!   `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`, or, on a kernel without `openat2`, one
//!   component at a time with `O_NOFOLLOW`. A symlink anywhere (or a `..`) is an error:
//!   callers checked the real path, so a symlink there means the path changed under them.
//!   Parents are created with `mkdirat` step by step, files with `openat(parent, name)`,
//!   removals with `unlinkat(parent, name)`.
//! - **Reads anywhere** ([`open_read`]): reading is allowed except for denied paths, so the
//!   file is opened first and its descriptor judged by its real path (`/proc/self/fd/N`), failing
//!   closed when that cannot be read.
//!
//! Owns only opening, creating and removing; the rules are `kernel::sandbox`'s. Blocking.

use std::fmt;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use crate::kernel::sandbox::{SandboxMode, SandboxPolicy};

/// Why a file could not be opened, created or removed.
#[derive(Debug)]
pub enum FsxError {
    /// A symlink (or `..`) where none may be: the path changed since it was checked.
    Symlink(PathBuf),
    /// The opened file's real path is denied by the policy (the denied path).
    Denied(PathBuf),
    /// The file has another link, to this protected or denied file.
    Linked(PathBuf),
    /// The sandbox does not let this (real) path be written.
    NotWritable(PathBuf),
    /// The opened descriptor's real path could not be read (no `/proc`): refused.
    Unverified(io::Error),
    /// Any other failure of the file system.
    Io(io::Error),
}

impl FsxError {
    /// Whether the file (or a parent) does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, FsxError::Io(e) if e.kind() == io::ErrorKind::NotFound)
    }
}

impl fmt::Display for FsxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FsxError::Symlink(p) => write!(
                f,
                "{} changed while it was opened (a symlink is in its path now)",
                p.display()
            ),
            FsxError::Denied(p) => write!(f, "the sandbox denies reading {}", p.display()),
            FsxError::Linked(p) => write!(f, "it is a hard link to {}", p.display()),
            FsxError::NotWritable(p) => {
                write!(f, "the sandbox does not let {} be written", p.display())
            }
            FsxError::Unverified(e) => write!(f, "cannot tell which file was opened: {e}"),
            FsxError::Io(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for FsxError {}

impl From<io::Error> for FsxError {
    fn from(e: io::Error) -> Self {
        FsxError::Io(e)
    }
}

impl From<Errno> for FsxError {
    fn from(e: Errno) -> Self {
        FsxError::Io(e.into())
    }
}

/// Set once `openat2` answered `ENOSYS`: the per-component walk is used from then on.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// A directory opened by descriptor; everything under it is reached without a symlink.
#[derive(Debug)]
pub struct Beneath {
    fd: OwnedFd,
    path: PathBuf,
}

impl Beneath {
    /// Opens the directory `path` (a real path: its own symlinks, if any, are followed).
    pub fn open(path: &Path) -> io::Result<Beneath> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = rustix::fs::open(path, flags, Mode::empty())?;
        Ok(Beneath {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// `file`, a directory opened already (by [`open_read`]), as a root; `path` names it.
    pub fn from_file(file: File, path: &Path) -> Beneath {
        Beneath {
            fd: file.into(),
            path: path.to_path_buf(),
        }
    }

    /// The root a write of the real path `real` happens beneath, and `real` relative to it:
    /// the deepest writable root holding it, or `/` when the sandbox is off. `real` is judged
    /// here, by the same name that is opened then (a caller that checked an earlier real path
    /// may have seen another file: a symlink swapped in since resolves elsewhere now).
    pub fn for_write(policy: &SandboxPolicy, real: &Path) -> Result<(Beneath, PathBuf), FsxError> {
        if policy.write_denied(real).is_some() {
            return Err(FsxError::NotWritable(real.to_path_buf()));
        }
        let root = policy
            .writable_roots
            .iter()
            .filter(|r| real.starts_with(r))
            .max_by_key(|r| r.components().count())
            .map_or(Path::new("/"), PathBuf::as_path);
        let rel = real.strip_prefix(root).unwrap_or(real).to_path_buf();
        Ok((Beneath::open(root)?, rel))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Opens `rel` with `flags` (`O_NOFOLLOW` and `O_CLOEXEC` added), no symlink anywhere.
    pub fn open_at(&self, rel: &Path, flags: OFlags) -> Result<OwnedFd, FsxError> {
        resolve(self.fd(), rel, flags)
    }

    /// The directory `rel` (`""`: the root), opened for listing; `make` says what to do with
    /// a missing directory (or a file where one should be) on the way.
    pub fn dir(&self, rel: &Path, make: Make) -> Result<OwnedFd, FsxError> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY;
        if make == Make::Nothing {
            return dir_at(self.fd(), rel);
        }
        let mut cur = rustix::fs::openat(self.fd(), ".", flags | OFlags::CLOEXEC, Mode::empty())?;
        for name in names(rel)? {
            let open = |at: BorrowedFd<'_>| step(at, name, flags, rel);
            cur = match open(cur.as_fd()) {
                Err(FsxError::Io(e)) if in_the_way(&e, make) => {
                    rustix::fs::unlinkat(&cur, name, AtFlags::empty())?;
                    rustix::fs::mkdirat(&cur, name, Mode::from_raw_mode(0o777))?;
                    open(cur.as_fd())?
                }
                Err(e) if e.is_not_found() => {
                    match rustix::fs::mkdirat(&cur, name, Mode::from_raw_mode(0o777)) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(e) => return Err(e.into()),
                    }
                    open(cur.as_fd())?
                }
                other => other?,
            };
        }
        Ok(cur)
    }

    /// The parent directory of `rel` (made as `make` says) and `rel`'s last name.
    pub fn parent<'a>(&self, rel: &'a Path, make: Make) -> Result<(OwnedFd, &'a Path), FsxError> {
        let name = rel
            .file_name()
            .map(Path::new)
            .ok_or_else(|| FsxError::Io(io::Error::from(io::ErrorKind::InvalidInput)))?;
        let parent = rel.parent().unwrap_or(Path::new(""));
        Ok((self.dir(parent, make)?, name))
    }

    /// Removes the file (or symlink) `rel`, through its parent's descriptor.
    pub fn remove(&self, rel: &Path) -> Result<(), FsxError> {
        let (dir, name) = self.parent(rel, Make::Nothing)?;
        Ok(rustix::fs::unlinkat(&dir, name, AtFlags::empty())?)
    }
}

/// What [`Beneath::dir`] makes of the directories on its way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Make {
    /// Nothing: a missing directory is an error.
    Nothing,
    /// The missing directories (`mkdir -p`).
    Missing,
    /// The missing ones, and a file where a directory should be is replaced by one (a
    /// restore, as `git checkout` does); a symlink there is still an error.
    Replacing,
}

/// Whether `e` (opening a directory without following) met a file that `make` replaces.
fn in_the_way(e: &io::Error, make: Make) -> bool {
    make == Make::Replacing && e.raw_os_error() == Some(Errno::NOTDIR.raw_os_error())
}

/// The directory `rel` beneath `root` (`""`: the root itself), opened for listing without a
/// symlink anywhere on the way.
pub fn dir_at(root: BorrowedFd<'_>, rel: &Path) -> Result<OwnedFd, FsxError> {
    resolve(root, rel, OFlags::RDONLY | OFlags::DIRECTORY)
}

/// Removes the directory `name` in `at` and everything in it, by descriptor: nothing below
/// is followed through a symlink (a symlink is removed as the link it is).
pub fn remove_tree(at: BorrowedFd<'_>, name: &std::ffi::OsStr) -> Result<(), FsxError> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = match rustix::fs::openat(at, name, flags, Mode::empty()) {
        Err(Errno::NOTDIR | Errno::LOOP) => return Err(FsxError::Symlink(name.into())),
        other => other?,
    };
    for entry in rustix::fs::Dir::read_from(&fd)? {
        let entry = entry?;
        let child = std::ffi::OsStr::from_bytes(entry.file_name().to_bytes());
        if child == "." || child == ".." {
            continue;
        }
        match rustix::fs::statat(&fd, child, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {
                remove_tree(fd.as_fd(), child)?
            }
            _ => rustix::fs::unlinkat(&fd, child, AtFlags::empty())?,
        }
    }
    Ok(rustix::fs::unlinkat(at, name, AtFlags::REMOVEDIR)?)
}

/// The names of `rel`, which must stay beneath (no `..`, not absolute).
fn names(rel: &Path) -> Result<Vec<&std::ffi::OsStr>, FsxError> {
    rel.components()
        .filter(|c| *c != Component::CurDir)
        .map(|c| match c {
            Component::Normal(name) => Ok(name),
            _ => Err(FsxError::Symlink(rel.to_path_buf())),
        })
        .collect()
}

/// Opens `rel` beneath `dir`: `openat2` where the kernel has it, else a walk.
fn resolve(dir: BorrowedFd<'_>, rel: &Path, flags: OFlags) -> Result<OwnedFd, FsxError> {
    let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    if names(rel)?.is_empty() {
        return Ok(rustix::fs::openat(dir, ".", flags, Mode::empty())?);
    }
    if !NO_OPENAT2.load(Ordering::Relaxed) {
        match by_openat2(dir, rel, flags) {
            Some(done) => return done,
            None => NO_OPENAT2.store(true, Ordering::Relaxed),
        }
    }
    by_walk(dir, rel, flags)
}

/// `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`; `None` when the kernel has no `openat2`.
fn by_openat2(dir: BorrowedFd<'_>, rel: &Path, flags: OFlags) -> Option<Result<OwnedFd, FsxError>> {
    let how = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    let mut tries = 0;
    loop {
        return Some(
            match rustix::fs::openat2(dir, rel, flags, mode(flags), how) {
                Ok(fd) => Ok(fd),
                // A rename raced the lookup: the kernel asks to try again.
                Err(Errno::AGAIN) if tries < 8 => {
                    tries += 1;
                    continue;
                }
                Err(Errno::NOSYS) => return None,
                Err(Errno::LOOP | Errno::XDEV) => Err(FsxError::Symlink(rel.into())),
                // O_DIRECTORY | O_NOFOLLOW on a symlink says ENOTDIR: the walk tells which.
                Err(Errno::NOTDIR) => by_walk(dir, rel, flags),
                Err(e) => Err(e.into()),
            },
        );
    }
}

/// One name at a time from `dir`, each opened with `O_NOFOLLOW` from its parent's descriptor
/// (for kernels without `openat2`).
fn by_walk(dir: BorrowedFd<'_>, rel: &Path, flags: OFlags) -> Result<OwnedFd, FsxError> {
    let names = names(rel)?;
    let Some((last, parents)) = names.split_last() else {
        return Ok(rustix::fs::openat(dir, ".", flags, Mode::empty())?);
    };
    let mut cur: Option<OwnedFd> = None;
    for name in parents {
        let at = cur.as_ref().map_or(dir, |f| f.as_fd());
        cur = Some(step(at, name, OFlags::PATH | OFlags::DIRECTORY, rel)?);
    }
    step(cur.as_ref().map_or(dir, |f| f.as_fd()), last, flags, rel)
}

/// Opens the one name `name` in `at` without following it; a symlink there is
/// [`FsxError::Symlink`] (`rel`: the whole path, for the message).
fn step(
    at: BorrowedFd<'_>,
    name: &std::ffi::OsStr,
    flags: OFlags,
    rel: &Path,
) -> Result<OwnedFd, FsxError> {
    let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match rustix::fs::openat(at, name, flags, mode(flags)) {
        Ok(fd) => Ok(fd),
        Err(Errno::LOOP) => Err(FsxError::Symlink(rel.into())),
        // O_DIRECTORY | O_NOFOLLOW on a symlink says ENOTDIR; a directory there now was a
        // symlink a moment ago (a name swapped back and forth).
        Err(Errno::NOTDIR) if !is_file(at, name) => Err(FsxError::Symlink(rel.into())),
        Err(e) => Err(e.into()),
    }
}

/// The mode of a file `flags` create (the umask applies), none otherwise (`openat2` wants 0).
fn mode(flags: OFlags) -> Mode {
    match flags.contains(OFlags::CREATE) {
        true => Mode::from_raw_mode(0o666),
        false => Mode::empty(),
    }
}

/// Whether `name` in `at` is something else than a directory or a symlink (a file in the way).
fn is_file(at: BorrowedFd<'_>, name: &std::ffi::OsStr) -> bool {
    rustix::fs::statat(at, name, AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|s| {
        let kind = FileType::from_raw_mode(s.st_mode);
        kind != FileType::Symlink && kind != FileType::Directory
    })
}

/// Opens `path` for reading (`O_NONBLOCK | O_NOCTTY`, so a FIFO or a terminal never blocks
/// or takes over; `dir`: a directory, for listing; `follow`: a symlink in the last name is
/// followed), then refuses it if the policy denies reading where the descriptor really is.
pub fn open_read(
    path: &Path,
    follow: bool,
    dir: bool,
    policy: &SandboxPolicy,
) -> Result<File, FsxError> {
    let mut flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    if !follow {
        flags |= OFlags::NOFOLLOW;
    }
    if dir {
        flags |= OFlags::DIRECTORY;
    }
    let fd = match rustix::fs::open(path, flags, Mode::empty()) {
        Err(Errno::LOOP) if !follow => return Err(FsxError::Symlink(path.into())),
        other => other?,
    };
    check_read(fd.as_fd(), policy)?;
    Ok(File::from(fd))
}

/// Refuses the open descriptor `fd` if the policy denies reading its real path.
pub fn check_read(fd: BorrowedFd<'_>, policy: &SandboxPolicy) -> Result<(), FsxError> {
    if policy.mode == SandboxMode::Off {
        return Ok(());
    }
    let real = real_path(fd).map_err(FsxError::Unverified)?;
    match policy.read_denied(&real) {
        Some(denied) => Err(FsxError::Denied(denied.to_path_buf())),
        None => Ok(()),
    }
}

/// Where the open descriptor `fd` is, as the kernel says (`/proc/self/fd/N`).
pub fn real_path(fd: BorrowedFd<'_>) -> io::Result<PathBuf> {
    let link = format!("/proc/self/fd/{}", fd.as_raw_fd());
    let path = std::fs::read_link(link)?;
    match path.is_absolute() {
        true => Ok(path),
        // `pipe:[…]`, `anon_inode:…`: not a file of any path.
        false => Err(io::Error::other(format!(
            "{} is not a path",
            path.display()
        ))),
    }
}

/// Refuses writing an open file that has another link, when that link is to a protected or
/// denied file of `policy` (one of those paths, or a file directly in one of those
/// directories): writing it would change the protected file.
pub fn check_links(file: &File, policy: &SandboxPolicy) -> Result<(), FsxError> {
    let st = rustix::fs::fstat(file)?;
    if st.st_nlink <= 1 || policy.mode == SandboxMode::Off {
        return Ok(());
    }
    let same = |p: &Path| {
        rustix::fs::lstat(p).is_ok_and(|s| (s.st_dev, s.st_ino) == (st.st_dev, st.st_ino))
    };
    for guarded in policy.protected.iter().chain(&policy.deny_read) {
        if same(guarded) {
            return Err(FsxError::Linked(guarded.clone()));
        }
        let Ok(entries) = std::fs::read_dir(guarded) else {
            continue;
        };
        if let Some(p) = entries.flatten().map(|e| e.path()).find(|p| same(p)) {
            return Err(FsxError::Linked(p));
        }
    }
    Ok(())
}

/// Opens `rel` beneath `root` for writing as a regular file (`create`: created if missing,
/// its missing parents too), truncated, and returns it with whether it was created. A FIFO
/// never blocks (`O_NONBLOCK`); anything but a regular file is refused before it is
/// truncated, as is a file linked to a protected one ([`check_links`]).
pub fn open_write(
    root: &Beneath,
    rel: &Path,
    create: bool,
    policy: &SandboxPolicy,
) -> Result<(File, bool), FsxError> {
    let make = if create { Make::Missing } else { Make::Nothing };
    let (dir, name) = root.parent(rel, make)?;
    let flags = OFlags::WRONLY | OFlags::NONBLOCK | OFlags::NOCTTY;
    let (fd, created) = match step(dir.as_fd(), name.as_os_str(), flags, rel) {
        Err(e) if create && e.is_not_found() => {
            let excl = flags | OFlags::CREATE | OFlags::EXCL;
            (step(dir.as_fd(), name.as_os_str(), excl, rel)?, true)
        }
        other => (other?, false),
    };
    let file = File::from(fd);
    let kind = FileType::from_raw_mode(rustix::fs::fstat(&file)?.st_mode);
    if kind != FileType::RegularFile {
        return Err(FsxError::Io(io::Error::other(format!(
            "{} is not a regular file",
            rel.display()
        ))));
    }
    check_links(&file, policy)?;
    rustix::fs::ftruncate(&file, 0)?;
    Ok((file, created))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
pub(crate) mod tests {
    use std::io::{Read, Write};
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    use super::*;
    use crate::kernel::sandbox::policy::Places;

    /// How many times each race is tried.
    const TRIES: usize = 1000;
    const SECRET: &str = "secret-canary";

    /// `work` (writable) and `home` (its `.ssh/id_rsa` denied, `.bashrc` and `out/x` canaries).
    fn world() -> (tempfile::TempDir, PathBuf, SandboxPolicy) {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().canonicalize().unwrap();
        for dir in ["work/d", "home/.ssh", "home/out"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        std::fs::write(root.join("home/.ssh/id_rsa"), SECRET).unwrap();
        std::fs::write(root.join("home/.bashrc"), "rc\n").unwrap();
        std::fs::write(root.join("home/out/x"), "canary\n").unwrap();
        std::fs::write(root.join("work/f"), "decoy\n").unwrap();
        let places = Places {
            cwd: root.join("work"),
            home: Some(root.join("home")),
            account_home: None,
            keel_home: None,
            runtime: vec![],
        };
        let policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &places, &[], &[], &[], false);
        (d, root, policy)
    }

    /// Exchanges `a` and `b` (`RENAME_EXCHANGE`) as fast as it can until dropped.
    pub(crate) struct Swap(Arc<AtomicBool>, Option<std::thread::JoinHandle<()>>);

    /// Starts exchanging `a` and `b`, and returns once it has (the other hostile tests of the
    /// crate use it too).
    pub(crate) fn swap(a: PathBuf, b: PathBuf) -> Swap {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let cwd = rustix::fs::CWD;
            while !flag.load(Ordering::Relaxed) {
                let how = rustix::fs::RenameFlags::EXCHANGE;
                rustix::fs::renameat_with(cwd, &a, cwd, &b, how).unwrap();
                let _ = tx.send(());
            }
        });
        rx.recv().unwrap();
        Swap(stop, Some(thread))
    }

    impl Drop for Swap {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
            if let Some(t) = self.1.take() {
                t.join().unwrap();
            }
        }
    }

    /// For each `(name, target)`: `work/name.l`, a symlink to `root/target`, exchanged with
    /// `work/name` until the swaps are dropped.
    fn swapped(root: &Path, pairs: &[(&str, &str)]) -> Vec<Swap> {
        let work = root.join("work");
        let mut swaps = Vec::new();
        for (name, target) in pairs {
            let link = work.join(format!("{name}.l"));
            std::os::unix::fs::symlink(root.join(target), &link).unwrap();
            swaps.push(swap(work.join(name), link));
        }
        swaps
    }

    /// Runs `attempt` [`TRIES`] times, and on (up to ten times as many, on a loaded machine)
    /// until both outcomes were seen: `Some(true)` it got through (opened, wrote, removed),
    /// `Some(false)` it was refused, `None` neither. Then `check`, then that both were seen
    /// (or the test proves nothing).
    fn race(what: &str, mut attempt: impl FnMut() -> Option<bool>, check: impl Fn()) {
        let (mut through, mut refused) = (0, 0);
        for n in 0.. {
            let seen = through > 0 && refused > 0;
            if (n >= TRIES && seen) || n >= 10 * TRIES {
                break;
            }
            match attempt() {
                Some(true) => through += 1,
                Some(false) => refused += 1,
                None => {}
            }
        }
        check();
        assert!(
            through > 0 && refused > 0,
            "{what}: {through} through, {refused} refused"
        );
    }

    /// The files outside the workspace kept their bytes.
    fn outside_kept(root: &Path) {
        let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
        assert_eq!(
            [
                read("home/.bashrc"),
                read("home/out/x"),
                read("home/.ssh/id_rsa")
            ],
            ["rc\n", "canary\n", SECRET]
        );
    }

    /// One try of `open`: every file it opens holds the decoy, nothing else.
    fn opened(open: Result<File, FsxError>) -> Option<bool> {
        match open {
            Ok(file) => {
                assert_eq!(read_all(file), "decoy\n");
                Some(true)
            }
            Err(FsxError::Denied(_) | FsxError::Symlink(_)) => Some(false),
            Err(e) => missing(&e),
        }
    }

    /// Any other outcome of a try: only a name missing for a moment (mid-swap) is expected.
    fn missing(e: &FsxError) -> Option<bool> {
        assert!(e.is_not_found(), "{e}");
        None
    }

    fn read_all(mut f: File) -> String {
        let mut s = String::new();
        f.read_to_string(&mut s).unwrap();
        s
    }

    #[test]
    fn a_read_of_a_name_swapped_for_a_symlink_to_a_secret_never_returns_it() {
        let (_d, root, policy) = world();
        let f = root.join("work/f");
        let _swaps = swapped(&root, &[("f", "home/.ssh/id_rsa")]);
        let attempt = || opened(open_read(&f, true, false, &policy));
        race("read", attempt, || outside_kept(&root));
    }

    #[test]
    fn a_write_never_passes_a_symlink_swapped_in_for_its_file_or_its_parent() {
        let (_d, root, policy) = world();
        let work = root.join("work");
        let _swaps = swapped(&root, &[("f", "home/.bashrc"), ("d", "home/out")]);
        for rel in ["f", "d/x"] {
            let attempt = || {
                let real = crate::kernel::sandbox::policy::real(&work.join(rel));
                let done = Beneath::for_write(&policy, &real)
                    .and_then(|(root, rel)| open_write(&root, &rel, true, &policy));
                match done {
                    Ok((mut file, _)) => Some(file.write_all(b"owned\n").is_ok()),
                    Err(FsxError::Symlink(_) | FsxError::NotWritable(_)) => Some(false),
                    Err(e) => missing(&e),
                }
            };
            race(rel, attempt, || outside_kept(&root));
        }
    }

    #[test]
    fn the_walk_without_openat2_never_passes_a_swapped_symlink_either() {
        let (_d, root, _) = world();
        let work = Beneath::open(&root.join("work")).unwrap();
        std::fs::write(root.join("work/d/x"), "decoy\n").unwrap();
        let _swaps = swapped(&root, &[("f", "home/.ssh/id_rsa"), ("d", "home/out")]);
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW;
        for rel in ["f", "d/x"] {
            let attempt = || opened(by_walk(work.fd(), Path::new(rel), flags).map(File::from));
            race(rel, attempt, || outside_kept(&root));
        }
    }

    #[test]
    fn a_removal_through_a_swapped_directory_never_removes_outside() {
        let (_d, root, _) = world();
        let work = Beneath::open(&root.join("work")).unwrap();
        // The real directory, wherever its name is: the file is put back through it.
        let real_d = rustix::fs::open(root.join("work/d"), OFlags::RDONLY, Mode::empty()).unwrap();
        let _swaps = swapped(&root, &[("d", "home/out")]);
        let attempt = || {
            let flags = OFlags::WRONLY | OFlags::CREATE;
            drop(rustix::fs::openat(&real_d, "x", flags, Mode::from_raw_mode(0o644)).unwrap());
            match work.remove(Path::new("d/x")) {
                Ok(()) => Some(true),
                Err(FsxError::Symlink(_)) => Some(false),
                Err(e) => missing(&e),
            }
        };
        race("remove", attempt, || outside_kept(&root));
    }

    #[test]
    fn a_hard_link_to_a_denied_or_protected_file_is_not_written() {
        let (_d, root, policy) = world();
        let work = Beneath::open(&root.join("work")).unwrap();
        std::fs::hard_link(root.join("home/.ssh/id_rsa"), root.join("work/key")).unwrap();
        std::fs::create_dir_all(root.join("work/.git/hooks")).unwrap();
        std::fs::write(root.join("work/.git/hooks/pre-commit"), "hook\n").unwrap();
        let hook = root.join("work/.git/hooks/pre-commit");
        std::fs::hard_link(&hook, root.join("work/hook")).unwrap();
        std::fs::hard_link(root.join("work/f"), root.join("work/f2")).unwrap();
        for (rel, to) in [
            ("key", "home/.ssh/id_rsa"),
            ("hook", "work/.git/hooks/pre-commit"),
        ] {
            let e = open_write(&work, Path::new(rel), false, &policy).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("it is a hard link to {}", root.join(to).display())
            );
        }
        assert_eq!(
            std::fs::read_to_string(root.join("home/.ssh/id_rsa")).unwrap(),
            SECRET
        );
        assert_eq!(std::fs::read_to_string(&hook).unwrap(), "hook\n");
        // Another link of an ordinary file is written as before.
        let (mut f2, created) = open_write(&work, Path::new("f2"), false, &policy).unwrap();
        f2.write_all(b"both\n").unwrap();
        assert!(!created);
        assert_eq!(
            std::fs::read_to_string(root.join("work/f")).unwrap(),
            "both\n"
        );
    }
}
