//! Opening the files `read`, `edit` and `write` work on: regular files only, opened without
//! blocking and by descriptor (`kernel::fsx`): a read is judged by where its descriptor is, a
//! write stays beneath its writable root without passing a symlink. Owns only these checks; a
//! FIFO, socket, device or directory is refused with a tool error before a single byte is read,
//! so nothing here can block keel or read without end. Blocking calls: run them in
//! `spawn_blocking`.

use std::fs::{File, Metadata};
use std::io::Write;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

use super::ToolOutput;
use crate::kernel::fsx::{self, Beneath, FsxError};
use crate::kernel::sandbox::policy::real;
use crate::kernel::sandbox::SandboxPolicy;

/// Opens `path` (shown to the model as `shown`) for reading, if it is a regular file the
/// policy lets it read. `verb` starts the error messages ("read", "edit").
pub(super) fn open_regular(
    path: &Path,
    shown: &str,
    verb: &str,
    policy: &SandboxPolicy,
) -> Result<(File, Metadata), ToolOutput> {
    let fail = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::NotFound => ToolOutput::error(format!("File not found: {shown}")),
        _ => ToolOutput::error(format!("Cannot {verb} {shown}: {e}")),
    };
    // The path first: opening a socket fails with an obscure error, and a FIFO is better
    // refused by name.
    let meta = std::fs::metadata(path).map_err(fail)?;
    check_regular(&meta, shown, verb)?;
    // O_NONBLOCK: if the path became a FIFO since, opening it does not wait for a writer.
    let file = fsx::open_read(path, true, false, policy).map_err(|e| match e {
        FsxError::Io(e) => fail(e),
        e => refused(shown, verb, &e),
    })?;
    let meta = file.metadata().map_err(fail)?;
    check_regular(&meta, shown, verb)?;
    Ok((file, meta))
}

/// The tool error for a file `fsx` would not open: a denied read says what `guard` says.
pub(super) fn refused(shown: &str, verb: &str, e: &FsxError) -> ToolOutput {
    let verb = match e {
        FsxError::Denied(_) => "read",
        _ => verb,
    };
    ToolOutput::error(format!("Cannot {verb} {shown}: {e}"))
}

/// Replaces the content of `path` (creating it if `create`), opened by descriptor beneath
/// the writable root its real path is in, without passing a symlink, without blocking (a FIFO
/// without reader fails instead of waiting for one).
pub(super) fn write_regular(
    path: &Path,
    bytes: &[u8],
    create: bool,
    policy: &SandboxPolicy,
) -> Result<(), FsxError> {
    let (root, rel) = Beneath::for_write(policy, &real(path))?;
    let (mut file, _) = fsx::open_write(&root, &rel, create, policy)?;
    file.write_all(bytes)?;
    Ok(file.flush()?)
}

/// Creates the missing parent directories of `path` beneath its writable root, by
/// descriptor (`mkdirat` one at a time), never through a symlink.
pub(super) fn make_parents(path: &Path, policy: &SandboxPolicy) -> Result<(), FsxError> {
    let (root, rel) = Beneath::for_write(policy, &real(path))?;
    root.parent(&rel, fsx::Make::Missing).map(|_| ())
}

/// What a file that is not a regular file is, for error messages (`None` for a regular
/// file): "a directory", "a FIFO (named pipe)", "a socket", "a character device", ….
/// Every refusal of a non-regular file (tools, session files, scripts, models.json) says it
/// with these words.
pub fn irregular_kind(meta: &Metadata) -> Option<&'static str> {
    let t = meta.file_type();
    Some(if t.is_file() {
        return None;
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "of another kind"
    })
}

/// A tool error unless `meta` is a regular file's.
pub(super) fn check_regular(meta: &Metadata, shown: &str, verb: &str) -> Result<(), ToolOutput> {
    let what = match irregular_kind(meta) {
        None => return Ok(()),
        Some("a directory") => "it is a directory (use ls to list it)".to_string(),
        Some(kind) => format!("it is {kind}, not a regular file"),
    };
    Err(ToolOutput::error(format!("Cannot {verb} {shown}: {what}")))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn off() -> SandboxPolicy {
        crate::kernel::sandbox::Sandbox::off(Path::new("/")).policy
    }

    #[test]
    fn only_regular_files_open() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let sock = d.path().join("sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let cases = [
            (
                fifo.as_path(),
                "it is a FIFO (named pipe), not a regular file",
            ),
            (sock.as_path(), "it is a socket, not a regular file"),
            (d.path(), "it is a directory (use ls to list it)"),
            (
                Path::new("/dev/zero"),
                "it is a character device, not a regular file",
            ),
        ];
        for (path, why) in cases {
            let err = open_regular(path, "x", "read", &off()).unwrap_err();
            assert!(err.is_error);
            assert_eq!(err.text(), format!("Cannot read x: {why}"));
        }
        std::fs::write(d.path().join("f"), "ok").unwrap();
        assert!(open_regular(&d.path().join("f"), "f", "read", &off()).is_ok());
        let err = open_regular(&d.path().join("nope"), "nope", "edit", &off()).unwrap_err();
        assert_eq!(err.text(), "File not found: nope");
    }

    #[test]
    fn writing_to_a_fifo_without_reader_fails_at_once() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(write_regular(&fifo, b"x", true, &off()).is_err());
    }
}
