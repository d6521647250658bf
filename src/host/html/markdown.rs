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
    let mut filter = Filter::default();
    for event in Parser::new_ext(text, options) {
        filter.event(event);
    }
    // An unclosed fence (the text ended inside it) still shows its code.
    if let Some((info, body)) = filter.code.take() {
        filter
            .events
            .push(Event::Html(code_block(&info, &body).into()));
    }
    out.push_str("<div class=\"md\">");
    pulldown_cmark::html::push_html(out, filter.events.into_iter());
    out.push_str("</div>");
}

/// The parser's events made safe and highlighted, ready for pulldown-cmark's HTML writer.
#[derive(Default)]
struct Filter<'a> {
    events: Vec<Event<'a>>,
    /// Whether each open link or image was kept (an unsafe target drops the tag, not the text).
    links: Vec<bool>,
    /// The fenced block being read: its info string and text.
    code: Option<(String, String)>,
}

impl<'a> Filter<'a> {
    fn event(&mut self, event: Event<'a>) {
        if let Some((info, body)) = &mut self.code {
            match event {
                Event::Text(t) => body.push_str(&t),
                Event::End(TagEnd::CodeBlock) => {
                    let html = code_block(info, body);
                    self.events.push(Event::Html(html.into()));
                    self.code = None;
                }
                _ => {}
            }
            return;
        }
        match event {
            Event::Start(Tag::CodeBlock(kind)) => {
                let info = match kind {
                    CodeBlockKind::Fenced(info) => info.to_string(),
                    CodeBlockKind::Indented => String::new(),
                };
                self.code = Some((info, String::new()));
            }
            Event::Html(raw) | Event::InlineHtml(raw) => self.events.push(Event::Text(raw)),
            Event::Start(Tag::Link {
                link_type,
                dest_url,
                title,
                id,
            }) => self.open_link(link_type, dest_url, title, id),
            // An image becomes a link to it: the page loads nothing.
            Event::Start(Tag::Image {
                dest_url, title, ..
            }) => self.open_link(LinkType::Inline, dest_url, title, CowStr::Borrowed("")),
            Event::End(TagEnd::Link) | Event::End(TagEnd::Image) => {
                if self.links.pop().unwrap_or(false) {
                    self.events.push(Event::End(TagEnd::Link));
                }
            }
            other => self.events.push(other),
        }
    }

    fn open_link(
        &mut self,
        link_type: LinkType,
        dest_url: CowStr<'a>,
        title: CowStr<'a>,
        id: CowStr<'a>,
    ) {
        let keep = safe_url(&dest_url);
        self.links.push(keep);
        if keep {
            self.events.push(Event::Start(Tag::Link {
                link_type,
                dest_url,
                title,
                id,
            }));
        }
    }
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
