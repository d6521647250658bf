//! The editor's file system (ACP `fs/read_text_file`, `fs/write_text_file`): when the client
//! advertised them in `initialize`, an ACP session's `read`, `edit` and `write` tools get and put
//! text through the editor, so they see unsaved buffers and their edits land in the editor.
//! Owns only these two requests; the kernel sees a [`FileClient`], the tools keep their checks.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use super::schema::{
    FileSystemCapabilities, ReadTextFileRequest, ReadTextFileResponse, WriteTextFileRequest,
};
use super::Peer;
use crate::kernel::tool::files::Answer;
use crate::kernel::tool::{FileClient, Files};

/// One session's way to the editor's files.
pub struct EditorFiles {
    peer: Arc<Peer>,
    caps: FileSystemCapabilities,
    /// The ACP session id the requests name (known once the session has started).
    session: OnceLock<String>,
}

impl EditorFiles {
    /// `None` when the client offers neither method: the tools use the disk.
    pub fn new(peer: Arc<Peer>, caps: &FileSystemCapabilities) -> Option<Arc<EditorFiles>> {
        (caps.read_text_file || caps.write_text_file).then(|| {
            Arc::new(EditorFiles {
                peer,
                caps: caps.clone(),
                session: OnceLock::new(),
            })
        })
    }

    /// The session the requests are for.
    pub fn started(&self, session: &str) {
        let _ = self.session.set(session.to_string());
    }

    /// What a session's tools use.
    pub fn files(self: &Arc<Self>) -> Files {
        Files::client(self.clone())
    }

    fn session(&self) -> String {
        self.session.get().cloned().unwrap_or_default()
    }

    fn ask<T: Send + 'static>(
        &self,
        method: &'static str,
        params: &impl serde::Serialize,
        take: fn(serde_json::Value) -> Result<T, String>,
    ) -> Answer<T> {
        let begun = self.peer.begin(method, params);
        Box::pin(async move {
            let (_, rx) = begun.ok_or_else(|| format!("cannot send {method}"))?;
            match rx.await {
                Ok(answer) => Ok(take(
                    answer.map_err(|e| format!("the editor refused: {e}"))?,
                )?),
                Err(_) => Err("the editor closed the connection before answering".into()),
            }
        })
    }
}

impl FileClient for EditorFiles {
    fn reads(&self) -> bool {
        self.caps.read_text_file
    }

    fn writes(&self) -> bool {
        self.caps.write_text_file
    }

    fn read(&self, path: &Path) -> Answer<String> {
        let request = ReadTextFileRequest::new(self.session(), path);
        self.ask("fs/read_text_file", &request, |v| {
            serde_json::from_value::<ReadTextFileResponse>(v)
                .map(|r| r.content)
                .map_err(|e| format!("the editor's answer has no text: {e}"))
        })
    }

    fn write(&self, path: &Path, content: String) -> Answer<()> {
        let request = WriteTextFileRequest::new(self.session(), path, content);
        self.ask("fs/write_text_file", &request, |_| Ok(()))
    }
}
