//! Where `read`, `edit` and `write` get and put a file's text: the disk, or a client that holds
//! the files (an editor's buffers, which may be unsaved). Owns only that choice. The tools keep
//! their checks, caps and messages either way; a client answers with text or an error message.
//! The kernel knows nothing of how a client is reached (ACP's `fs/*` requests, in `front::acp`).

use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

use crate::kernel::abort::AbortSignal;
use crate::kernel::sandbox::SandboxPolicy;

/// A client's answer to come: the value, or its error.
pub type Answer<T> = Pin<Box<dyn Future<Output = Result<T, FileError>> + Send>>;

/// Why a file could not be read or written through [`Files`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileErrorKind {
    /// The client that holds the files answered with an error (or could not be asked).
    Refused,
    /// The tool call was aborted before the answer came.
    Aborted,
    /// The disk refused the write.
    Io,
}

/// A file access that failed: its kind and the reason the tool's message quotes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileError {
    pub kind: FileErrorKind,
    pub message: String,
}

impl FileError {
    fn new(kind: FileErrorKind, message: impl Into<String>) -> Self {
        FileError {
            kind,
            message: message.into(),
        }
    }

    fn aborted() -> Self {
        Self::new(FileErrorKind::Aborted, "aborted")
    }
}

/// A client's own message is its refusal.
impl From<String> for FileError {
    fn from(message: String) -> Self {
        Self::new(FileErrorKind::Refused, message)
    }
}

/// A client's own message is its refusal.
impl From<&str> for FileError {
    fn from(message: &str) -> Self {
        Self::new(FileErrorKind::Refused, message)
    }
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for FileError {}

/// A client that reads and/or writes whole text files by absolute path.
pub trait FileClient: Send + Sync {
    /// Whether `read` and `edit` read through this client.
    fn reads(&self) -> bool;
    /// Whether `write` and `edit` write through this client.
    fn writes(&self) -> bool;
    /// The whole text of `path`, for tool call `call` (`None`: an approval's preview, read
    /// before the call runs).
    fn read(&self, call: Option<&str>, path: &Path) -> Answer<String>;
    /// Replaces (or creates) `path` with `content`, for tool call `call`.
    fn write(&self, call: Option<&str>, path: &Path, content: String) -> Answer<()>;
}

/// The file access of a session's tools: the disk unless a client was given.
#[derive(Clone, Default)]
pub struct Files {
    client: Option<Arc<dyn FileClient>>,
    /// The tool call these files are used by (none for an approval's preview).
    call: Option<Arc<str>>,
}

impl fmt::Debug for Files {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.client {
            None => f.write_str("Files(disk)"),
            Some(c) => write!(
                f,
                "Files(client: reads {}, writes {})",
                c.reads(),
                c.writes()
            ),
        }
    }
}

impl Files {
    /// Reads and writes go to `client` where it says it can, to the disk otherwise.
    pub fn client(client: Arc<dyn FileClient>) -> Self {
        Files {
            client: Some(client),
            call: None,
        }
    }

    /// The same files as used by tool call `call` (the client is told which call asks).
    pub fn for_call(&self, call: &str) -> Self {
        Files {
            client: self.client.clone(),
            call: Some(call.into()),
        }
    }

    /// Replaces the text of `full` (creating the file if `create`): through the client that
    /// writes, or on the disk (a regular file only, opened without blocking, by descriptor
    /// beneath the writable root `policy` puts it in).
    pub(super) async fn write(
        &self,
        full: &Path,
        content: String,
        create: bool,
        policy: &SandboxPolicy,
        abort: &AbortSignal,
    ) -> Result<(), FileError> {
        if let Some(client) = self.client.as_deref().filter(|c| c.writes()) {
            return tokio::select! {
                done = client.write(self.call.as_deref(), full, content) => done,
                _ = abort.aborted() => Err(FileError::aborted()),
            };
        }
        let (full, policy): (PathBuf, SandboxPolicy) = (full.to_path_buf(), policy.clone());
        let io = |e: &dyn fmt::Display| FileError::new(FileErrorKind::Io, e.to_string());
        tokio::task::spawn_blocking(move || {
            super::file::write_regular(&full, content.as_bytes(), create, &policy)
        })
        .await
        .map_err(|e| io(&e))?
        .map_err(|e| io(&e))
    }

    /// The whole text of `full` from the client that reads, or `None`: read the disk.
    pub(super) async fn read(
        &self,
        full: &Path,
        abort: &AbortSignal,
    ) -> Option<Result<String, FileError>> {
        let client = self.client.as_deref().filter(|c| c.reads())?;
        Some(tokio::select! {
            text = client.read(self.call.as_deref(), full) => text,
            _ = abort.aborted() => Err(FileError::aborted()),
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    use serde_json::json;

    use super::*;
    use crate::kernel::tool::{execute, test_context};

    /// An editor: buffers by path (which need not be on the disk), every call recorded.
    #[derive(Default)]
    struct Editor {
        reads: bool,
        writes: bool,
        buffers: Mutex<BTreeMap<PathBuf, String>>,
        calls: Mutex<Vec<String>>,
    }

    impl FileClient for Editor {
        fn reads(&self) -> bool {
            self.reads
        }
        fn writes(&self) -> bool {
            self.writes
        }
        fn read(&self, _: Option<&str>, path: &Path) -> Answer<String> {
            self.calls
                .lock()
                .unwrap()
                .push(format!("read {}", path.display()));
            let text = self.buffers.lock().unwrap().get(path).cloned();
            Box::pin(async move { text.ok_or_else(|| "no such buffer".into()) })
        }
        fn write(&self, _: Option<&str>, path: &Path, content: String) -> Answer<()> {
            self.calls
                .lock()
                .unwrap()
                .push(format!("write {}", path.display()));
            self.buffers
                .lock()
                .unwrap()
                .insert(path.to_path_buf(), content);
            Box::pin(async { Ok(()) })
        }
    }

    fn editor(reads: bool, writes: bool, dir: &Path, buffer: &str) -> Arc<Editor> {
        let e = Editor {
            reads,
            writes,
            ..Editor::default()
        };
        e.buffers
            .lock()
            .unwrap()
            .insert(dir.join("a.txt"), buffer.to_string());
        Arc::new(e)
    }

    #[tokio::test]
    async fn read_edit_and_write_go_through_the_editor_and_leave_the_disk_alone() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.txt"), "on disk\n").unwrap();
        let ed = editor(true, true, d.path(), "unsaved one\ntwo\n");
        let mut ctx = test_context(d.path());
        ctx.files = Files::client(ed.clone());

        let out = execute("read", &json!({"path": "a.txt"}), &ctx).await;
        assert!(!out.is_error, "{}", out.text());
        assert_eq!(out.text(), "unsaved one\ntwo");
        let out = execute("read", &json!({"path": "a.txt", "offset": 2}), &ctx).await;
        assert_eq!(out.text(), "two");

        let edit = json!({"path": "a.txt", "oldText": "one", "newText": "1"});
        let out = execute("edit", &edit, &ctx).await;
        assert!(!out.is_error, "{}", out.text());
        assert!(out.text().contains("+unsaved 1"), "{}", out.text());

        let write = json!({"path": "new/b.txt", "content": "fresh"});
        let out = execute("write", &write, &ctx).await;
        assert!(!out.is_error, "{}", out.text());

        let buffers = ed.buffers.lock().unwrap().clone();
        assert_eq!(buffers[&d.path().join("a.txt")], "unsaved 1\ntwo\n");
        assert_eq!(buffers[&d.path().join("new/b.txt")], "fresh");
        assert_eq!(
            std::fs::read_to_string(d.path().join("a.txt")).unwrap(),
            "on disk\n"
        );
        assert!(!d.path().join("new/b.txt").exists());
        let a = d.path().join("a.txt").display().to_string();
        let b = d.path().join("new/b.txt").display().to_string();
        assert_eq!(
            *ed.calls.lock().unwrap(),
            [
                format!("read {a}"),
                format!("read {a}"),
                format!("read {a}"),
                format!("write {a}"),
                format!("write {b}"),
            ]
        );
    }

    #[tokio::test]
    async fn an_editor_that_only_reads_leaves_writing_to_the_disk() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.txt"), "disk\n").unwrap();
        let ed = editor(true, false, d.path(), "buffer\n");
        let mut ctx = test_context(d.path());
        ctx.files = Files::client(ed.clone());
        let edit = json!({"path": "a.txt", "oldText": "buffer", "newText": "edited"});
        let out = execute("edit", &edit, &ctx).await;
        assert!(!out.is_error, "{}", out.text());
        assert_eq!(
            std::fs::read_to_string(d.path().join("a.txt")).unwrap(),
            "edited\n"
        );
    }

    /// An editor that never answers.
    struct Silent;

    impl FileClient for Silent {
        fn reads(&self) -> bool {
            true
        }
        fn writes(&self) -> bool {
            true
        }
        fn read(&self, _: Option<&str>, _: &Path) -> Answer<String> {
            Box::pin(std::future::pending())
        }
        fn write(&self, _: Option<&str>, _: &Path, _: String) -> Answer<()> {
            Box::pin(std::future::pending())
        }
    }

    #[tokio::test]
    async fn each_way_a_file_access_fails_has_its_kind() {
        let d = tempfile::tempdir().unwrap();
        let (controller, abort) = crate::kernel::abort::AbortController::new();
        let ed = Files::client(editor(true, true, d.path(), "x\n"));
        let e = ed.read(&d.path().join("missing"), &abort).await;
        assert_eq!(e.unwrap().unwrap_err().kind, FileErrorKind::Refused);
        let disk = Files::default();
        let policy = crate::kernel::sandbox::Sandbox::off(d.path()).policy;
        let e = disk
            .write(d.path(), "x".into(), true, &policy, &abort)
            .await
            .unwrap_err();
        assert_eq!(e.kind, FileErrorKind::Io, "{e}");
        controller.abort();
        let silent = Files::client(Arc::new(Silent));
        let e = silent.read(d.path(), &abort).await.unwrap().unwrap_err();
        assert_eq!(
            (e.kind, e.message.as_str()),
            (FileErrorKind::Aborted, "aborted")
        );
        let e = silent
            .write(d.path(), "x".into(), true, &policy, &abort)
            .await
            .unwrap_err();
        assert_eq!(e.kind, FileErrorKind::Aborted);
    }

    #[tokio::test]
    async fn the_editors_refusal_is_the_tools_error_and_nothing_is_written() {
        let d = tempfile::tempdir().unwrap();
        let ed = editor(true, true, d.path(), "x\n");
        let mut ctx = test_context(d.path());
        ctx.files = Files::client(ed.clone());
        let out = execute("read", &json!({"path": "missing.txt"}), &ctx).await;
        assert!(out.is_error);
        assert_eq!(out.text(), "Cannot read missing.txt: no such buffer");
        let edit = json!({"path": "missing.txt", "oldText": "x", "newText": "y"});
        let out = execute("edit", &edit, &ctx).await;
        assert_eq!(out.text(), "Cannot edit missing.txt: no such buffer");
        assert!(ed
            .calls
            .lock()
            .unwrap()
            .iter()
            .all(|c| c.starts_with("read")));
        // A buffer with a NUL is refused as binary, like a file on the disk.
        ed.buffers
            .lock()
            .unwrap()
            .insert(d.path().join("bin"), "a\0b".into());
        let out = execute("read", &json!({"path": "bin"}), &ctx).await;
        assert_eq!(out.text(), "Cannot read bin: binary file, 3 bytes");
    }
}
