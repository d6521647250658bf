//! HTML transcript export (the RPC command `export_html`, `keel --export`, `/export`): turns a
//! session header and the entries of its active branch into one self-contained HTML5 page.
//! Styling is inline CSS (light and dark via `prefers-color-scheme`); there are no scripts and no
//! external resources. Every string taken from the session is escaped, and the output depends
//! only on the input (no clock, no randomness). `markdown` renders assistant text, `tool` tool
//! calls.

use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

pub mod markdown;
mod tool;
mod view;

/// Outputs with more lines than this are folded into a collapsed `<details>`.
const FOLD_LINES: usize = 200;
/// Image types that may be inlined as `data:` URLs.
const INLINE_IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// The page's one stylesheet (light, and dark by `prefers-color-scheme`).
const STYLE: &str = include_str!("style.css");

/// Escapes text for HTML element content and quoted attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// Renders a session as one self-contained HTML page (inline CSS, no scripts needed, no external
/// resources).
/// `header`: the session header JSON object, e.g. `{"type":"session","version":3,"id":"…",
/// "timestamp":"2026-11-30T02:39:46.717Z","cwd":"/abs/proj","parentSession"?:"…"}`.
/// `entries`: the session entries on the active branch, in order, as JSON objects (pi v3 session
/// lines: `message`, `model_change`, `thinking_level_change`, `compaction`, `session_info`,
/// `branch_summary`; anything else is shown as a muted marker or skipped).
/// `title`: the session name if set, else None.
pub fn render(header: &Value, entries: &[Value], title: Option<&str>) -> String {
    let header: view::Header = view::read(header);
    let id = &header.id;
    let title = match title.map(str::trim) {
        Some(name) if !name.is_empty() => name.to_string(),
        _ => format!("keel session {id}"),
    };
    let mut page = String::with_capacity(8192);
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{t}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<header>\n<h1>{t}</h1>\n\
         <dl class=\"meta\"><dt>session</dt><dd class=\"mono\">{id}</dd>\
         <dt>cwd</dt><dd class=\"mono\">{cwd}</dd><dt>started</dt><dd>{ts}</dd>",
        t = escape(&title),
        id = escape(id),
        cwd = escape(&header.cwd),
        ts = escape(&header.timestamp),
    );
    if let Some(parent) = &header.parent_session {
        let _ = write!(
            page,
            "<dt>forked from</dt><dd class=\"mono\">{}</dd>",
            escape(parent)
        );
    }
    page.push_str("</dl>\n</header>\n<main>\n");

    let entries: Vec<Read> = entries.iter().map(Read::of).collect();
    let mut ctx = Context::new(&entries);
    for (index, entry) in entries.iter().enumerate() {
        ctx.entry(&mut page, index, entry);
    }

    let t = &ctx.totals;
    let _ = write!(
        page,
        "</main>\n<footer class=\"muted\">{} user · {} assistant · {} tool results · {} shell commands \
         · input {} tokens · output {} tokens · cost ${:.4}</footer>\n</body>\n</html>\n",
        t.user, t.assistant, t.tool_results, t.bash, t.input, t.output, t.cost
    );
    page
}

/// The page of a stored session: its header and the entries of its current branch.
/// The page's name when none is given: `keel-session-<session file name without .jsonl>.html`
/// (pi's), for `keel --export` and RPC `export_html` alike.
pub fn default_name(source: &std::path::Path) -> String {
    let name = source
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "session".into());
    let stem = name.strip_suffix(".jsonl").unwrap_or(&name);
    format!("keel-session-{stem}.html")
}

pub fn store_page(store: &crate::kernel::session::Store) -> String {
    let entries: Vec<Value> = store
        .branch()
        .into_iter()
        .filter_map(|e| e.to_json().ok())
        .collect();
    render(&store.header().to_json(), &entries, store.name())
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

#[derive(Default)]
struct Totals {
    user: usize,
    assistant: usize,
    tool_results: usize,
    bash: usize,
    input: u64,
    output: u64,
    cost: f64,
}

/// An entry as read, with its message (the empty view when it has none).
struct Read {
    entry: view::Entry,
    message: view::Message,
}

impl Read {
    fn of(entry: &Value) -> Read {
        let entry: view::Entry = view::read(entry);
        let message = view::read(&entry.message);
        Read { entry, message }
    }
}

/// Rendering state: tool results that are shown under their call instead of on their own.
struct Context<'a> {
    /// toolCallId → index of the first entry holding its result.
    results: HashMap<&'a str, usize>,
    entries: &'a [Read],
    /// Entry indexes already rendered next to their tool call.
    paired: HashSet<usize>,
    /// Index of the entry being rendered (only later results are pulled up to a call).
    current: usize,
    totals: Totals,
}

impl<'a> Context<'a> {
    fn new(entries: &'a [Read]) -> Self {
        let mut results = HashMap::new();
        for (index, read) in entries.iter().enumerate() {
            if read.entry.kind == "message" && read.message.role == "toolResult" {
                results
                    .entry(read.message.tool_call_id.as_str())
                    .or_insert(index);
            }
        }
        Context {
            results,
            entries,
            paired: HashSet::new(),
            current: 0,
            totals: Totals::default(),
        }
    }

    fn entry(&mut self, out: &mut String, index: usize, read: &Read) {
        self.current = index;
        let entry = &read.entry;
        match entry.kind.as_str() {
            "message" => self.message(out, index, read),
            "model_change" => muted(
                out,
                &format!("model: {}/{}", entry.provider, entry.model_id),
            ),
            "thinking_level_change" => {
                muted(out, &format!("thinking level: {}", entry.thinking_level))
            }
            "session_info" => muted(out, &format!("session name: {}", entry.name)),
            "compaction" => {
                let heading = format!(
                    "Earlier conversation summarised ({} tokens)",
                    entry.tokens_before
                );
                boxed(out, &heading, &entry.summary);
            }
            "branch_summary" => boxed(out, "Summary of another branch", &entry.summary),
            "" => {}
            other => muted(out, &format!("[{other}]")),
        }
    }

    fn message(&mut self, out: &mut String, index: usize, read: &Read) {
        if self.paired.contains(&index) {
            self.totals.tool_results += 1;
            return;
        }
        let message = &read.message;
        let stamp = escape(&read.entry.timestamp);
        match message.role.as_str() {
            "user" => {
                self.totals.user += 1;
                let _ = write!(
                    out,
                    "<section class=\"msg user\"><div class=\"role\" title=\"{stamp}\">user</div>"
                );
                self.content(out, message.content.as_ref(), false);
            }
            "assistant" => {
                self.totals.assistant += 1;
                let model = format!("{}/{}", message.provider, message.model);
                let _ = write!(
                    out,
                    "<section class=\"msg assistant\"><div class=\"role\" title=\"{stamp}\">assistant · {}</div>",
                    escape(&model)
                );
                self.content(out, message.content.as_ref(), true);
                self.assistant_footer(out, message);
            }
            "toolResult" => {
                self.totals.tool_results += 1;
                out.push_str("<section class=\"msg tool\">");
                self.result(out, message, false);
            }
            "bashExecution" => {
                self.totals.bash += 1;
                bash(out, message, &stamp);
            }
            other => {
                let _ = write!(
                    out,
                    "<section class=\"msg other\"><div class=\"role\">{}</div><pre>{}</pre>",
                    escape(if other.is_empty() { "message" } else { other }),
                    escape(&pretty(&read.entry.message))
                );
            }
        }
        out.push_str("</section>\n");
    }

    fn assistant_footer(&mut self, out: &mut String, message: &view::Message) {
        let (input, output) = (message.usage.input, message.usage.output);
        let cost = message.usage.cost.total.unwrap_or(0.0);
        self.totals.input += input;
        self.totals.output += output;
        self.totals.cost += cost;
        let stop = message.stop_reason.as_str();
        let mut line = format!("in {input} · out {output} · ${cost:.4}");
        if !matches!(stop, "" | "stop" | "toolUse") {
            let _ = write!(line, " · stopped: {stop}");
        }
        muted(out, &line);
        if let Some(error) = &message.error_message {
            let _ = write!(out, "<div class=\"text error\">{}</div>", escape(error));
        }
    }

    /// Content as a plain string or an array of typed blocks; text as markdown (an
    /// assistant's) or as it was typed (a user's).
    fn content(&mut self, out: &mut String, content: Option<&Value>, md: bool) {
        match content {
            Some(Value::String(text)) => prose(out, text, md),
            Some(Value::Array(blocks)) => {
                for block in blocks {
                    self.block(out, block, md);
                }
            }
            Some(other) if !other.is_null() => folded_pre(out, &pretty(other), ""),
            _ => {}
        }
    }

    fn block(&mut self, out: &mut String, raw: &Value, md: bool) {
        let block: view::Block = view::read(raw);
        match block.kind.as_str() {
            "text" => prose(out, &block.text, md),
            "thinking" => {
                out.push_str("<details class=\"thinking\"><summary>thinking</summary>");
                markdown::render(out, &block.thinking);
                out.push_str("</details>");
            }
            "image" => image(out, &block),
            "toolCall" => self.tool_call(out, &block),
            other => folded_pre(out, &pretty(raw), &format!("{other} block")),
        }
    }

    /// A tool call with its arguments as fields, and its result under it when one follows.
    fn tool_call(&mut self, out: &mut String, block: &view::Block) {
        let name = block.name.as_str();
        let found = self
            .results
            .get(block.id.as_str())
            .copied()
            .filter(|i| *i > self.current && !self.paired.contains(i));
        let result = found.and_then(|i| self.entries.get(i)).map(|r| &r.message);
        let _ = write!(
            out,
            "<div class=\"tool\"><div class=\"role\">tool call · <span class=\"mono\">{}</span></div>",
            escape(name)
        );
        let ok = result.is_some_and(|r| r.is_error != Some(true));
        let details = result.filter(|_| ok).and_then(|r| r.details.as_ref());
        tool::arguments(out, name, &block.arguments, details);
        if let (Some(index), Some(message)) = (found, result) {
            self.paired.insert(index);
            let brief = ok && details.is_some() && tool::result_repeats_call(name);
            self.result(out, message, brief);
        }
        out.push_str("</div>");
    }

    /// A tool result body (the caller opens and closes the surrounding element); `brief`
    /// keeps only the first paragraph of its text (the call above shows the rest).
    fn result(&mut self, out: &mut String, message: &view::Message, brief: bool) {
        let failed = message.is_error.unwrap_or(false);
        let _ = write!(
            out,
            "<div class=\"result{}\"><div class=\"role\">result · <span class=\"mono\">{}</span>{}</div>",
            if failed { " error" } else { "" },
            escape(&message.tool_name),
            if failed { " · error" } else { "" }
        );
        match &message.content {
            Some(Value::Array(blocks)) => {
                for raw in blocks {
                    let block: view::Block = view::read(raw);
                    match block.kind.as_str() {
                        "text" if brief => {
                            let text = block.text.as_str();
                            folded_pre(out, text.split("\n\n").next().unwrap_or(text), "output")
                        }
                        "text" => folded_pre(out, &block.text, "output"),
                        "image" => image(out, &block),
                        _ => folded_pre(out, &pretty(raw), "block"),
                    }
                }
            }
            Some(Value::String(text)) => folded_pre(out, text, "output"),
            _ => {}
        }
        out.push_str("</div>");
    }
}

fn bash(out: &mut String, message: &view::Message, stamp: &str) {
    let _ = write!(
        out,
        "<section class=\"msg bash\"><div class=\"role\" title=\"{stamp}\">shell</div><pre>$ {}</pre>",
        escape(&message.command)
    );
    folded_pre(out, &message.output, "output");
    let mut line = match message.exit_code {
        Some(code) => format!("exit code {code}"),
        None => "no exit code".to_string(),
    };
    for (set, label) in [
        (message.cancelled, "cancelled"),
        (message.truncated, "output truncated"),
        (message.exclude_from_context, "excluded from context"),
    ] {
        if set {
            let _ = write!(line, " · {label}");
        }
    }
    muted(out, &line);
}

fn muted(out: &mut String, text: &str) {
    let _ = writeln!(out, "<div class=\"muted\">{}</div>", escape(text));
}

fn boxed(out: &mut String, heading: &str, body: &str) {
    let _ = writeln!(
        out,
        "<section class=\"box\"><div class=\"role\">{}</div><div class=\"text\">{}</div></section>",
        escape(heading),
        escape(body)
    );
}

/// Message text: markdown (an assistant's), or the text as typed (a user's).
fn prose(out: &mut String, text: &str, md: bool) {
    if md {
        markdown::render(out, text);
    } else if !text.trim().is_empty() {
        let _ = write!(
            out,
            "<div class=\"text\">{}</div>",
            escape(text.trim_matches('\n'))
        );
    }
}

/// Preformatted text, folded into a collapsed `<details>` when it is long.
fn folded_pre(out: &mut String, text: &str, what: &str) {
    let lines = text.lines().count();
    if lines > FOLD_LINES {
        let _ = write!(
            out,
            "<details><summary>{lines} lines{}</summary><pre>{}</pre></details>",
            if what.is_empty() {
                String::new()
            } else {
                format!(" of {}", escape(what))
            },
            escape(text)
        );
    } else if !text.is_empty() {
        let _ = write!(out, "<pre>{}</pre>", escape(text));
    }
}

fn image(out: &mut String, block: &view::Block) {
    let (mime, data) = (block.mime_type.as_str(), block.data.as_str());
    if INLINE_IMAGE_TYPES.contains(&mime) && is_base64(data) {
        let _ = write!(out, "<img alt=\"image\" src=\"data:{mime};base64,{data}\">");
    } else {
        let _ = write!(
            out,
            "<div class=\"muted\">[image omitted: {}]</div>",
            escape(mime)
        );
    }
}

/// Non-empty, standard alphabet, and at most two `=` only at the end.
fn is_base64(data: &str) -> bool {
    let body = data.trim_end_matches('=');
    !body.is_empty()
        && data.len() - body.len() <= 2
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

#[cfg(test)]
mod tests;
