//! Session changes: `new_session`, `switch_session`, `fork`, `clone` and the session name.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::path::{Path, PathBuf};

use super::dispatch::data;
use super::{Answer, CommandError, CommandErrorKind, Host};
use crate::host::live::{self, Live, Starting};
use crate::kernel::message::{user_text, Message};
use crate::kernel::recorder;
use crate::kernel::session::{self, EntryData, SessionError, SessionHeader, Store};
use crate::wire::pi::data::SessionChangeData;
use crate::wire::pi::{Command, NewSessionReason};
use crate::wire::rpc::{ParamError, ParamErrorKind};

impl Host {
    pub(super) fn set_session_name(&mut self, name: &str) -> Answer {
        let name = name.trim().to_string();
        if name.is_empty() {
            return Err(CommandError::new(
                CommandErrorKind::InvalidParams(ParamErrorKind::NotAllowed),
                "Session name cannot be empty",
            ));
        }
        self.live.session.set_session_name(name);
        Ok(None)
    }

    /// `new_session`, `switch_session`, `fork`, `clone` while idle (`decoded` holds one of
    /// them, or its field error).
    pub(super) async fn change_session(&mut self, decoded: Result<Command, ParamError>) -> Answer {
        let current_path = recorder::lock(&self.live.store)
            .path()
            .map(Path::to_path_buf);
        let changed = SessionChangeData::default();
        let decoded = decoded?;
        let cleared = matches!(
            decoded,
            Command::NewSession {
                reason: Some(NewSessionReason::Clear),
                ..
            }
        );
        let (store, answer) = match decoded {
            Command::NewSession { parent_session, .. } => {
                let mut header = self.new_header();
                header.parent_session = parent_session;
                (self.new_store(header), changed)
            }
            Command::SwitchSession { session_path } => {
                if current_path.as_deref() == Some(self.config.cwd.join(&session_path).as_path()) {
                    return Ok(data(&changed));
                }
                let target = self.switch_target(&session_path)?;
                let (store, warnings) = Store::resume(&target, &self.clock)?;
                self.warnings.extend(warnings);
                (store, changed)
            }
            Command::Fork { entry_id } => self.fork(&entry_id, current_path.as_deref())?,
            _ => {
                let leaf = recorder::lock(&self.live.store)
                    .leaf_id()
                    .map(str::to_string)
                    .ok_or_else(|| {
                        CommandError::new(
                            CommandErrorKind::Entry,
                            "Cannot clone session: no current entry selected",
                        )
                    })?;
                let store = self.fork_store(Some(&leaf), current_path.as_deref())?;
                (store, changed)
            }
        };
        if cleared {
            // As Claude Code's `/clear`: the old session's hooks see it end, the new one's see
            // it start, both with `clear`.
            self.live.session.end_hooks("clear").await;
        }
        self.replace(store).await;
        if cleared {
            self.live.session.start_hooks_as("clear");
        }
        Ok(data(&answer))
    }

    /// `fork`'s new store and answer: the path up to the parent of user message `entry_id`.
    fn fork(
        &self,
        entry_id: &str,
        current_path: Option<&Path>,
    ) -> Result<(Store, SessionChangeData), CommandError> {
        let (leaf, text) = {
            let store = recorder::lock(&self.live.store);
            let entry = store
                .entry(entry_id)
                .ok_or_else(|| CommandError::entry_not_found(entry_id))?;
            let EntryData::Message(Message::User(u)) = &entry.data else {
                return Err(CommandError::new(
                    CommandErrorKind::Entry,
                    format!("Invalid entry ID for forking: {entry_id} is not a user message"),
                ));
            };
            (entry.parent_id.clone(), user_text(u))
        };
        let store = self.fork_store(leaf.as_deref(), current_path)?;
        let answer = SessionChangeData {
            text: Some(text),
            cancelled: false,
        };
        Ok((store, answer))
    }

    /// The file `switch_session` to `query` loads: a path (relative to the cwd), else a
    /// session id in the session directory.
    pub fn switch_target(&self, query: &str) -> Result<PathBuf, SessionError> {
        let target = self.config.cwd.join(query);
        if target.is_file() {
            return Ok(target);
        }
        session::resolve(&self.session_dir, query)
    }

    pub(super) fn new_header(&self) -> SessionHeader {
        SessionHeader::new(&self.clock, self.config.cwd.display().to_string())
    }

    pub(super) fn new_store(&self, header: SessionHeader) -> Store {
        live::new_store(&self.live, &self.session_dir, header)
    }

    pub(super) fn fork_store(
        &self,
        leaf: Option<&str>,
        parent: Option<&Path>,
    ) -> Result<Store, SessionError> {
        live::fork_store(
            &self.live,
            &self.session_dir,
            self.new_header(),
            leaf,
            parent,
        )
    }

    /// Serves `store` from now on. The old session's last events are written and its
    /// recorder finishes (syncing the file and releasing its lock) before this returns.
    pub(super) async fn replace(&mut self, store: Store) {
        self.drain_events();
        self.last_run = None;
        let announce = store.entries().is_empty();
        let old_session = self.live.session.clone();
        let next = Live::start(
            &self.config,
            Some(&old_session),
            Starting {
                store,
                clock: self.clock.clone(),
                provider: old_session.provider(),
                thinking: old_session.thinking_level(),
                announce,
            },
        );
        std::mem::replace(&mut self.live, next).retire().await;
    }
}
