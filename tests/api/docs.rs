//! `docs/architecture.md` names every module of `src/`.
//!
//! The rule: every `.rs` file under `src/` and every directory under `src/` is named on
//! the page by its path relative to `src/`, a file with its `.rs` (`runs/flush.rs`), a
//! directory with a trailing slash (`runs/mcp/`). A `mod.rs` is covered by its directory.
//! A mention counts only as a whole path: the characters on either side of it must not
//! be letters, digits, `_`, `-` or `/`, except that `src/` may come before it. So
//! `http/runs/follow.rs` names `http/runs/follow.rs` and not `runs/follow.rs`, and
//! `runs/mcp/http.rs` names that file and not the directory `runs/mcp/`.

use std::path::Path;

/// The modules of `src/`, as the page must name them, sorted.
fn modules(dir: &Path, prefix: &str, found: &mut Vec<String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().and_then(|n| n.to_str()).expect("a UTF-8 file name");
        if path.is_dir() {
            let relative = format!("{prefix}{name}/");
            found.push(relative.clone());
            modules(&path, &relative, found);
        } else if name.ends_with(".rs") && name != "mod.rs" {
            found.push(format!("{prefix}{name}"));
        }
    }
}

fn is_path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '/')
}

/// Whether `page` names `module` as a whole path (see the module's comment).
fn names(page: &str, module: &str) -> bool {
    page.match_indices(module).any(|(at, _)| {
        let before = &page[..at];
        let after = &page[at + module.len()..];
        let starts =
            before.ends_with("src/") || !before.chars().next_back().is_some_and(is_path_char);
        let ends = !after.chars().next().is_some_and(is_path_char);
        starts && ends
    })
}

#[test]
fn the_architecture_page_names_every_module_of_src() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let page = std::fs::read_to_string(root.join("docs/architecture.md"))
        .expect("docs/architecture.md is readable");
    let mut found = Vec::new();
    modules(&root.join("src"), "", &mut found);
    assert!(found.len() > 100, "src/ lists too few modules: {found:?}");
    let missing: Vec<&String> = found.iter().filter(|module| !names(&page, module)).collect();
    assert!(
        missing.is_empty(),
        "docs/architecture.md does not name these modules of src/ (by their path relative to \
         src/, e.g. `runs/flush.rs` or `runs/mcp/`): {missing:?}"
    );
}

#[test]
fn a_mention_counts_only_as_a_whole_path() {
    assert!(names("in `runs/flush.rs`.", "runs/flush.rs"));
    assert!(names("see src/runs/flush.rs", "runs/flush.rs"));
    assert!(names("`runs/mcp/` holds", "runs/mcp/"));
    assert!(!names("`http/runs/follow.rs`", "runs/follow.rs"));
    assert!(!names("`runs/mcp/http.rs`", "runs/mcp/"));
    assert!(!names("`store/runs.rsx`", "store/runs.rs"));
}
