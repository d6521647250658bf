//! ACP prompt content blocks → the text and images of a pi `prompt`. Text stays text; a
//! resource link to a file and an embedded text resource become the same `<file name="…">`
//! block an `@file` mention gives (`mentions::include`); images stay images. Reads only the
//! files linked, never writes.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::schema::{ContentBlock, EmbeddedResourceResource};
use crate::kernel::message::Content;
use crate::mentions;

/// A pi prompt: the message text and its images (`{type:"image", data, mimeType}`).
#[derive(Debug, Clone, PartialEq)]
pub struct Prompt {
    pub message: String,
    pub images: Vec<Value>,
}

/// The prompt the blocks make, or why a block cannot be taken (the index names it).
pub fn prompt(blocks: &[ContentBlock]) -> Result<Prompt, String> {
    let mut text = String::new();
    let mut images = Vec::new();
    for (i, block) in blocks.iter().enumerate() {
        let at = |why: String| format!("`prompt[{i}]`: {why}");
        match block {
            ContentBlock::Text(t) => push(&mut text, &t.text),
            ContentBlock::Image(img) => images.push(image(&img.data, &img.mime_type)),
            ContentBlock::ResourceLink(link) => match file_path(&link.uri) {
                Some(path) => {
                    let (block, image) = file_block(&path).map_err(at)?;
                    push(&mut text, &block);
                    images.extend(image);
                }
                None => push(&mut text, &format!("[{}]({})", link.name, link.uri)),
            },
            ContentBlock::Resource(res) => match &res.resource {
                EmbeddedResourceResource::TextResourceContents(t) => {
                    let name = file_path(&t.uri).unwrap_or_else(|| PathBuf::from(&t.uri));
                    if let Some((block, _)) = mentions::include(&name, t.text.as_bytes())
                        .map_err(|e| at(format!("{}: {e}", t.uri)))?
                    {
                        push(&mut text, &block);
                    }
                }
                EmbeddedResourceResource::BlobResourceContents(b) => match b.mime_type.as_deref() {
                    Some(m) if m.starts_with("image/") => images.push(image(&b.blob, m)),
                    _ => {
                        return Err(at(format!(
                            "{}: only text and image resources can be included",
                            b.uri
                        )))
                    }
                },
                _ => return Err(at("an unknown kind of resource".into())),
            },
            ContentBlock::Audio(_) => {
                return Err(at(
                    "audio is not supported (promptCapabilities.audio is false)".into(),
                ))
            }
            _ => return Err(at("an unknown kind of content block".into())),
        }
    }
    Ok(Prompt {
        message: text,
        images,
    })
}

fn push(text: &mut String, part: &str) {
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(part);
}

fn image(data: &str, mime: &str) -> Value {
    json!({"type": "image", "data": data, "mimeType": mime})
}

/// The path a `file://` URI names (percent-escapes decoded); `None` for other schemes.
pub fn file_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    let path = rest.strip_prefix("localhost").unwrap_or(rest);
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h)? * 16 + hex(l)?) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    let path = PathBuf::from(String::from_utf8(out).ok()?);
    path.is_absolute().then_some(path)
}

/// A linked file as a mention renders it (text block, or an image), within the mention caps.
fn file_block(path: &Path) -> Result<(String, Option<Value>), String> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("{shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{shown}: not a regular file"));
    }
    if meta.len() > mentions::MAX_IMAGE_BYTES.max(mentions::MAX_TEXT_BYTES) {
        return Err(format!("{shown}: {} bytes is too large", meta.len()));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("{shown}: {e}"))?;
    let cap = if mentions::image_type(&bytes).is_some() {
        mentions::MAX_IMAGE_BYTES
    } else {
        mentions::MAX_TEXT_BYTES
    };
    if bytes.len() as u64 > cap {
        return Err(format!(
            "{shown}: {} bytes, over the {} MiB limit",
            bytes.len(),
            cap / (1024 * 1024)
        ));
    }
    match mentions::include(path, &bytes).map_err(|e| format!("{shown}: {e}"))? {
        None => Ok((format!("<file name=\"{shown}\"></file>\n"), None)),
        Some((block, img)) => Ok((
            block,
            img.and_then(|c| match c {
                Content::Image { data, mime_type } => Some(image(&data, &mime_type)),
                _ => None,
            }),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks(v: Value) -> Vec<ContentBlock> {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn text_links_and_embedded_resources_become_file_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a b.txt");
        std::fs::write(&file, "hello\n").unwrap();
        let uri = format!("file://{}", dir.path().join("a%20b.txt").display());
        let p = prompt(&blocks(json!([
            {"type": "text", "text": "look at"},
            {"type": "resource_link", "name": "a b.txt", "uri": uri},
            {"type": "resource", "resource": {"uri": "file:///x/y.rs", "text": "fn main() {}"}},
            {"type": "resource_link", "name": "site", "uri": "https://example.org/"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"}
        ])))
        .unwrap();
        let shown = file.display();
        assert_eq!(
            p.message,
            format!(
                "look at\n<file name=\"{shown}\">\nhello\n\n</file>\n<file name=\"/x/y.rs\">\nfn main() {{}}\n</file>\n[site](https://example.org/)"
            )
        );
        assert_eq!(
            p.images,
            vec![json!({"type":"image","data":"AAAA","mimeType":"image/png"})]
        );
    }

    #[test]
    fn a_missing_linked_file_and_audio_are_refused_naming_the_block() {
        let e = prompt(&blocks(json!([
            {"type": "text", "text": "x"},
            {"type": "resource_link", "name": "n", "uri": "file:///no/such/file"}
        ])))
        .unwrap_err();
        assert!(e.starts_with("`prompt[1]`: /no/such/file"), "{e}");
        let e = prompt(&blocks(
            json!([{"type": "audio", "data": "AA", "mimeType": "audio/wav"}]),
        ))
        .unwrap_err();
        assert!(e.contains("audio is not supported"), "{e}");
    }
}
