//! Terminal text measurement by grapheme cluster, shared by print mode and (later) the TUI:
//! display width and width-bounded truncation. Pure functions; never writes anywhere.

use unicode_segmentation::UnicodeSegmentation;
use unicode_width::UnicodeWidthStr;

/// Display width of one grapheme cluster (a ZWJ emoji sequence or a flag counts as one glyph).
fn grapheme_width(g: &str) -> usize {
    if g == "\t" {
        return 4;
    }
    let w = g.width();
    // An emoji presentation sequence (VS16) or ZWJ sequence renders as one wide glyph.
    if g.chars().count() > 1 && (g.contains('\u{200d}') || g.contains('\u{fe0f}')) {
        return 2;
    }
    w.min(2)
}

/// Display width of a string in terminal columns.
pub fn width(s: &str) -> usize {
    s.graphemes(true).map(grapheme_width).sum()
}

/// Cuts `s` to at most `max` columns, ending with `…` when something was cut. Never splits a
/// grapheme cluster; control characters (newlines included) become spaces.
pub fn truncate(s: &str, max: usize) -> String {
    let clean: String = s
        .chars()
        .map(|c| if c.is_control() && c != '\t' { ' ' } else { c })
        .collect();
    if width(&clean) <= max {
        return clean;
    }
    let mut out = String::new();
    let mut used = 0;
    for g in clean.graphemes(true) {
        let w = grapheme_width(g);
        if used + w + 1 > max {
            break;
        }
        out.push_str(g);
        used += w;
    }
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_of_wide_and_combined_text() {
        assert_eq!(width("abc"), 3);
        assert_eq!(width("日本語"), 6);
        assert_eq!(width("e\u{301}"), 1); // e + combining acute
        assert_eq!(width("👩\u{200d}💻"), 2); // ZWJ sequence
        assert_eq!(width("❤\u{fe0f}"), 2); // VS16
    }

    #[test]
    fn truncate_never_exceeds_width_or_splits_clusters() {
        let s = "日本語のテキスト👩\u{200d}💻 and more";
        for max in 1..20 {
            let t = truncate(s, max);
            assert!(width(&t) <= max, "{t:?} wider than {max}");
        }
        assert_eq!(truncate("日本語", 4), "日…");
        assert_eq!(truncate("a\nb", 10), "a b");
    }
}
