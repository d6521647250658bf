//! Markdown for the HTML export: assistant text through pulldown-cmark (headings, lists,
//! tables, links, emphasis, task lists, strikethrough), fenced code highlighted by
//! `crate::text::highlight` as CSS-classed spans. Raw HTML in the text is shown as text, link
//! targets other than http(s), mailto and relative ones are dropped (the text stays), and
//! images become links (the page loads nothing).

use std::fmt::Write as _;

use pulldown_cmark::{CodeBlockKind, CowStr, Event, LinkType, Options, Parser, Tag, TagEnd};

use super::escape;
use crate::text::highlight::{self, Class};

/// Appends `text` rendered as markdown.
pub fn render(out: &mut String, text: &str) {
    let options = Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_GFM;
    let mut events: Vec<Event<'_>> = Vec::new();
    // Whether each open link was kept (an unsafe target drops the tag, not the text).
    let mut links: Vec<bool> = Vec::new();
    let mut code: Option<(String, String)> = None;
    for event in Parser::new_ext(text, options) {
        if let Some((info, body)) = &mut code {
            match event {
                Event::Text(t) => body.push_str(&t),
                Event::End(TagEnd::CodeBlock) => {
                    events.push(Event::Html(code_block(info, body).into()));
                    code = None;
                }
                _ => {}
            }
            continue;
        }
        match event {
            Event::Start(Tag::CodeBlock(kind)) => {
                let info = match kind {
                    CodeBlockKind::Fenced(info) => info.to_string(),
                    CodeBlockKind::Indented => String::new(),
                };
                code = Some((info, String::new()));
            }
            Event::Html(raw) | Event::InlineHtml(raw) => events.push(Event::Text(raw)),
            Event::Start(Tag::Link {
                link_type,
                dest_url,
                title,
                id,
            }) => {
                let keep = safe_url(&dest_url);
                links.push(keep);
                if keep {
                    events.push(Event::Start(Tag::Link {
                        link_type,
                        dest_url,
                        title,
                        id,
                    }));
                }
            }
            Event::End(TagEnd::Link) | Event::End(TagEnd::Image) => {
                if links.pop().unwrap_or(false) {
                    events.push(Event::End(TagEnd::Link));
                }
            }
            Event::Start(Tag::Image {
                dest_url, title, ..
            }) => {
                let keep = safe_url(&dest_url);
                links.push(keep);
                if keep {
                    events.push(Event::Start(Tag::Link {
                        link_type: LinkType::Inline,
                        dest_url,
                        title,
                        id: CowStr::Borrowed(""),
                    }));
                }
            }
            other => events.push(other),
        }
    }
    // An unclosed fence (the text ended inside it) still shows its code.
    if let Some((info, body)) = code {
        events.push(Event::Html(code_block(&info, &body).into()));
    }
    out.push_str("<div class=\"md\">");
    pulldown_cmark::html::push_html(out, events.into_iter());
    out.push_str("</div>");
}

/// Link targets the page may point at: web and mail links, and relative ones.
fn safe_url(url: &str) -> bool {
    let lower = url.trim().to_ascii_lowercase();
    match lower.split_once(':') {
        Some((scheme, _)) if !scheme.contains(['/', '?', '#']) => {
            matches!(scheme, "http" | "https" | "mailto")
        }
        _ => true,
    }
}

/// A code block: highlighted when its language has a grammar, escaped text otherwise.
pub fn code_block(info: &str, body: &str) -> String {
    let lang = info.split_whitespace().next().unwrap_or("");
    let mut out = String::with_capacity(body.len() * 2);
    let _ = write!(out, "<pre class=\"code\"");
    if !lang.is_empty() {
        let _ = write!(out, " data-lang=\"{}\"", escape(lang));
    }
    out.push_str("><code>");
    match highlight::highlight(info, body) {
        Some(lines) => {
            for runs in lines {
                for (class, text) in runs {
                    span(&mut out, class, &text);
                }
                out.push('\n');
            }
        }
        None => out.push_str(&escape(body)),
    }
    out.push_str("</code></pre>");
    out
}

/// One highlighted run.
fn span(out: &mut String, class: Class, text: &str) {
    match class.css() {
        "" => out.push_str(&escape(text)),
        css => {
            let _ = write!(out, "<span class=\"{css}\">{}</span>", escape(text));
        }
    }
}
