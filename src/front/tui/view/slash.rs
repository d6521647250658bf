//! The `/` command menu under the editor: while the editor holds `/` and part of a name, every
//! command, prompt template and skill that matches (names starting with what was typed first, then
//! names containing it), in a scrolling window. Up/Down choose, Tab puts `/name ` in the
//! editor, Enter runs the chosen one, Esc closes it (until the text changes). Selection and
//! scrolling are the `@` menu's (`menu.rs`).

use crossterm::event::KeyEvent;
use ratatui::style::{Color, Style};
use ratatui::text::Line;

use super::menu::{self, MenuKey};
use super::{Action, View};
use crate::front::tui::picker::rows::Choice;

/// The menu's state: open or not, and the text whose menu Esc closed.
#[derive(Debug, Default)]
pub struct Slash {
    pub menu: Option<SlashMenu>,
    dismissed: Option<String>,
}

/// An open `/` menu.
#[derive(Debug, Clone, PartialEq)]
pub struct SlashMenu {
    /// What follows the `/`.
    pub query: String,
    /// Every command and template (name, description), commands first.
    pub entries: Vec<(String, String)>,
    pub choice: Choice,
}

impl SlashMenu {
    /// The highlighted command's name.
    pub fn chosen(&self) -> Option<&str> {
        let i = self.choice.chosen()?;
        self.entries.get(i).map(|(n, _)| n.as_str())
    }

    /// The names shown, in order.
    pub fn names(&self) -> Vec<&str> {
        let names = self.choice.matches.iter();
        names.map(|&i| self.entries[i].0.as_str()).collect()
    }
}

/// The entries matching `query`: names that start with it, then names that contain it.
fn matching(entries: &[(String, String)], query: &str) -> Vec<usize> {
    let q = query.to_lowercase();
    let (mut starts, mut inside) = (Vec::new(), Vec::new());
    for (i, (name, _)) in entries.iter().enumerate() {
        let name = name.to_lowercase();
        if name.starts_with(&q) {
            starts.push(i);
        } else if name.contains(&q) {
            inside.push(i);
        }
    }
    starts.extend(inside);
    starts
}

impl View {
    /// The session's templates and skills arrived (or changed): an open menu shows them.
    pub fn set_templates(&mut self, list: Vec<(String, String)>) {
        self.templates = list;
        if let Some(menu) = self.slash.menu.take() {
            // Rebuilt for the same text, with the same row chosen when it is still there.
            let chosen = menu.chosen().map(str::to_string);
            self.refresh_slash();
            if let (Some(name), Some(m)) = (chosen, self.slash.menu.as_mut()) {
                let entries = &m.entries;
                let at = m.choice.matches.iter().position(|&i| entries[i].0 == name);
                if let Some(at) = at {
                    m.choice.selected = at;
                }
            }
        } else {
            self.refresh_slash();
        }
    }

    /// The templates and skills the menu offers: a skill listed as `/NAME` is not offered
    /// again as `/skill:NAME` (which still runs when typed).
    pub(super) fn shown_templates(&self) -> impl Iterator<Item = &(String, String)> {
        let listed = |n: &str| self.templates.iter().any(|(t, _)| t == n);
        self.templates
            .iter()
            .filter(move |(n, _)| !n.strip_prefix("skill:").is_some_and(listed))
    }

    /// Opens, updates or closes the menu for the editor's text.
    pub(super) fn refresh_slash(&mut self) {
        let text = self.composer.text();
        let query = match text.strip_prefix('/') {
            Some(q) if !q.contains(char::is_whitespace) => q.to_string(),
            _ => {
                self.slash = Slash::default();
                return;
            }
        };
        if self.slash.dismissed.as_deref() == Some(query.as_str()) {
            return;
        }
        self.slash.dismissed = None;
        if self.slash.menu.as_ref().is_some_and(|m| m.query == query) {
            return;
        }
        let entries: Vec<(String, String)> = super::commands(self.attached)
            .iter()
            .map(|(c, d)| (c.to_string(), d.to_string()))
            .chain(self.shown_templates().cloned())
            .collect();
        let found = matching(&entries, &query);
        self.slash.menu = (!found.is_empty()).then(|| {
            let mut choice = Choice::default();
            choice.set_matches(found);
            SlashMenu {
                query,
                entries,
                choice,
            }
        });
    }

    /// A key for the open menu: `None` when the menu does not take it.
    pub(super) fn slash_key(&mut self, key: KeyEvent) -> Option<Option<Action>> {
        let menu = self.slash.menu.as_mut()?;
        let name = |i: usize| menu.entries[i].0.clone();
        match menu::key(&mut menu.choice, &key) {
            MenuKey::Pass => None,
            MenuKey::Moved => Some(None),
            MenuKey::Close => {
                self.slash.dismissed = Some(menu.query.clone());
                self.slash.menu = None;
                Some(None)
            }
            MenuKey::Complete(i) => {
                let name = name(i);
                self.composer.set_text(&format!("/{name} "));
                self.slash = Slash::default();
                Some(None)
            }
            MenuKey::Enter(i) => {
                let name = name(i);
                self.composer.set_text(&format!("/{name}"));
                self.slash = Slash::default();
                let action = self.submit(false);
                self.refresh_slash();
                Some(action)
            }
        }
    }
}

/// A template's or skill's text in the menu: its `argument-hint`, its description and where
/// it came from (`<name> [size]  Make a component  (claude project:frontend)`).
pub fn entry_text(c: &crate::wire::pi::data::CommandInfo) -> String {
    let mut text = String::new();
    if let Some(hint) = c.argument_hint.as_deref().filter(|h| !h.is_empty()) {
        text.push_str(hint);
        text.push_str("  ");
    }
    text.push_str(&c.description);
    if !c.description.is_empty() {
        text.push_str("  ");
    }
    text.push_str(&format!("({})", c.origin()));
    text
}

/// The menu's rows: `/name  description`, the chosen one highlighted.
pub(super) fn rows(menu: &SlashMenu, w: usize) -> Vec<Line<'static>> {
    let help = "↑↓ choose · Tab complete · Enter run · Esc close";
    let cyan = Style::default().fg(Color::Cyan);
    let width = menu.entries.iter().map(|(n, _)| crate::text::width(n) + 1);
    let width = width.max().unwrap_or(0).clamp(11, 24);
    menu::rows(&menu.choice, w, help, |i, selected| {
        let (name, desc) = &menu.entries[i];
        menu::labelled(&format!("/{name}"), width, desc, cyan, selected)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::pi::data::{CommandInfo, SourceInfo};

    #[test]
    fn a_skill_listed_by_its_name_is_not_offered_again_with_its_prefix() {
        let mut view = View::new();
        let entry = |n: &str| (n.to_string(), format!("{n} (skill)"));
        view.set_templates(vec![
            entry("lint"),
            entry("skill:lint"),
            entry("skill:deploy"),
        ]);
        let menu = |view: &mut View, text: &str| {
            view.composer.set_text(text);
            view.refresh_slash();
            let menu = view.slash.menu.as_ref().expect("the / menu is open");
            menu.names()
                .into_iter()
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        assert_eq!(menu(&mut view, "/lin"), ["lint"]);
        assert_eq!(menu(&mut view, "/skill:"), ["skill:deploy"]);
    }

    #[test]
    fn an_entry_shows_its_hint_description_and_origin() {
        let info = |source: &str, path: &str, base: &str, hint: Option<&str>| CommandInfo {
            name: "component".into(),
            description: "Make a component".into(),
            source: "prompt".into(),
            source_info: SourceInfo {
                path: path.into(),
                source: source.into(),
                scope: "project".into(),
                origin: "top-level".into(),
                base_dir: Some(base.into()),
            },
            argument_hint: hint.map(str::to_string),
        };
        let claude = info(
            "claude",
            "/p/.claude/commands/frontend/component.md",
            "/p/.claude/commands",
            Some("<name> [size]"),
        );
        assert_eq!(
            entry_text(&claude),
            "<name> [size]  Make a component  (claude project:frontend)"
        );
        let keel = info("local", "/p/.keel/prompts/c.md", "/p/.keel/prompts", None);
        assert_eq!(entry_text(&keel), "Make a component  (keel project)");
    }
}
