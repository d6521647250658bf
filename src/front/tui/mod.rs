//! The interactive terminal front end: an inline viewport whose finished cells go to the
//! terminal's own scrollback and whose live area is redrawn differentially.

pub mod paint;
