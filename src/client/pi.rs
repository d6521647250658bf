//! Typed pi commands on a link: a front end sends a [`Command`] and reads the answer into the
//! struct of `wire::pi::data` its command names, never a `Value` by field name. Only the
//! encoding and decoding around `Commands::request`; how a command travels is `link`'s.

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::link::{Commands, LinkError, LinkErrorKind};
use crate::wire::pi::Command;

impl Commands {
    /// Runs `command`: pi's `data` (`{}` without one) or pi's error text.
    pub async fn send(&self, command: &Command) -> Result<Value, LinkError> {
        let fields = Value::Object(command.fields());
        self.request(command.name().as_str(), fields).await
    }

    /// Runs `command` and reads its `data` as `T` (an answer that does not fit is an error
    /// naming the command).
    pub async fn ask<T: DeserializeOwned>(&self, command: &Command) -> Result<T, LinkError> {
        let data = self.send(command).await?;
        serde_json::from_value(data).map_err(|e| {
            let text = format!("the answer to {} does not fit: {e}", command.name());
            LinkError::new(LinkErrorKind::Malformed, text)
        })
    }
}
