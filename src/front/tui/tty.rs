//! The terminal modes the TUI changes, and putting them back: raw mode, bracketed paste, focus
//! reporting and
//! (where the terminal says it supports it) the kitty keyboard protocol's disambiguated keys
//! on entry; all of them off, attributes reset and the cursor shown on exit, whether the TUI
//! ends normally, by a signal, by a panic or for a while by Ctrl+Z. Only this file changes
//! modes.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use crossterm::event::{
    DisableBracketedPaste, DisableFocusChange, EnableBracketedPaste, EnableFocusChange,
    KeyboardEnhancementFlags, PopKeyboardEnhancementFlags, PushKeyboardEnhancementFlags,
};
use crossterm::style::{Attribute, SetAttribute};
use crossterm::{cursor, execute, terminal};

use crate::output::TerminalOut;

/// Whether the terminal is in the TUI's modes (so a panic hook knows to restore it).
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// Whether keyboard enhancement flags were pushed (and must be popped).
static KITTY: AtomicBool = AtomicBool::new(false);
/// Whether the alternate screen (the transcript pager) is shown (and must be left).
static ALTERNATE: AtomicBool = AtomicBool::new(false);

/// Shows the alternate screen (`on`) or the normal one again, where the inline view was left
/// as it was.
pub fn alternate_screen(on: bool) -> io::Result<()> {
    let mut out = TerminalOut;
    match (on, ALTERNATE.swap(on, Ordering::SeqCst)) {
        (true, false) => execute!(out, terminal::EnterAlternateScreen),
        (false, true) => execute!(out, terminal::LeaveAlternateScreen),
        _ => Ok(()),
    }
}

/// Holds the terminal in the TUI's modes; dropping it restores them.
pub struct Tty {
    _private: (),
}

impl Tty {
    /// Enters raw mode with bracketed paste, and asks for disambiguated keys (Shift+Enter
    /// told from Enter) where the terminal answers that it supports the kitty keyboard
    /// protocol (report-event types are not asked for: release events are not used).
    pub fn enter() -> io::Result<Tty> {
        enter_modes()?;
        Ok(Tty { _private: () })
    }

    /// Raw mode only (`keel attach --job`: every key goes to the job as its bytes, nothing
    /// asked of the terminal that would change them).
    pub fn raw() -> io::Result<Tty> {
        terminal::enable_raw_mode()?;
        ACTIVE.store(true, Ordering::SeqCst);
        Ok(Tty { _private: () })
    }
}

impl Drop for Tty {
    fn drop(&mut self) {
        restore();
    }
}

fn enter_modes() -> io::Result<()> {
    terminal::enable_raw_mode()?;
    ACTIVE.store(true, Ordering::SeqCst);
    // The TUI applies NO_COLOR itself (colours off, bold, dim and reverse kept): crossterm's
    // own handling writes a colour change as `CSI m`, which also ends bold and dim.
    crossterm::style::force_color_output(true);
    let mut out = TerminalOut;
    // Focus reporting (`CSI ?1004h`): a run that ends while the window is not focused
    // notifies (`notify.rs`).
    if let Err(e) = execute!(out, EnableBracketedPaste, EnableFocusChange) {
        restore();
        return Err(e);
    }
    if matches!(terminal::supports_keyboard_enhancement(), Ok(true)) {
        let flags = KeyboardEnhancementFlags::DISAMBIGUATE_ESCAPE_CODES;
        if execute!(out, PushKeyboardEnhancementFlags(flags)).is_ok() {
            KITTY.store(true, Ordering::SeqCst);
        }
    }
    Ok(())
}

/// Puts the terminal back if the TUI changed it; safe to call more than once and from a
/// panic hook.
pub fn restore() {
    if !ACTIVE.swap(false, Ordering::SeqCst) {
        return;
    }
    let mut out = TerminalOut;
    if ALTERNATE.swap(false, Ordering::SeqCst) {
        let _ = execute!(out, terminal::LeaveAlternateScreen);
    }
    if KITTY.swap(false, Ordering::SeqCst) {
        let _ = execute!(out, PopKeyboardEnhancementFlags);
    }
    let _ = execute!(
        out,
        DisableBracketedPaste,
        DisableFocusChange,
        SetAttribute(Attribute::Reset),
        cursor::Show
    );
    let _ = out.flush();
    let _ = terminal::disable_raw_mode();
}

/// Writes a notification's bytes (the bell, an OSC 9 or 777 sequence: `notify.rs`), which
/// move nothing on the screen.
pub fn notify(bytes: &[u8]) {
    let mut out = TerminalOut;
    if let Err(e) = out.write_all(bytes).and_then(|()| out.flush()) {
        tracing::warn!("cannot notify: {e}");
    }
}

/// Ctrl+Z: puts the terminal back, stops this process with SIGTSTP (what the shell's job
/// control expects) and, once it is continued (`fg`), takes the terminal again. A process
/// group the kernel will not stop (no job control) just goes on.
pub fn suspend() -> io::Result<()> {
    let active = ACTIVE.load(Ordering::SeqCst);
    restore();
    nix::sys::signal::raise(nix::sys::signal::Signal::SIGTSTP).map_err(io::Error::from)?;
    if active {
        enter_modes()?;
    }
    Ok(())
}
