//! The terminal modes the TUI changes, and putting them back: raw mode and bracketed paste on
//! entry; raw mode off, bracketed paste off, attributes reset and the cursor shown on exit,
//! whether the TUI ends normally, by a signal or by a panic. Only this file changes modes.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use crossterm::event::{DisableBracketedPaste, EnableBracketedPaste};
use crossterm::style::{Attribute, SetAttribute};
use crossterm::{cursor, execute, terminal};

use crate::output::TerminalOut;

/// Whether the terminal is in the TUI's modes (so a panic hook knows to restore it).
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Holds the terminal in the TUI's modes; dropping it restores them.
pub struct Tty {
    _private: (),
}

impl Tty {
    /// Enters raw mode with bracketed paste.
    pub fn enter() -> io::Result<Tty> {
        terminal::enable_raw_mode()?;
        ACTIVE.store(true, Ordering::SeqCst);
        // The TUI applies NO_COLOR itself (colours off, bold, dim and reverse kept): crossterm's
        // own handling writes a colour change as `CSI m`, which also ends bold and dim.
        crossterm::style::force_color_output(true);
        let mut out = TerminalOut;
        if let Err(e) = execute!(out, EnableBracketedPaste) {
            restore();
            return Err(e);
        }
        Ok(Tty { _private: () })
    }
}

impl Drop for Tty {
    fn drop(&mut self) {
        restore();
    }
}

/// Puts the terminal back if the TUI changed it; safe to call more than once and from a
/// panic hook.
pub fn restore() {
    if !ACTIVE.swap(false, Ordering::SeqCst) {
        return;
    }
    let mut out = TerminalOut;
    let _ = execute!(
        out,
        DisableBracketedPaste,
        SetAttribute(Attribute::Reset),
        cursor::Show
    );
    let _ = out.flush();
    let _ = terminal::disable_raw_mode();
}
