//! Notifications for a user whose terminal window is not focused (the `notify` setting): when
//! a run ends and waits for a prompt, or a call waits for an approval, the TUI writes the
//! terminal bell or a desktop notification (OSC 9, OSC 777). Focus is what the terminal
//! reports (focus reporting, `CSI ?1004h`, is asked for in `tty.rs`: `CSI I` focused, `CSI O`
//! not); a terminal that never reports it counts as focused, so it is never rung for nothing.
//! A window that is gone (detached) is the `Notification` hook's case, fired by the kernel.
//! Pure: bytes out, the controller writes them.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use crate::setup::settings::NotifyChannel;
use crate::wire::events::{Outcome, UiMethod, WireEvent};

/// The title of a desktop notification.
const TITLE: &str = "keel";

/// The channel the run's settings name (`bell` when none does).
pub fn channel(settings: &crate::setup::Settings) -> NotifyChannel {
    settings
        .files
        .notify
        .as_ref()
        .map(|s| s.value)
        .unwrap_or_default()
}

/// The channel of the settings files of a window opened in `env` (`keel attach`, which reads
/// no other settings); `bell` when they cannot be read (their errors are the session's).
pub fn channel_in(env: &crate::mode::Env) -> NotifyChannel {
    crate::setup::settings::load(None, env)
        .ok()
        .and_then(|l| l.merged.notify.map(|s| s.value))
        .unwrap_or_default()
}

/// Whether the window is focused and how to notify when it is not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Notifier {
    pub channel: NotifyChannel,
    focused: bool,
}

impl Notifier {
    /// Focused until the terminal says otherwise.
    pub fn new(channel: NotifyChannel) -> Notifier {
        Notifier {
            channel,
            focused: true,
        }
    }

    /// The terminal reported focus gained (`true`) or lost.
    pub fn focus(&mut self, focused: bool) {
        self.focused = focused;
    }

    /// The bytes to write for a public event: none while the window is focused, for `off`, and
    /// for events that ask nothing of the user.
    pub fn on_event(&self, event: &WireEvent) -> Option<Vec<u8>> {
        if self.focused || self.channel == NotifyChannel::Off {
            return None;
        }
        message(event).map(|m| bytes(self.channel, &m))
    }
}

/// What a public event asks of the user, if anything: a prompt (the run ended; not when the
/// user interrupted it, they are there) or an approval.
pub fn message(event: &WireEvent) -> Option<String> {
    match event {
        WireEvent::AgentSettled { outcome, .. } if *outcome != Outcome::Aborted => {
            Some("the run ended; keel waits for your input".into())
        }
        WireEvent::ExtensionUiRequest(r) if r.method == UiMethod::Confirm => {
            let tool = r.tool_name.as_deref().unwrap_or("a tool");
            Some(format!("keel needs your approval for {tool}"))
        }
        _ => None,
    }
}

/// The bytes that notify through `channel` (none for `off`). Control characters of the text
/// become spaces, so it cannot end the sequence early.
pub fn bytes(channel: NotifyChannel, text: &str) -> Vec<u8> {
    let text: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    match channel {
        NotifyChannel::Bell => b"\x07".to_vec(),
        NotifyChannel::Osc9 => format!("\x1b]9;{text}\x07").into_bytes(),
        NotifyChannel::Osc777 => format!("\x1b]777;notify;{TITLE};{text}\x07").into_bytes(),
        NotifyChannel::Off => Vec::new(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn settled(outcome: &str) -> WireEvent<'static> {
        let line = format!(r#"{{"type":"agent_settled","aborted":false,"outcome":"{outcome}"}}"#);
        WireEvent::parse(&line).unwrap()
    }

    #[test]
    fn an_unfocused_window_is_notified_when_a_run_ends_or_asks() {
        let mut n = Notifier::new(NotifyChannel::Osc777);
        assert_eq!(n.on_event(&settled("completed")), None, "focused");
        n.focus(false);
        let got = n.on_event(&settled("completed")).unwrap();
        assert_eq!(
            String::from_utf8(got).unwrap(),
            "\x1b]777;notify;keel;the run ended; keel waits for your input\x07"
        );
        assert_eq!(n.on_event(&settled("aborted")), None);
        let ask = r#"{"type":"extension_ui_request","id":"c1","method":"confirm","title":"Allow bash?","toolName":"bash"}"#;
        let ask = WireEvent::parse(ask).unwrap();
        let got = Notifier {
            channel: NotifyChannel::Osc9,
            focused: false,
        }
        .on_event(&ask)
        .unwrap();
        assert_eq!(got, b"\x1b]9;keel needs your approval for bash\x07");
        assert_eq!(bytes(NotifyChannel::Bell, "x"), b"\x07");
        assert_eq!(bytes(NotifyChannel::Osc9, "a\x07b"), b"\x1b]9;a b\x07");
        n.channel = NotifyChannel::Off;
        assert_eq!(n.on_event(&settled("completed")), None);
    }
}
