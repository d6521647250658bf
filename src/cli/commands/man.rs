//! `keel man`: keel's man page, rendered by `clap_mangen` from the command line's own
//! definitions, on stdout (`keel man > keel.1; man -l keel.1`). `docs/keel.1` is this output,
//! kept equal by a test. No environment is read: it works before any set-up.

use super::print;
use crate::exit::Exit;
use crate::output::{ColorChoice, Output};

/// `keel man`.
pub fn run() -> Exit {
    let mut out = Output::stdio(ColorChoice::Never);
    match page() {
        Ok(text) => print(&mut out, &text).unwrap_or(Exit::Internal),
        Err(e) => {
            out.err(&format!("Error: cannot render the man page: {e}\n"));
            Exit::Internal
        }
    }
}

/// The man page (roff) of `keel` with every subcommand in it: one page, so that it names no
/// page that is not shipped (clap_mangen's own list points at a `keel-daemon(1)` and so on).
/// Each (visible) subcommand, depth first, gets a `COMMANDS` subsection: its synopsis, what it
/// does and its options.
pub fn page() -> std::io::Result<String> {
    use clap::CommandFactory;
    let mut root = crate::cli::Keel::command().disable_help_subcommand(true);
    root.build();
    let man = clap_mangen::Man::new(root.clone());
    let mut buf = Vec::new();
    man.render_title(&mut buf)?;
    man.render_name_section(&mut buf)?;
    man.render_synopsis_section(&mut buf)?;
    man.render_description_section(&mut buf)?;
    man.render_options_section(&mut buf)?;
    buf.extend_from_slice(b".SH COMMANDS\n");
    subcommands(&root, &mut buf)?;
    man.render_version_section(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// The subsections of `cmd`'s visible subcommands and theirs, depth first.
fn subcommands(cmd: &clap::Command, buf: &mut Vec<u8>) -> std::io::Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = sub.get_bin_name().unwrap_or(sub.get_name()).to_string();
        buf.extend_from_slice(format!(".SS \"{}\"\n", name.replace('-', "\\-")).as_bytes());
        let man = clap_mangen::Man::new(sub.clone());
        let mut part = Vec::new();
        man.render_synopsis_section(&mut part)?;
        man.render_description_section(&mut part)?;
        if sub.get_arguments().any(|a| !a.is_hide_set()) {
            man.render_options_section(&mut part)?;
        }
        // Their own `.SH` headings would end the COMMANDS section: plain paragraphs instead.
        for line in String::from_utf8_lossy(&part).lines() {
            match line.strip_prefix(".SH ") {
                Some("SYNOPSIS") | Some("DESCRIPTION") => buf.extend_from_slice(b".PP\n"),
                Some(heading) => buf.extend_from_slice(
                    format!(
                        ".PP\n\\fI{}\\fR\n",
                        heading.trim_matches('"').to_lowercase()
                    )
                    .as_bytes(),
                ),
                None => buf.extend_from_slice(format!("{line}\n").as_bytes()),
            }
        }
        subcommands(sub, buf)?;
    }
    Ok(())
}
