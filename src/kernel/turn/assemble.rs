//! Assembles one streamed assistant message from provider events: the open text or thinking
//! block, the open tool calls (keyed by id, since parallel calls may interleave) and what the
//! stream said about failing. Publishes each delta; never calls the provider or a tool.

use crate::kernel::agent::Inner;
use crate::kernel::event::{AssistantDelta, EventPayload};
use crate::kernel::failure::ErrorKind;
use crate::kernel::message::{AssistantMessage, Content, StopReason};
use crate::kernel::provider::ProviderEvent;
use crate::kernel::tool;
use serde_json::Value;

/// Tracks the open text or thinking block and the open tool calls while a message streams.
/// Tool calls are keyed by id because parallel calls may stream interleaved.
#[derive(Default)]
pub(super) struct Assembler {
    /// The open text or thinking block and its content index.
    open: Option<(Open, usize)>,
    /// Open tool calls: id, content index, arguments so far.
    calls: Vec<(String, usize, String)>,
    pub(super) error_kind: Option<ErrorKind>,
    pub(super) retry_after_ms: Option<u64>,
    /// Whether any content streamed (a failure before that may be retried).
    pub(super) saw_output: bool,
}

#[derive(Clone, Copy, PartialEq)]
enum Open {
    Text,
    Thinking,
}

impl Assembler {
    /// Applies one provider event; true when the message is complete.
    pub(super) fn apply(
        &mut self,
        inner: &Inner,
        msg: &mut AssistantMessage,
        ev: ProviderEvent,
    ) -> bool {
        match ev {
            ProviderEvent::Text(t) => {
                let index = self.ensure(inner, msg, Open::Text);
                if let Some(Content::Text { text }) = msg.content.get_mut(index) {
                    text.push_str(&t);
                }
                self.delta(inner, msg, AssistantDelta::TextDelta { index, delta: t });
            }
            ProviderEvent::Thinking(t) => {
                let index = self.ensure(inner, msg, Open::Thinking);
                if let Some(Content::Thinking { thinking, .. }) = msg.content.get_mut(index) {
                    thinking.push_str(&t);
                }
                self.delta(
                    inner,
                    msg,
                    AssistantDelta::ThinkingDelta { index, delta: t },
                );
            }
            ProviderEvent::ThinkingSignature(sig) => {
                // The signature ends the thinking block it belongs to: the open one, else a
                // new empty one (reasoning that showed no text).
                let index = match self.open {
                    Some((Open::Thinking, index)) => index,
                    _ => self.ensure(inner, msg, Open::Thinking),
                };
                if let Some(Content::Thinking { signature, .. }) = msg.content.get_mut(index) {
                    signature.get_or_insert_with(String::new).push_str(&sig);
                }
                self.close_block(inner, msg);
            }
            ProviderEvent::ToolCallStart { id, name } => {
                self.close_block(inner, msg);
                self.saw_output = true;
                if name == "bash" && inner.config.tools.iter().any(|t| t == "bash") {
                    // The sandbox's zygote starts while the model writes the command, not when
                    // the command runs; a run that calls no `bash` starts none.
                    let c = &inner.config;
                    crate::kernel::tool::bash::warm(&c.sandbox, &c.cwd, &c.tool_env, &c.temp_dir);
                }
                msg.content.push(Content::ToolCall {
                    id: id.clone(),
                    name: name.clone(),
                    arguments: Value::Object(Default::default()),
                });
                let index = msg.content.len() - 1;
                self.calls.push((id.clone(), index, String::new()));
                self.delta(
                    inner,
                    msg,
                    AssistantDelta::ToolCallStarted { index, id, name },
                );
            }
            ProviderEvent::ToolCallDelta { id, delta } => {
                if let Some((_, index, args)) = self.calls.iter_mut().find(|c| c.0 == id) {
                    args.push_str(&delta);
                    let index = *index;
                    self.delta(inner, msg, AssistantDelta::ToolCallDelta { index, delta });
                }
            }
            ProviderEvent::ToolCallEnd { id } => {
                if let Some(at) = self.calls.iter().position(|c| c.0 == id) {
                    let call = self.calls.remove(at);
                    self.finish_call(inner, msg, call);
                }
            }
            ProviderEvent::Usage(u) => msg.usage = u,
            ProviderEvent::Done { stop } => {
                self.close(inner, msg);
                msg.stop_reason = stop;
                return true;
            }
            ProviderEvent::Error {
                kind,
                message,
                retry_after_ms,
            } => {
                self.close(inner, msg);
                msg.stop_reason = StopReason::Error;
                msg.error_message = Some(message);
                self.error_kind = Some(kind);
                self.retry_after_ms = retry_after_ms;
                return true;
            }
        }
        false
    }

    fn delta(&self, inner: &Inner, msg: &AssistantMessage, delta: AssistantDelta) {
        inner.bus.publish(EventPayload::MessageDelta {
            usage: msg.usage.clone(),
            delta,
        });
    }

    /// Makes sure a block of `kind` is open and returns its index.
    fn ensure(&mut self, inner: &Inner, msg: &mut AssistantMessage, kind: Open) -> usize {
        self.saw_output = true;
        if let Some((open, index)) = self.open {
            if open == kind {
                return index;
            }
        }
        self.close_block(inner, msg);
        msg.content.push(match kind {
            Open::Thinking => Content::Thinking {
                thinking: String::new(),
                signature: None,
            },
            Open::Text => Content::text(""),
        });
        let index = msg.content.len() - 1;
        self.open = Some((kind, index));
        let d = match kind {
            Open::Thinking => AssistantDelta::ThinkingStarted { index },
            Open::Text => AssistantDelta::TextStarted { index },
        };
        self.delta(inner, msg, d);
        index
    }

    /// Closes everything still open: the text or thinking block, then the tool calls in
    /// content order.
    pub(super) fn close(&mut self, inner: &Inner, msg: &mut AssistantMessage) {
        self.close_block(inner, msg);
        for call in std::mem::take(&mut self.calls) {
            self.finish_call(inner, msg, call);
        }
    }

    /// Closes the open text or thinking block, publishing its `*_end` with the final content.
    fn close_block(&mut self, inner: &Inner, msg: &mut AssistantMessage) {
        let Some((open, index)) = self.open.take() else {
            return;
        };
        let d = match (open, msg.content.get(index)) {
            (Open::Text, Some(Content::Text { text })) => AssistantDelta::TextFinished {
                index,
                text: text.clone(),
            },
            (Open::Thinking, Some(Content::Thinking { thinking, .. })) => {
                AssistantDelta::ThinkingFinished {
                    index,
                    thinking: thinking.clone(),
                }
            }
            _ => return,
        };
        self.delta(inner, msg, d);
    }

    /// Parses a call's arguments into its content block and publishes `toolcall_end`.
    fn finish_call(
        &mut self,
        inner: &Inner,
        msg: &mut AssistantMessage,
        (_, index, args): (String, usize, String),
    ) {
        if let Some(Content::ToolCall {
            id,
            name,
            arguments,
        }) = msg.content.get_mut(index)
        {
            *arguments = tool::args::parse(&args);
            let d = AssistantDelta::ToolCallFinished {
                index,
                id: id.clone(),
                name: name.clone(),
                arguments: arguments.clone(),
            };
            self.delta(inner, msg, d);
        }
    }
}
