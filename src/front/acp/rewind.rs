//! `/rewind` in an ACP session (DESIGN §16): an available command the editor offers. A
//! prompt `/rewind` lists the session's checkpoints as an agent message; `/rewind ID
//! [files|conversation|both]` rewinds to before that checkpoint's (or user message's) prompt
//! through the host's `rewind` command, the one RPC, the daemon and the TUI use, and says
//! what changed. Nothing here touches a file or the session itself.

use super::schema::{AvailableCommand, AvailableCommandInput, UnstructuredCommandInput};
use crate::client::link::Commands;
use crate::kernel::checkpoint::{Listed, Restore, Rewound};
use crate::wire::pi::data::CheckpointsData;
use crate::wire::pi::Command;

/// The command's name (typed `/rewind`).
pub const NAME: &str = "rewind";

/// `/rewind` as `available_commands_update` advertises it.
pub fn command() -> AvailableCommand {
    let hint = "checkpoint or message id, then files, conversation or both (none: list them)";
    AvailableCommand::new(
        NAME,
        "List the checkpoints, or rewind files and conversation to before a message",
    )
    .input(AvailableCommandInput::Unstructured(
        UnstructuredCommandInput::new(hint),
    ))
}

/// What a `/rewind` prompt asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ask {
    /// `/rewind`: the checkpoints.
    List,
    /// `/rewind ID [files|conversation|both]`.
    Rewind { target: String, restore: Restore },
}

/// The `/rewind` a prompt's text is, if it is one (`Err`: how to write it).
pub fn parse(text: &str) -> Option<Result<Ask, String>> {
    let rest = text.trim().strip_prefix('/')?.strip_prefix(NAME)?;
    if !rest.is_empty() && !rest.starts_with(char::is_whitespace) {
        return None;
    }
    let words: Vec<&str> = rest.split_whitespace().collect();
    let usage = || {
        "usage: /rewind (lists the checkpoints) or /rewind ID [files|conversation|both]".to_string()
    };
    Some(match words.as_slice() {
        [] => Ok(Ask::List),
        [target] => Ok(Ask::Rewind {
            target: target.to_string(),
            restore: Restore::Both,
        }),
        [target, word] => {
            let restore = match *word {
                "files" | "code" => Restore::Files,
                "conversation" => Restore::Conversation,
                "both" => Restore::Both,
                _ => return Some(Err(usage())),
            };
            Ok(Ask::Rewind {
                target: target.to_string(),
                restore,
            })
        }
        _ => Err(usage()),
    })
}

/// Does what `ask` says through the host; the agent message that reports it (a refusal, such
/// as a run being active, is reported the same way).
pub async fn run(commands: &Commands, ask: Result<Ask, String>) -> String {
    match ask {
        Err(usage) => usage,
        Ok(Ask::List) => match commands
            .ask::<CheckpointsData>(&Command::GetCheckpoints {})
            .await
        {
            Ok(data) => listing(&data.checkpoints),
            Err(e) => format!("Cannot list the checkpoints: {}", e.message),
        },
        Ok(Ask::Rewind { target, restore }) => {
            let rewind = Command::Rewind {
                entry_id: target,
                restore: Some(restore),
            };
            match commands.ask::<Rewound>(&rewind).await {
                Ok(done) => report(&done),
                Err(e) => format!("The rewind did not happen: {}", e.message),
            }
        }
    }
}

/// The checkpoints, newest first: id, message id, time, prompt's first line, files.
pub fn listing(list: &[Listed]) -> String {
    if list.is_empty() {
        return "This session has no checkpoints yet: keel takes one before the first change \
                of each turn."
            .to_string();
    }
    let mut text = String::from(
        "Checkpoints, newest first (`/rewind ID [files|conversation|both]` rewinds to before \
         the message):\n",
    );
    for c in list.iter().rev() {
        let files = match c.files.len() {
            0 => "no files changed before it".to_string(),
            1 => format!("1 file: {}", c.files[0]),
            n => format!("{n} files: {}", c.files.join(", ")),
        };
        text.push_str(&format!(
            "\n- `{}` (message `{}`, {}): {} · {files}",
            c.id, c.entry_id, c.timestamp, c.prompt
        ));
    }
    text
}

/// `Rewound … to before message X` and the files written and removed.
pub fn report(done: &Rewound) -> String {
    let what = match done.restore {
        Restore::Files => "the files",
        Restore::Conversation => "the conversation",
        Restore::Both => "the files and the conversation",
    };
    let mut text = format!("Rewound {what} to before message `{}`.", done.entry_id);
    if done.restore.files() {
        if done.restored.is_empty() {
            text.push_str(" No file changed.");
        }
        for line in done.restored.lines() {
            text.push_str(&format!("\n- {line}"));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_that_are_rewinds() {
        let rewind = |t: &str, r| {
            Some(Ok(Ask::Rewind {
                target: t.into(),
                restore: r,
            }))
        };
        assert_eq!(parse(" /rewind "), Some(Ok(Ask::List)));
        assert_eq!(parse("/rewind ab12"), rewind("ab12", Restore::Both));
        assert_eq!(parse("/rewind ab12 files"), rewind("ab12", Restore::Files));
        let conv = parse("/rewind ab12 conversation");
        assert_eq!(conv, rewind("ab12", Restore::Conversation));
        assert!(matches!(parse("/rewind ab12 all"), Some(Err(_))));
        assert!(matches!(parse("/rewind a b c"), Some(Err(_))));
        assert_eq!(parse("/rewinder"), None);
        assert_eq!(parse("please /rewind"), None);
    }
}
