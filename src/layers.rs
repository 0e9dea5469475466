//! The core's modules in layers, bottom to top (RFC 0002, "Layers"): a module uses only modules
//! of the layers below its own, so no two modules depend on each other, however indirectly.
//! The test below reads every module's source and fails on an import that goes sideways or up,
//! or on a module no layer names. `cargo test -p moraine-core layers -- --nocapture` prints the
//! layers with what each module uses.

/// Bottom to top: each layer's name and its modules (files or folders directly under `src/`).
pub(crate) const LAYERS: &[(&str, &[&str])] = &[
    (
        "foundation: errors, DuckLake's table list, counters",
        &[
            "error",
            "tables",
            "records",
            "row_locks",
            "sst_cache",
            "status",
        ],
    ),
    (
        "values and the runtime",
        &["cell", "duckdb_types", "runtime", "serialized", "telemetry"],
    ),
    (
        "encodings",
        &["compression", "keys", "head", "rowset", "url"],
    ),
    (
        "storage: SlateDB's handle, checkpoint codec, catalog records, limits, S3",
        &["backend", "checkpoint", "catalog", "limits", "s3"],
    ),
    (
        "staged writes: inlined chunks, the schema floor, operations, the write set",
        &["chunk", "floor", "op", "write_set"],
    ),
    ("each kind's rules, and the overlay", &["kinds", "overlay"]),
    ("the committed image", &["image"]),
    ("the store", &["store"]),
    ("translation", &["translate"]),
    ("the transaction", &["txn"]),
    (
        "what DuckDB asks: its settings, an ATTACH, a scan in a transaction, operator views",
        &["attach", "scan", "settings", "views"],
    ),
];

/// Files that hold tests or test helpers only (each compiled for tests alone), besides every
/// `tests.rs` and `*_tests.rs`; and the crate root.
const TEST_ONLY: &[&str] = &[
    "lib.rs",
    "layers.rs",
    "testing.rs",
    "testing/faulty.rs",
    "testing/lakes.rs",
];

/// The modules `source` uses through `crate::` paths (and, in a module directly under `src/`,
/// `super::` paths, which name the crate root), outside its `#[cfg(test)]` modules.
pub(crate) fn uses(source: &str, top_level: bool) -> std::collections::BTreeSet<String> {
    let code = without_test_modules(&without_comments(source));
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = std::collections::BTreeSet::new();
    let roots: &[&str] = if top_level {
        &["crate::", "super::"]
    } else {
        &["crate::"]
    };
    for root in roots {
        let mut rest = code.as_str();
        while let Some(at) = rest.find(root) {
            let before = rest[..at].chars().next_back();
            rest = &rest[at + root.len()..];
            // (`super::` must start a path, not end a longer name)
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                continue;
            }
            match rest.strip_prefix('{') {
                // `crate::{a, b::{c, d}, e}`: the first segment of each item at depth one
                Some(group) => {
                    let mut depth = 1;
                    let mut item_start = true;
                    for (i, c) in group.char_indices() {
                        match c {
                            '{' => depth += 1,
                            '}' => {
                                depth -= 1;
                                if depth == 0 {
                                    break;
                                }
                            }
                            ',' if depth == 1 => item_start = true,
                            c if item_start && !c.is_whitespace() => {
                                item_start = false;
                                out.insert(ident(&group[i..]));
                            }
                            _ => {}
                        }
                    }
                }
                None => {
                    out.insert(ident(rest));
                }
            }
        }
    }
    out.retain(|m| !m.is_empty() && m != "self");
    out
}

/// `source` without its line comments.
fn without_comments(source: &str) -> String {
    source
        .lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `code` without its `#[cfg(test)] mod name { … }` blocks (a `mod name;` declaration stays).
fn without_test_modules(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "#[cfg(test)]".len()..];
        let item = after.trim_start();
        let body = item
            .strip_prefix("mod ")
            .or_else(|| item.strip_prefix("pub(crate) mod "))
            .and_then(|m| {
                let open = m.find(|c: char| c == '{' || c == ';')?;
                (m.as_bytes()[open] == b'{').then(|| &m[open + 1..])
            });
        let Some(body) = body else {
            // not a module with a body: keep it, and go on after the attribute
            rest = after;
            continue;
        };
        let mut depth = 1;
        let mut end = body.len();
        for (i, c) in body.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &body[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::Path;

    /// Module -> the modules it uses, read from `src/`.
    fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut dirs = vec![src.to_path_buf()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                    continue;
                }
                let relative = path.strip_prefix(src).unwrap();
                let name = relative.to_str().unwrap();
                let tests = name.ends_with("tests.rs");
                if !name.ends_with(".rs") || tests || TEST_ONLY.contains(&name) {
                    continue;
                }
                let module = name.split('/').next().unwrap().trim_end_matches(".rs");
                let top_level = !name.contains('/');
                let used = uses(&std::fs::read_to_string(&path).unwrap(), top_level);
                let deps = graph.entry(module.to_string()).or_default();
                deps.extend(used.into_iter().filter(|m| m != module));
            }
        }
        // the crate's own modules (not items of the crate root, were there any), the test-only
        // ones included: production code must not use those either
        let exists = |m: &str| src.join(format!("{m}.rs")).exists() || src.join(m).is_dir();
        for deps in graph.values_mut() {
            deps.retain(|d| exists(d));
        }
        graph
    }

    fn layer_of(module: &str) -> Option<usize> {
        LAYERS.iter().position(|(_, mods)| mods.contains(&module))
    }

    /// Every module is in a layer, and uses only modules of lower layers; printed with
    /// `--nocapture`.
    #[test]
    fn layers_only_use_the_layers_below() {
        let graph = graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
        let mut wrong = Vec::new();
        for (module, deps) in &graph {
            let Some(layer) = layer_of(module) else {
                wrong.push(format!("{module} is in no layer of src/layers.rs"));
                continue;
            };
            for dep in deps {
                match layer_of(dep) {
                    Some(below) if below < layer => {}
                    _ => wrong.push(format!(
                        "{module} (layer {layer}) uses {dep} (layer {})",
                        layer_of(dep).map_or("none".into(), |l| l.to_string())
                    )),
                }
            }
        }
        for (i, (what, modules)) in LAYERS.iter().enumerate().rev() {
            println!("layer {i}: {what}");
            for m in modules.iter() {
                let deps: Vec<&str> = graph
                    .get(*m)
                    .map(|d| d.iter().map(String::as_str).collect())
                    .unwrap_or_default();
                println!("    {m:<10} uses {}", deps.join(", "));
            }
        }
        assert!(wrong.is_empty(), "imports against the layers: {wrong:#?}");
        assert!(graph.len() >= 25, "read {} modules", graph.len());
    }

    /// The reader sees `crate::` paths in each form the code writes them, and nothing in
    /// comments or test modules.
    #[test]
    fn uses_reads_each_form_of_path() {
        let source = "use crate::cell::{Cell, Row};\n\
                      use crate::{keys, store::Store};\n\
                      pub(crate) use crate::{\n    head::Head, op,\n    rowset::{self, RowSet}, url,\n};\n\
                      use crate::{chunk::{a, b}, floor};\n\
                      #[cfg(test)]\nmod tests;\n\
                      fn f() { crate::runtime::block_on(x); } // crate::nothing\n\
                      #[cfg(test)]\nmod tests {\n    use crate::txn;\n    fn g() { if x { } }\n}\n\
                      fn h() { super::limits::g(); mysuper::z(); }\n";
        let found: Vec<String> = uses(source, true).into_iter().collect();
        let want = [
            "cell", "chunk", "floor", "head", "keys", "limits", "op", "rowset", "runtime", "store",
            "url",
        ];
        assert_eq!(found, want.map(String::from));
        // in a file of a folder module, `super::` is that module
        assert!(!uses(source, false).contains("limits"));
    }
}
