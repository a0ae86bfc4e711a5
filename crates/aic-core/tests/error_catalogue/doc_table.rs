//! Keeps the catalogue tables of `docs/errors.md` equal to the cases the tests run. Each
//! table sits between `<!-- BEGIN catalogue:NAME -->` and `<!-- END catalogue:NAME -->`; a
//! test renders its cases and compares. `AIC_BLESS=1` rewrites the section instead of failing
//! (how to regenerate the table after a message changes on purpose).

use std::path::PathBuf;

/// Longest message shown in full; longer ones are cut with an ellipsis.
const MAX_MESSAGE_CHARS: usize = 300;

/// The documentation file holding the catalogue.
pub fn errors_doc() -> PathBuf {
    super::fixtures::repo_root().join("docs/errors.md")
}

/// A message as the docs show it: machine paths replaced by placeholders, one line, no table
/// breaks, long lists cut.
pub fn doc_message(message: &str) -> String {
    let scratch = super::fixtures::scratch_base();
    let repo = super::fixtures::repo_root();
    let mut text = message.to_string();
    // `<scratch>/<case id>/systems` -> `<tmp>/systems`
    let scratch_text = scratch.to_string_lossy().into_owned();
    while let Some(start) = text.find(&scratch_text) {
        let after = start + scratch_text.len();
        let rest = &text[after..];
        let case_len = rest
            .strip_prefix('/')
            .map(|r| 1 + r.find('/').unwrap_or(r.len()))
            .unwrap_or(0);
        text.replace_range(start..after + case_len, "<tmp>");
    }
    text = text.replace(&repo.to_string_lossy().into_owned(), "<repo>");
    text = text.replace(
        &std::env::temp_dir().to_string_lossy().into_owned(),
        "<tmp>",
    );
    let mut one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() > MAX_MESSAGE_CHARS {
        one_line = one_line
            .chars()
            .take(MAX_MESSAGE_CHARS - 1)
            .collect::<String>()
            + "…";
    }
    one_line.replace('|', "\\|")
}

/// The lines of one catalogue section (without the markers).
pub fn section(doc: &str, name: &str) -> Option<String> {
    let begin = format!("<!-- BEGIN catalogue:{name} -->\n");
    let end = format!("<!-- END catalogue:{name} -->");
    let start = doc.find(&begin)? + begin.len();
    let stop = start + doc[start..].find(&end)?;
    Some(doc[start..stop].to_string())
}

/// Compares the section with `rendered`; under `AIC_BLESS=1` writes `rendered` into it.
pub fn check_or_bless(name: &str, rendered: &str) {
    let path = errors_doc();
    let doc = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let current = section(&doc, name)
        .unwrap_or_else(|| panic!("docs/errors.md has no `<!-- BEGIN catalogue:{name} -->` ... `<!-- END catalogue:{name} -->` section"));
    if current == rendered {
        return;
    }
    if std::env::var("AIC_BLESS").is_ok_and(|v| v == "1") {
        let begin = format!("<!-- BEGIN catalogue:{name} -->\n");
        let start = doc.find(&begin).unwrap() + begin.len();
        let stop = start + current.len();
        let mut updated = doc.clone();
        updated.replace_range(start..stop, rendered);
        std::fs::write(&path, updated).expect("write docs/errors.md");
        return;
    }
    let current_lines: Vec<&str> = current.lines().collect();
    let rendered_lines: Vec<&str> = rendered.lines().collect();
    let stale: Vec<&str> = current_lines
        .iter()
        .filter(|l| !rendered_lines.contains(l))
        .copied()
        .collect();
    let missing: Vec<&str> = rendered_lines
        .iter()
        .filter(|l| !current_lines.contains(l))
        .copied()
        .collect();
    panic!(
        "docs/errors.md section `{name}` is out of date with the catalogue cases.\n\
         rows in the doc but not produced by the tests:\n{}\n\
         rows the tests produce but the doc lacks:\n{}\n\
         Regenerate with: AIC_BLESS=1 cargo test -p aic-core --test error_catalogue",
        stale.join("\n"),
        missing.join("\n")
    );
}

/// The ids listed in the first column of a section's table rows.
pub fn section_ids(section_text: &str) -> Vec<String> {
    section_text
        .lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| l.split('`').nth(1).map(str::to_string))
        .collect()
}
