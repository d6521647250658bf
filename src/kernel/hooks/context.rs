//! The user message that carries hooks' `additionalContext` to the model (after a prompt, or a
//! subagent's first one), made and recognised in one place: the kernel wraps the texts, and a
//! front end that shows a conversation (the TUI, live or resumed) recognises the wrapped
//! message and shows it as hook context, not as something the user typed. Pure text.

const OPEN: &str = "<hook-context>\n";
const CLOSE: &str = "\n</hook-context>";

/// The message text for `context`, one text a line.
pub fn message(context: &[String]) -> String {
    format!("{OPEN}{}{CLOSE}", context.join("\n"))
}

/// The context a message made by [`message`] carries; `None` for any other text.
pub fn parse(text: &str) -> Option<&str> {
    text.strip_prefix(OPEN)?.strip_suffix(CLOSE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wrapped_context_reads_back_and_other_text_does_not() {
        let texts = ["project uses pnpm".to_string(), "CI is red".to_string()];
        assert_eq!(
            parse(&message(&texts)),
            Some("project uses pnpm\nCI is red")
        );
        assert_eq!(parse("<hook-context> typed by hand"), None);
        assert_eq!(parse("fix the build"), None);
    }
}
