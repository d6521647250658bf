//! `@file` mentions among print and JSON modes' prompt arguments (pi's CLI semantics): which
//! arguments are mentions, where they point, and how each file becomes part of the first
//! message: a text file as a `<file name="…">` block, an image as an image block. It reads only
//! the files named, never writes, never prints, and never touches a session.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

use crate::error::StartupError;
use crate::kernel::message::Content;

const MIB: u64 = 1024 * 1024;

/// The largest text file a mention includes.
pub const MAX_TEXT_BYTES: u64 = MIB;
/// The largest image a mention includes (before base64, which adds a third).
pub const MAX_IMAGE_BYTES: u64 = 8 * MIB;
/// The most all mentioned files of one prompt may hold together, as read from disk: their
/// base64 form still fits one daemon or RPC line (16 MiB).
pub const MAX_TOTAL_BYTES: u64 = 10 * MIB;

/// Why a mention that names nothing cannot be included.
const NOT_FOUND: &str = "no such file";

/// Bytes enough to recognise every image type taken.
const SNIFF_BYTES: u64 = 12;

/// Why a mentioned file cannot be included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MentionErrorKind {
    /// `~` with no `HOME` to expand it from.
    NoHome,
    /// Nothing exists at the path.
    NotFound,
    /// The path is a directory.
    Directory,
    /// The path is neither a file nor a directory (a FIFO, a device, a socket).
    NotRegularFile,
    /// The file exists but cannot be opened or read (permission, I/O).
    Unreadable,
    /// The file is over its type's cap.
    TooLarge,
    /// The prompt's mentioned files together are over [`MAX_TOTAL_BYTES`].
    OverTotal,
    /// Neither UTF-8 text nor a known image.
    Binary,
}

/// A mention that cannot be included: its kind and the reason, as the user reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MentionError {
    pub kind: MentionErrorKind,
    pub message: String,
}

impl MentionError {
    fn new(kind: MentionErrorKind, message: impl Into<String>) -> Self {
        MentionError {
            kind,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for MentionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for MentionError {}

/// One prompt argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg<'a> {
    /// Plain prompt text.
    Word(&'a str),
    /// `@path`: the path as written, without the `@`.
    Mention(&'a str),
}

/// What an argument is: a whole argument `@path` is a mention; a lone `@`, `@` followed by a
/// space, and `@` anywhere but at the start (`foo@bar`) are text. A leading `\@` is a literal
/// `@` (the backslash is dropped).
pub fn classify(arg: &str) -> Arg<'_> {
    if arg.starts_with("\\@") {
        return Arg::Word(&arg[1..]);
    }
    match arg.strip_prefix('@') {
        Some(path) if path.chars().next().is_some_and(|c| !c.is_whitespace()) => Arg::Mention(path),
        _ => Arg::Word(arg),
    }
}

/// The prompt arguments with their mentions read.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Expanded {
    /// The files' blocks, in the order they were named.
    pub files: String,
    /// The images' blocks, in the same order.
    pub images: Vec<Content>,
    /// The other arguments, joined with spaces.
    pub words: String,
}

/// Reads every mention of `args` (resolved from `cwd`, `~` from `home`). A file that cannot be
/// included is a usage error naming it; empty files are skipped.
pub fn expand(args: &[String], cwd: &Path, home: Option<&Path>) -> Result<Expanded, StartupError> {
    let mut out = Expanded::default();
    let mut words = Vec::new();
    let mut total = 0u64;
    for arg in args {
        let path = match classify(arg) {
            Arg::Word(w) => {
                words.push(w);
                continue;
            }
            Arg::Mention(path) => path,
        };
        let fail = |abs: Option<&Path>, why: MentionError| {
            let named = match abs {
                Some(abs) if abs != Path::new(path) => format!("@{path} ({})", abs.display()),
                _ => format!("@{path}"),
            };
            let e = StartupError::usage(format!("cannot include {named}: {why}"));
            match why.kind == MentionErrorKind::NotFound {
                true => e.hint("to send a word starting with @ as text, write it as '\\@word'"),
                false => e,
            }
        };
        let abs = resolve(path, cwd, home).map_err(|why| fail(None, why))?;
        let bytes = read(&abs, MAX_TOTAL_BYTES - total).map_err(|why| fail(Some(&abs), why))?;
        total += bytes.len() as u64;
        match include(&abs, &bytes).map_err(|why| fail(Some(&abs), why))? {
            None => {}
            Some((block, image)) => {
                out.files.push_str(&block);
                out.images.extend(image);
            }
        }
    }
    out.words = words.join(" ");
    Ok(out)
}

/// The words of a message typed in the TUI: each `@path` (or `@"path with spaces"`) that
/// names an existing file is read as the CLI reads it; any other `@word` (a name, a path that
/// does not exist, a directory) stays plain text, as in a chat. Returns the message (the files'
/// blocks, then the text as typed) and the images. A file that exists but cannot be included
/// (too large, not text) is an error naming it.
pub fn expand_text(
    text: &str,
    cwd: &Path,
    home: Option<&Path>,
) -> Result<(String, Vec<Content>), MentionError> {
    let mut files = String::new();
    let mut images = Vec::new();
    let mut total = 0u64;
    for path in text_mentions(text) {
        let Ok(abs) = resolve(&path, cwd, home) else {
            continue;
        };
        if !std::fs::metadata(&abs).is_ok_and(|m| m.is_file()) {
            continue;
        }
        let fail = |why: MentionError| {
            MentionError::new(why.kind, format!("cannot include @{path}: {why}"))
        };
        let bytes = read(&abs, MAX_TOTAL_BYTES - total).map_err(fail)?;
        total += bytes.len() as u64;
        if let Some((block, image)) = include(&abs, &bytes).map_err(fail)? {
            files.push_str(&block);
            images.extend(image);
        }
    }
    Ok((compose("", &files, text), images))
}

/// The paths of the `@` words of `text`, in order, each once; a trailing `,.;:!?)` is not
/// part of the path.
fn text_mentions(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find('@') {
        let starts_word = rest[..at]
            .chars()
            .next_back()
            .is_none_or(char::is_whitespace);
        let after = &rest[at + 1..];
        rest = after;
        if !starts_word {
            continue;
        }
        let path = match after.strip_prefix('"') {
            Some(quoted) => match quoted.find('"') {
                Some(end) => quoted[..end].to_string(),
                None => continue,
            },
            None => {
                let end = after.find(char::is_whitespace).unwrap_or(after.len());
                after[..end]
                    .trim_end_matches([',', '.', ';', ':', '!', '?', ')'])
                    .to_string()
            }
        };
        if !path.is_empty() && !out.contains(&path) {
            out.push(path);
        }
    }
    out
}

/// A message as a person reads it: each leading `<file name="…">` block a mention added
/// becomes one line naming the file and its size (the model got the whole file).
pub fn fold_blocks(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(after) = rest.strip_prefix("<file name=\"") {
        let Some(name_end) = after.find("\">\n") else {
            break;
        };
        let Some(end) = after.find("\n</file>\n") else {
            break;
        };
        let name = &after[..name_end];
        let lines = after[name_end + 3..end].lines().count();
        let s = if lines == 1 { "" } else { "s" };
        out.push_str(&format!("[file {name} · {lines} line{s}]\n"));
        rest = &after[end + "\n</file>\n".len()..];
    }
    out.push_str(rest);
    out
}

/// The first message's text: piped stdin, a blank line, then the files' blocks followed
/// directly by the words (each block ends with a newline, as pi joins them).
pub fn compose(piped: &str, files: &str, words: &str) -> String {
    let rest = format!("{files}{words}");
    match (piped.trim().is_empty(), rest.trim().is_empty()) {
        (true, _) => rest,
        (false, true) => piped.to_string(),
        (false, false) => format!("{piped}\n\n{rest}"),
    }
}

/// The absolute path of a mention: `~` and `~/…` from `home`, a relative path from `cwd`; `.`
/// and `..` are resolved by name (as pi's `path.resolve`), symlinks are left alone.
pub fn resolve(path: &str, cwd: &Path, home: Option<&Path>) -> Result<PathBuf, MentionError> {
    let tilde = path == "~" || path.starts_with("~/");
    let joined = match (tilde, home) {
        (true, Some(home)) => home.join(path[1..].trim_start_matches('/')),
        (true, None) => {
            let why = "HOME is not set, so ~ cannot be expanded";
            return Err(MentionError::new(MentionErrorKind::NoHome, why));
        }
        (false, _) => cwd.join(path),
    };
    Ok(normalize(&joined))
}

/// `path` without `.` components, each `..` taking away the component before it.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// A regular file's bytes, up to its type's cap and `budget` (what the prompt's other mentions
/// left of [`MAX_TOTAL_BYTES`]). Anything else (missing, a directory, a FIFO, too large) is why
/// not.
fn read(abs: &Path, budget: u64) -> Result<Vec<u8>, MentionError> {
    let meta = std::fs::metadata(abs).map_err(|e| io_reason(&e))?;
    if meta.is_dir() {
        let why = "it is a directory; name the files in it instead";
        return Err(MentionError::new(MentionErrorKind::Directory, why));
    }
    if !meta.is_file() {
        let why = "it is not a regular file";
        return Err(MentionError::new(MentionErrorKind::NotRegularFile, why));
    }
    let mut file = std::fs::File::open(abs).map_err(|e| io_reason(&e))?;
    let mut bytes = Vec::new();
    let read_err = |e: std::io::Error| {
        MentionError::new(MentionErrorKind::Unreadable, format!("cannot read it: {e}"))
    };
    (&mut file)
        .take(SNIFF_BYTES)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    let (cap, what) = match image_type(&bytes) {
        Some(_) => (MAX_IMAGE_BYTES, "an image"),
        None => (MAX_TEXT_BYTES, "a text file"),
    };
    let too_large = |size: u64| {
        let why = format!(
            "it is {size} bytes, over the {} MiB limit for {what}; let the agent read it with its tools instead",
            cap / MIB
        );
        MentionError::new(MentionErrorKind::TooLarge, why)
    };
    if meta.len() > cap {
        return Err(too_large(meta.len()));
    }
    let left = (cap.min(budget) + 1).saturating_sub(bytes.len() as u64);
    file.take(left).read_to_end(&mut bytes).map_err(read_err)?;
    let size = bytes.len() as u64;
    if size > cap {
        return Err(too_large(size));
    }
    if size > budget {
        let why = format!(
            "the mentioned files together are over the {} MiB limit",
            MAX_TOTAL_BYTES / MIB
        );
        return Err(MentionError::new(MentionErrorKind::OverTotal, why));
    }
    Ok(bytes)
}

fn io_reason(e: &std::io::Error) -> MentionError {
    match e.kind() {
        std::io::ErrorKind::NotFound => MentionError::new(MentionErrorKind::NotFound, NOT_FOUND),
        std::io::ErrorKind::PermissionDenied => {
            MentionError::new(MentionErrorKind::Unreadable, "permission denied")
        }
        _ => MentionError::new(MentionErrorKind::Unreadable, e.to_string()),
    }
}

/// A file's block for the message and, for an image, its image block; `None` for an empty
/// file. A text file loses its BOM; a file that is neither UTF-8 text nor a known image is why
/// not.
pub fn include(
    abs: &Path,
    bytes: &[u8],
) -> Result<Option<(String, Option<Content>)>, MentionError> {
    if bytes.is_empty() {
        return Ok(None);
    }
    let name = abs.display();
    if let Some(mime_type) = image_type(bytes) {
        let image = Content::Image {
            data: base64(bytes),
            mime_type: mime_type.into(),
        };
        return Ok(Some((
            format!("<file name=\"{name}\"></file>\n"),
            Some(image),
        )));
    }
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let text = match std::str::from_utf8(bytes) {
        Ok(text) if !text.contains('\0') => text,
        _ => {
            let why = "it is binary: neither UTF-8 text nor a PNG, JPEG, GIF or WebP image";
            return Err(MentionError::new(MentionErrorKind::Binary, why));
        }
    };
    Ok(Some((
        format!("<file name=\"{name}\">\n{text}\n</file>\n"),
        None,
    )))
}

/// The MIME type of an image, by its first bytes: PNG, JPEG, GIF or WebP.
pub fn image_type(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(b"\xFF\xD8\xFF") {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// Standard base64 (RFC 4648, with padding).
pub fn base64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn mentioned_files_show_as_one_line_each_in_the_user_cell() {
        let text = "<file name=\"/p/a.rs\">\nfn a() {}\nfn b() {}\n\n</file>\n<file name=\"/p/b.md\">\nhi\n\n</file>\nlook at @a.rs and @b.md";
        assert_eq!(
            fold_blocks(text),
            "[file /p/a.rs · 2 lines]\n[file /p/b.md · 1 line]\nlook at @a.rs and @b.md"
        );
        assert_eq!(fold_blocks("<file name=\"x\"> no"), "<file name=\"x\"> no");
        assert_eq!(fold_blocks("plain"), "plain");
    }

    #[test]
    fn typed_text_includes_the_files_it_names_and_keeps_other_at_words() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        std::fs::create_dir(cwd.join("src")).unwrap();
        std::fs::write(cwd.join("src/lib.rs"), "pub fn f() {}\n").unwrap();
        std::fs::write(cwd.join("my notes.md"), "todo\n").unwrap();
        let text =
            "look at @src/lib.rs, and @\"my notes.md\" (ask @alice; not \\@src/lib.rs or @src)";
        let (message, images) = expand_text(text, cwd, None).unwrap();
        let lib = cwd.join("src/lib.rs").display().to_string();
        let notes = cwd.join("my notes.md").display().to_string();
        assert_eq!(
            message,
            format!(
                "<file name=\"{lib}\">\npub fn f() {{}}\n\n</file>\n<file name=\"{notes}\">\ntodo\n\n</file>\n{text}"
            )
        );
        assert!(images.is_empty());
        assert_eq!(
            expand_text("no mentions", cwd, None).unwrap().0,
            "no mentions"
        );
        std::fs::write(
            cwd.join("big.txt"),
            vec![b'a'; (MAX_TEXT_BYTES + 1) as usize],
        )
        .unwrap();
        let e = expand_text("@big.txt", cwd, None).unwrap_err();
        assert!(
            e.message.starts_with("cannot include @big.txt: it is"),
            "{e}"
        );
        assert_eq!(e.kind, MentionErrorKind::TooLarge);
    }

    #[test]
    fn only_a_whole_argument_starting_with_at_is_a_mention() {
        assert_eq!(classify("@src/main.rs"), Arg::Mention("src/main.rs"));
        assert_eq!(classify("@~/notes.md"), Arg::Mention("~/notes.md"));
        assert_eq!(classify("@./@x"), Arg::Mention("./@x"));
        assert_eq!(classify("@"), Arg::Word("@"));
        assert_eq!(classify("@ me"), Arg::Word("@ me"));
        assert_eq!(classify("foo@bar"), Arg::Word("foo@bar"));
        assert_eq!(classify("mail @alice"), Arg::Word("mail @alice"));
        assert_eq!(classify("\\@alice"), Arg::Word("@alice"));
        assert_eq!(classify("\\x"), Arg::Word("\\x"));
    }

    #[test]
    fn paths_resolve_from_the_cwd_and_home() {
        let cwd = Path::new("/w/proj");
        let home = Some(Path::new("/home/u"));
        let r = |p| resolve(p, cwd, home).unwrap();
        assert_eq!(r("a.rs"), PathBuf::from("/w/proj/a.rs"));
        assert_eq!(r("./src/../b.rs"), PathBuf::from("/w/proj/b.rs"));
        assert_eq!(r("../x"), PathBuf::from("/w/x"));
        assert_eq!(r("/etc/hosts"), PathBuf::from("/etc/hosts"));
        assert_eq!(r("~/n.md"), PathBuf::from("/home/u/n.md"));
        assert_eq!(r("~"), PathBuf::from("/home/u"));
        // `~user` is not expanded: it is a name like any other.
        assert_eq!(r("~bob/x"), PathBuf::from("/w/proj/~bob/x"));
        let e = resolve("~/n.md", cwd, None).unwrap_err();
        assert!(e.message.contains("HOME"), "{e}");
        assert_eq!(e.kind, MentionErrorKind::NoHome);
    }

    #[test]
    fn images_are_recognised_by_their_first_bytes() {
        assert_eq!(image_type(b"\x89PNG\r\n\x1a\nrest"), Some("image/png"));
        assert_eq!(image_type(b"\xFF\xD8\xFF\xE0"), Some("image/jpeg"));
        assert_eq!(image_type(b"GIF89a.."), Some("image/gif"));
        assert_eq!(image_type(b"GIF87a.."), Some("image/gif"));
        assert_eq!(image_type(b"RIFF\0\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(image_type(b"RIFF\0\0\0\0WAVEfmt "), None);
        assert_eq!(image_type(b"\x89PNG"), None);
        assert_eq!(image_type(b"hello"), None);
    }

    #[test]
    fn base64_matches_rfc_4648_vectors() {
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(plain.as_bytes()), encoded, "{plain:?}");
        }
        assert_eq!(base64(&[0xFB, 0xFF, 0xBF]), "+/+/");
    }

    #[test]
    fn a_text_file_is_a_file_block_without_its_bom() {
        let abs = Path::new("/w/a.md");
        let (block, image) = include(abs, b"\xEF\xBB\xBF# Title\nbody").unwrap().unwrap();
        assert_eq!(block, "<file name=\"/w/a.md\">\n# Title\nbody\n</file>\n");
        assert_eq!(image, None);
        assert_eq!(include(abs, b"").unwrap(), None);
    }

    #[test]
    fn an_image_is_an_empty_file_block_and_an_image_block() {
        let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
        let (block, image) = include(Path::new("/w/p.png"), png).unwrap().unwrap();
        assert_eq!(block, "<file name=\"/w/p.png\"></file>\n");
        assert_eq!(
            image,
            Some(Content::Image {
                data: base64(png),
                mime_type: "image/png".into()
            })
        );
    }

    #[test]
    fn binary_files_that_are_not_images_are_refused() {
        let abs = Path::new("/w/x.bin");
        for bytes in [&b"\x7fELF\x02\x01\0\0"[..], b"caf\xe9"] {
            let e = include(abs, bytes).unwrap_err();
            assert!(e.message.contains("binary"), "{e}");
            assert_eq!(e.kind, MentionErrorKind::Binary);
        }
    }

    #[test]
    fn stdin_comes_first_then_the_files_then_the_words() {
        let files = "<file name=\"/a\">\nA\n</file>\n";
        assert_eq!(
            compose("piped", files, "explain"),
            format!("piped\n\n{files}explain")
        );
        assert_eq!(compose("", files, "explain"), format!("{files}explain"));
        assert_eq!(compose("", "", "explain"), "explain");
        assert_eq!(compose("piped", "", ""), "piped");
        assert_eq!(compose("piped", "", "q"), "piped\n\nq");
        assert_eq!(compose("", "", ""), "");
    }

    #[test]
    fn expand_reads_mentions_in_order_and_keeps_the_words() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "alpha").unwrap();
        std::fs::write(dir.path().join("empty.txt"), "").unwrap();
        std::fs::write(dir.path().join("b.gif"), b"GIF89a\x01\0\x01\0").unwrap();
        let args: Vec<String> = ["explain", "@a.txt", "@empty.txt", "@b.gif", "both", "@"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let e = expand(&args, dir.path(), None).unwrap();
        let root = dir.path().display();
        assert_eq!(
            e.files,
            format!("<file name=\"{root}/a.txt\">\nalpha\n</file>\n<file name=\"{root}/b.gif\"></file>\n")
        );
        assert_eq!(e.images.len(), 1);
        assert_eq!(e.words, "explain both @");
    }

    #[test]
    fn expand_names_the_file_it_cannot_include() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let err = |arg: &str| expand(&[arg.to_string()], dir.path(), None).unwrap_err();
        let e = err("@missing.md");
        assert_eq!(e.exit(), crate::exit::Exit::Usage);
        let missing = dir.path().join("missing.md");
        assert_eq!(
            e.message,
            format!(
                "cannot include @missing.md ({}): no such file",
                missing.display()
            )
        );
        assert_eq!(
            e.hints,
            ["to send a word starting with @ as text, write it as '\\@word'"]
        );
        assert!(err("@sub").message.contains("is a directory"), "dir");
        assert!(err("@~/x").message.contains("HOME is not set"), "home");
    }

    #[test]
    fn each_reason_a_mention_cannot_be_read_has_its_kind() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(
            dir.path().join("big.txt"),
            vec![b'a'; MAX_TEXT_BYTES as usize + 1],
        )
        .unwrap();
        std::fs::write(dir.path().join("small.txt"), "0123456789").unwrap();
        let kind = |name: &str, budget: u64| read(&dir.path().join(name), budget).unwrap_err().kind;
        assert_eq!(
            kind("missing.md", MAX_TOTAL_BYTES),
            MentionErrorKind::NotFound
        );
        assert_eq!(kind("sub", MAX_TOTAL_BYTES), MentionErrorKind::Directory);
        assert_eq!(kind("big.txt", MAX_TOTAL_BYTES), MentionErrorKind::TooLarge);
        assert_eq!(kind("small.txt", 5), MentionErrorKind::OverTotal);
        #[cfg(unix)]
        assert_eq!(
            kind("/dev/null", MAX_TOTAL_BYTES),
            MentionErrorKind::NotRegularFile
        );
    }

    #[test]
    fn files_over_their_caps_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let big = vec![b'a'; MAX_TEXT_BYTES as usize + 1];
        std::fs::write(dir.path().join("big.txt"), &big).unwrap();
        std::fs::write(dir.path().join("fits.txt"), &big[1..]).unwrap();
        let one = |arg: &str| expand(&[arg.to_string()], dir.path(), None);
        let e = one("@big.txt").unwrap_err();
        assert!(
            e.message.contains("over the 1 MiB limit for a text file"),
            "{e:?}"
        );
        let fits = dir.path().join("fits.txt");
        assert_eq!(
            one("@fits.txt").unwrap().files,
            format!(
                "<file name=\"{}\">\n{}\n</file>\n",
                fits.display(),
                "a".repeat(big.len() - 1)
            )
        );
        // Eleven files that fit one by one are over the total together.
        let args: Vec<String> = (0..11).map(|_| "@fits.txt".to_string()).collect();
        let e = expand(&args, dir.path(), None).unwrap_err();
        assert!(
            e.message.contains("together are over the 10 MiB limit"),
            "{e:?}"
        );
    }

    #[test]
    fn an_image_over_its_cap_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
        png.resize(MAX_IMAGE_BYTES as usize + 1, 0);
        std::fs::write(dir.path().join("big.png"), &png).unwrap();
        let e = expand(&["@big.png".to_string()], dir.path(), None).unwrap_err();
        assert!(
            e.message.contains("over the 8 MiB limit for an image"),
            "{e:?}"
        );
    }
}
