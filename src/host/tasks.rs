//! Commands that run in the background (`compact`, `bash`) and hand their response back to
//! the loop, so the events they cause are written first.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use serde_json::Value;
use tokio::sync::mpsc;

use super::{CommandError, Data, Host, Internal, Reply};
use crate::kernel::abort::AbortController;
use crate::wire::pi::data::BashData;
use crate::wire::pi::CommandName;
use crate::wire::rpc::{self, Request};

impl Host {
    pub(super) fn compact(&mut self, req: Request, instructions: Option<String>) {
        let task = self.spawn_task(None);
        let session = self.live.session.clone();
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let result = match session.compact(instructions).await {
                Ok(result) => Ok(Data::Json(
                    serde_json::to_value(&result).unwrap_or(Value::Null),
                )),
                Err(e) => Err(CommandError::from(e)),
            };
            let reply = Reply {
                id: req.id.clone(),
                command: CommandName::Compact.as_str().into(),
                result,
            };
            let _ = tx.send(Internal::Reply(reply));
            let _ = tx.send(Internal::Done(task));
        });
    }

    pub(super) fn bash(&mut self, req: &Request, command: String, exclude: bool) {
        let (controller, signal) = AbortController::new();
        let task = self.spawn_task(Some(controller));
        let session = self.live.session.clone();
        let tx = self.tx.clone();
        let id = req.id.clone();
        tokio::spawn(async move {
            let (ctx, mut crx) = mpsc::unbounded_channel::<Vec<u8>>();
            let run = session.bash(&command, exclude, ctx, signal);
            tokio::pin!(run);
            // Output chunks become `bash_execution_update` deltas, split only between
            // whole characters.
            let mut carry = Vec::new();
            let mut forward = |chunk: &[u8]| {
                let delta = utf8_chunk(&mut carry, chunk);
                if !delta.is_empty() {
                    let line = rpc::bash_update_line(id.as_ref(), &delta);
                    let _ = tx.send(Internal::Publish(line));
                }
            };
            let record = loop {
                tokio::select! {
                    record = &mut run => break record,
                    Some(chunk) = crx.recv() => forward(&chunk),
                }
            };
            while let Ok(chunk) = crx.try_recv() {
                forward(&chunk);
            }
            // An incomplete character at the very end is shown as U+FFFD.
            if !carry.is_empty() {
                let rest = String::from_utf8_lossy(&carry).into_owned();
                let _ = tx.send(Internal::Publish(rpc::bash_update_line(id.as_ref(), &rest)));
            }
            let data = BashData {
                output: record.output,
                exit_code: record.exit_code,
                cancelled: record.cancelled,
                truncated: record.truncated,
                full_output_path: record.full_output_path,
            };
            let reply = Reply {
                id,
                command: CommandName::Bash.as_str().into(),
                result: Ok(Data::Json(
                    serde_json::to_value(&data).unwrap_or(Value::Null),
                )),
            };
            let _ = tx.send(Internal::Reply(reply));
            let _ = tx.send(Internal::Done(task));
        });
    }
}

/// Decodes a chunk of command output, keeping an incomplete UTF-8 sequence at its end for
/// the next chunk (invalid bytes become U+FFFD).
fn utf8_chunk(carry: &mut Vec<u8>, chunk: &[u8]) -> String {
    carry.extend_from_slice(chunk);
    let mut out = String::new();
    let mut rest: &[u8] = carry;
    loop {
        match std::str::from_utf8(rest) {
            Ok(s) => {
                out.push_str(s);
                rest = &[];
                break;
            }
            Err(e) => {
                let (good, bad) = rest.split_at(e.valid_up_to());
                out.push_str(std::str::from_utf8(good).unwrap_or_default());
                match e.error_len() {
                    Some(n) => {
                        out.push('\u{FFFD}');
                        rest = &bad[n..];
                    }
                    None => {
                        rest = bad; // incomplete: wait for more bytes
                        break;
                    }
                }
            }
        }
    }
    let kept = rest.to_vec();
    *carry = kept;
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn utf8_chunks_split_inside_characters() {
        let text = "añ日🎉b";
        let bytes = text.as_bytes();
        for cut in 0..=bytes.len() {
            let mut carry = Vec::new();
            let mut out = utf8_chunk(&mut carry, &bytes[..cut]);
            out.push_str(&utf8_chunk(&mut carry, &bytes[cut..]));
            assert_eq!(out, text, "cut at {cut}");
            assert!(carry.is_empty());
        }
        let mut carry = Vec::new();
        assert_eq!(utf8_chunk(&mut carry, b"a\xffb"), "a\u{FFFD}b");
    }
}
