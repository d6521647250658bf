//! The user input of `prompt`, `steer` and `follow_up` as the kernel gets it, the same for
//! every front end: `/skill:NAME` (pi's form), then `/NAME` of a prompt template (keel's or a
//! Claude command, whose `model` and `allowed-tools` become the prompt's options), then `/NAME`
//! of a skill (Claude Code's form; a template of the name wins, being the more specific).
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::sync::Arc;

use super::{CommandError, CommandErrorKind, Host};
use crate::kernel::message::Content;
use crate::kernel::op::{PromptOptions, UserInput};
use crate::kernel::policy::Rules;
use crate::kernel::provider::catalog::claude_alias;
use crate::kernel::provider::Provider;
use crate::prompts::{self, Template};
use crate::wire::events::NotifyType;

impl Host {
    /// `message` with its command expanded and the command's options resolved; an error (a
    /// model that cannot be used) before anything reaches the session.
    pub(super) async fn input(
        &mut self,
        message: &str,
        images: Vec<Content>,
    ) -> Result<UserInput, CommandError> {
        let input = |text: String, options: PromptOptions| UserInput {
            text,
            images,
            options,
        };
        if let Some(text) = crate::skills::expand(message, &self.skills) {
            return Ok(input(text, PromptOptions::default()));
        }
        if let Some(template) = prompts::invoked(message, &self.templates).cloned() {
            let text = prompts::expand(message, &self.templates).unwrap_or_default();
            let options = self.options(&template).await?;
            return Ok(input(text, options));
        }
        let text = crate::skills::expand_named(message, &self.skills)
            .unwrap_or_else(|| message.to_string());
        Ok(input(text, PromptOptions::default()))
    }

    /// A template's `model` and `allowed-tools` as the options its prompt runs with.
    async fn options(&mut self, t: &Template) -> Result<PromptOptions, CommandError> {
        let model = match t.model() {
            Some(word) => self.command_model(t, word).await?,
            None => None,
        };
        let origin = format!("/{} ({})", t.name, t.path.display());
        let list: Vec<(String, String)> = t
            .allowed_tools()
            .iter()
            .map(|r| (r.clone(), origin.clone()))
            .collect();
        let root = crate::settings::project_root(&self.config.cwd);
        let (allowed, warnings) = Rules::build(&[], &[], &list, &root, &root);
        for w in warnings {
            self.notify(&w.to_string(), NotifyType::Warning);
        }
        Ok(PromptOptions { model, allowed })
    }

    /// The model a command names: a Claude alias (`haiku`: Anthropic's current Haiku), a
    /// `provider/id`, or an id of one of the models the session can use (else the session
    /// provider's). `None` when it is the session's own.
    async fn command_model(
        &mut self,
        t: &Template,
        word: &str,
    ) -> Result<Option<Arc<dyn Provider>>, CommandError> {
        let spec = match claude_alias(word) {
            Some(id) => format!("anthropic/{id}"),
            None => word.trim().to_string(),
        };
        let current = self.live.session.provider();
        let (provider, id) = match spec.split_once('/') {
            Some((p, id)) => (p.to_string(), id.to_string()),
            None => {
                let listed = self.models.available().await;
                let found = listed.into_iter().find(|m| m.id == spec);
                let p = found.map_or_else(|| current.name().to_string(), |m| m.provider);
                (p, spec.clone())
            }
        };
        if provider == current.name() && id == current.model() {
            return Ok(None);
        }
        match self.models.build(&provider, &id).await {
            Ok(p) => Ok(Some(p)),
            Err(e) => Err(CommandError::new(
                CommandErrorKind::Model,
                format!(
                    "/{}: cannot run with its model `{word}` ({}): {e}",
                    t.name,
                    t.path.display()
                ),
            )),
        }
    }
}
