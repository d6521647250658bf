//! The editor's file system (ACP `fs/read_text_file`, `fs/write_text_file`): when the client
//! advertised them in `initialize`, an ACP session's `read`, `edit` and `write` tools get and put
//! text through the editor, so they see unsaved buffers and their edits land in the editor.
//! Owns only these two requests; the kernel sees a [`FileClient`], the tools keep their checks.
//!
//! A call's request waits until the session task has sent that call's `tool_call` update (the
//! updates come through the host's event stream, the requests straight from the tool): an
//! editor sees the call before the file requests it makes. A preview's read (no call) goes
//! at once.

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use tokio::sync::watch;

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
    /// The calls whose `tool_call` the editor has been sent (`None`: the session ended, nothing
    /// waits any more).
    shown: watch::Sender<Option<HashSet<String>>>,
}

impl EditorFiles {
    /// `None` when the client offers neither method: the tools use the disk.
    pub fn new(peer: Arc<Peer>, caps: &FileSystemCapabilities) -> Option<Arc<EditorFiles>> {
        (caps.read_text_file || caps.write_text_file).then(|| {
            Arc::new(EditorFiles {
                peer,
                caps: caps.clone(),
                session: OnceLock::new(),
                shown: watch::Sender::new(Some(HashSet::new())),
            })
        })
    }

    /// The session the requests are for.
    pub fn started(&self, session: &str) {
        let _ = self.session.set(session.to_string());
    }

    /// The editor has been sent call `call`'s `tool_call`: its requests may go.
    pub fn shown(&self, call: &str) {
        self.shown.send_modify(|s| {
            if let Some(s) = s {
                s.insert(call.to_string());
            }
        });
    }

    /// Call `call` ended: nothing of it waits any more.
    pub fn ended(&self, call: &str) {
        self.shown.send_if_modified(|s| match s {
            Some(s) => s.remove(call),
            None => false,
        });
    }

    /// The session task ended: requests no longer wait for updates that will not come.
    pub fn closed(&self) {
        self.shown.send_replace(None);
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
        call: Option<&str>,
        method: &'static str,
        params: &impl serde::Serialize,
        take: fn(serde_json::Value) -> Result<T, String>,
    ) -> Answer<T> {
        let (peer, call) = (self.peer.clone(), call.map(str::to_string));
        let mut shown = self.shown.subscribe();
        let params = serde_json::to_value(params);
        Box::pin(async move {
            let params = params.map_err(|e| format!("cannot encode {method}: {e}"))?;
            if let Some(call) = call {
                // Closed (`Err`): the session ended; the request goes (and finds no editor).
                let _ = shown
                    .wait_for(|s| s.as_ref().is_none_or(|s| s.contains(&call)))
                    .await;
            }
            let begun = peer.begin(method, &params);
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

    fn read(&self, call: Option<&str>, path: &Path) -> Answer<String> {
        let request = ReadTextFileRequest::new(self.session(), path);
        self.ask(call, "fs/read_text_file", &request, |v| {
            serde_json::from_value::<ReadTextFileResponse>(v)
                .map(|r| r.content)
                .map_err(|e| format!("the editor's answer has no text: {e}"))
        })
    }

    fn write(&self, call: Option<&str>, path: &Path, content: String) -> Answer<()> {
        let request = WriteTextFileRequest::new(self.session(), path, content);
        self.ask(call, "fs/write_text_file", &request, |_| Ok(()))
    }
}
