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
    ("values and the runtime", &["cell", "runtime", "telemetry"]),
    ("encodings", &["keys", "head", "rowset", "url"]),
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
];

/// Files that hold tests or test helpers only (each compiled for tests alone), besides every
/// `tests.rs` and `*_tests.rs`; and the crate root.
const TEST_ONLY: &[&str] = &["lib.rs", "layers.rs", "testing.rs"];

/// The modules `source` uses through `crate::` paths, outside its `mod tests`.
pub(crate) fn uses(source: &str) -> std::collections::BTreeSet<String> {
    let source = match source.find("#[cfg(test)]\nmod tests") {
        Some(at) => &source[..at],
        None => source,
    };
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = std::collections::BTreeSet::new();
    for line in source.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            if let Some(list) = rest.strip_prefix('{') {
                // `use crate::{a, b::c}` on one line (rustfmt's multi-line form is below)
                let inner = list.split('}').next().unwrap_or("");
                out.extend(inner.split(',').map(|s| ident(s.trim())));
            } else {
                out.insert(ident(rest));
            }
        }
    }
    // `use crate::{` spread over lines
    let mut lines = source.lines();
    while let Some(line) = lines.next() {
        if line.trim_start().starts_with("use crate::{") && !line.contains('}') {
            for inner in lines.by_ref() {
                if inner.trim_start().starts_with('}') {
                    break;
                }
                out.insert(ident(inner.trim()));
            }
        }
    }
    out.retain(|m| !m.is_empty());
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
                let used = uses(&std::fs::read_to_string(&path).unwrap());
                let deps = graph.entry(module.to_string()).or_default();
                deps.extend(used.into_iter().filter(|m| m != module));
            }
        }
        // only the crate's own modules (not `crate::Error`-style items, were there any)
        let modules: BTreeSet<String> = graph.keys().cloned().collect();
        for deps in graph.values_mut() {
            deps.retain(|d| modules.contains(d));
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

    /// The reader sees `crate::` paths in each form the code writes them.
    #[test]
    fn uses_reads_each_form_of_path() {
        let source = "use crate::cell::{Cell, Row};\n\
                      use crate::{keys, store::Store};\n\
                      use crate::{\n    head::Head,\n    rowset,\n};\n\
                      fn f() { crate::runtime::block_on(x); } // crate::nothing\n\
                      #[cfg(test)]\nmod tests {\n    use crate::txn;\n}\n";
        let found: Vec<String> = uses(source).into_iter().collect();
        assert_eq!(
            found,
            ["cell", "head", "keys", "rowset", "runtime", "store"].map(String::from)
        );
    }
}
