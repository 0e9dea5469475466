//! The C ABI between the C++ layer and Rust: extension/cpp/moraine_ffi.h against the
//! `#[repr(C)]` types and constants of ffi.rs and the [`Kind`] numbers of src/error.rs.
//!
//! Three views must agree:
//! - the header's text: every enum constant and `#define` with its value, every struct with its
//!   fields in order (parsed here; a construct the parser does not know fails the test rather
//!   than being skipped);
//! - the C++ compiler's: extension/abi/moraine_abi.cpp, compiled by build.rs into its own
//!   archive that only this test links, reports each constant's value and each struct's size,
//!   alignment and field offsets and sizes;
//! - Rust's: the constants below, [`Kind::ALL`], [`Exception::ALL`], and `size_of` / `align_of` / `offset_of!` of
//!   the structs.
//!
//! Rust's layouts cannot reach the C++ compiler at build time (build.rs runs before the crate
//! is compiled), so rather than `static_assert`s against numbers written by hand, both
//! compilers' answers meet here, and a difference is a failing test naming it, not a broken
//! build.

use super::*;
use std::collections::BTreeMap;
use std::ffi::CStr;
use std::mem::{align_of, offset_of, size_of};

const HEADER: &str = include_str!("../cpp/moraine_ffi.h");
const FFI_RS: &str = include_str!("ffi.rs");
const ERROR_RS: &str = include_str!("../../src/error.rs");

// ---- the header's text -------------------------------------------------------------------

#[derive(Debug, Default)]
struct Header {
    /// enum name (or "#define") -> constant name -> value
    constants: BTreeMap<String, BTreeMap<String, i64>>,
    /// struct (typedef) name -> field names in order
    structs: BTreeMap<String, Vec<String>>,
}

/// `text` without its comments.
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("//") {
            rest = after.find('\n').map_or("", |at| &after[at..]);
        } else if let Some(after) = rest.strip_prefix("/*") {
            let end = after.find("*/").expect("an unterminated /* comment");
            out.push(' ');
            rest = &after[end + 2..];
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// Identifiers, numbers (with a leading minus), string literals and single punctuation.
fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(chars[start..i].iter().collect());
        } else if c == '"' {
            let start = i;
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += 1;
            }
            i += 1;
            out.push(chars[start..i.min(chars.len())].iter().collect());
        } else {
            out.push(c.to_string());
            i += 1;
        }
    }
    out
}

fn number(token: &str, what: &str) -> i64 {
    let t = token.trim_end_matches(['u', 'U', 'l', 'L']);
    let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => i64::from_str_radix(hex, 16),
        None => t.parse(),
    };
    parsed.unwrap_or_else(|_| {
        panic!("moraine_ffi.h: {what} = {token}: the ABI test reads only integer literals")
    })
}

fn is_ident(token: &str) -> bool {
    token
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
}

fn parse_header(text: &str) -> Header {
    let text = strip_comments(text);
    let mut header = Header::default();
    let mut code = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(define) = trimmed.strip_prefix("#define") {
            let parts: Vec<&str> = define.split_whitespace().collect();
            let [name, value] = parts[..] else {
                panic!(
                    "moraine_ffi.h: `{trimmed}`: the ABI test reads `#define NAME <integer>` only"
                )
            };
            let value = number(value.trim_matches(['(', ')']), name);
            header
                .constants
                .entry("#define".into())
                .or_default()
                .insert(name.into(), value);
        } else if !trimmed.starts_with('#') {
            code.push_str(line);
            code.push('\n');
        }
    }
    let t = tokens(&code);
    let mut i = 0;
    while i < t.len() {
        match t[i].as_str() {
            "enum" if t.get(i + 2).is_some_and(|b| b == "{") => {
                let name = t[i + 1].clone();
                let mut values = BTreeMap::new();
                i += 3;
                while t[i] != "}" {
                    let constant = &t[i];
                    assert!(
                        is_ident(constant) && t[i + 1] == "=",
                        "moraine_ffi.h: enum {name}: `{constant} {}`: the ABI test wants every \
                         constant as `NAME = <integer>`",
                        t[i + 1]
                    );
                    let (negative, at) = if t[i + 2] == "-" {
                        (true, i + 3)
                    } else {
                        (false, i + 2)
                    };
                    let value = number(&t[at], constant);
                    let value = if negative { -value } else { value };
                    assert!(
                        values.insert(constant.clone(), value).is_none(),
                        "moraine_ffi.h: {constant} twice"
                    );
                    i = at + 1;
                    match t[i].as_str() {
                        "," => i += 1,
                        "}" => {}
                        other => panic!(
                            "moraine_ffi.h: enum {name}: `{other}` after {constant}: the ABI test \
                             reads integer literals only"
                        ),
                    }
                }
                assert!(
                    header.constants.insert(name.clone(), values).is_none(),
                    "moraine_ffi.h: enum {name} twice"
                );
                i += 1;
            }
            "typedef" if t.get(i + 1).is_some_and(|s| s == "enum") => {
                panic!("moraine_ffi.h: a typedef'd enum: the ABI test reads `enum Name {{ ... }};` only")
            }
            "struct" => {
                // `struct {`, `struct Tag {`; anything else is an opaque or a use
                let open = if t.get(i + 1).is_some_and(|s| s == "{") {
                    i + 1
                } else if t.get(i + 2).is_some_and(|s| s == "{") {
                    i + 2
                } else {
                    i += 1;
                    continue;
                };
                assert!(
                    i > 0 && t[i - 1] == "typedef",
                    "moraine_ffi.h: a struct body outside `typedef struct ... {{ }} Name;`: the \
                     ABI test reads that form only"
                );
                let mut fields: Vec<String> = Vec::new();
                let mut j = open + 1;
                let mut declaration: Vec<String> = Vec::new();
                while t[j] != "}" {
                    if t[j] == ";" {
                        let field = declaration.last().cloned().unwrap_or_default();
                        assert!(
                            is_ident(&field)
                                && declaration.len() >= 2
                                && !declaration
                                    .iter()
                                    .any(|d| matches!(d.as_str(), "," | "[" | "(" | ":")),
                            "moraine_ffi.h: field `{}`: the ABI test reads `type name;` fields \
                             only (no arrays, bit fields, function pointers or lists)",
                            declaration.join(" ")
                        );
                        fields.push(field);
                        declaration.clear();
                    } else {
                        declaration.push(t[j].clone());
                    }
                    j += 1;
                }
                let name = t[j + 1].clone();
                assert!(
                    is_ident(&name) && t[j + 2] == ";",
                    "moraine_ffi.h: a struct body not followed by its typedef name"
                );
                assert!(
                    header.structs.insert(name.clone(), fields).is_none(),
                    "moraine_ffi.h: struct {name} twice"
                );
                i = j + 3;
            }
            _ => i += 1,
        }
    }
    header
}

// ---- Rust's view -------------------------------------------------------------------------

/// `InvalidInput` -> `INVALID_INPUT`.
fn screaming(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// Rust's value of each of the header's constants: enum -> C name -> (Rust name, value).
fn rust_constants() -> BTreeMap<&'static str, BTreeMap<String, (String, i64)>> {
    let mut out: BTreeMap<&'static str, BTreeMap<String, (String, i64)>> = BTreeMap::new();
    let kinds = out.entry("MoraineErrorKind").or_default();
    // (no Kind is 0: MoraineError's kind is 0 when there is no error)
    kinds.insert("MORAINE_ERROR_NONE".into(), ("no error".into(), 0));
    for kind in Kind::ALL {
        kinds.insert(
            format!("MORAINE_ERROR_{}", screaming(&format!("{kind:?}"))),
            (format!("Kind::{kind:?}"), kind as u32 as i64),
        );
    }
    let exceptions = out.entry("MoraineExceptionType").or_default();
    exceptions.insert("MORAINE_EXCEPTION_NONE".into(), ("no error".into(), 0));
    for exception in Exception::ALL {
        exceptions.insert(
            format!("MORAINE_EXCEPTION_{}", screaming(&format!("{exception:?}"))),
            (format!("Exception::{exception:?}"), exception as u32 as i64),
        );
    }
    let named = |pairs: &[(&str, &str, i64)]| {
        pairs
            .iter()
            .map(|(c, rust, v)| (c.to_string(), (rust.to_string(), *v)))
            .collect::<BTreeMap<_, _>>()
    };
    out.insert(
        "MoraineCellTag",
        named(&[
            ("MORAINE_NULL", "TAG_NULL", TAG_NULL.into()),
            ("MORAINE_INT", "TAG_INT", TAG_INT.into()),
            ("MORAINE_BOOL", "TAG_BOOL", TAG_BOOL.into()),
            ("MORAINE_FLOAT", "TAG_FLOAT", TAG_FLOAT.into()),
            ("MORAINE_TEXT", "TAG_TEXT", TAG_TEXT.into()),
            ("MORAINE_BLOB", "TAG_BLOB", TAG_BLOB.into()),
        ]),
    );
    out.insert(
        "MoraineFieldKind",
        named(&[
            ("MORAINE_FIELD_TEXT", "FIELD_TEXT", FIELD_TEXT.into()),
            ("MORAINE_FIELD_BIGINT", "FIELD_BIGINT", FIELD_BIGINT.into()),
            ("MORAINE_FIELD_TIME", "FIELD_TIME", FIELD_TIME.into()),
        ]),
    );
    out.insert(
        "MoraineSettingType",
        named(&[
            (
                "MORAINE_SETTING_INTERVAL",
                "SETTING_INTERVAL",
                SETTING_INTERVAL.into(),
            ),
            ("MORAINE_SETTING_TEXT", "SETTING_TEXT", SETTING_TEXT.into()),
        ]),
    );
    out.insert(
        "MoraineOnSet",
        named(&[
            (
                "MORAINE_ON_SET_NOTHING",
                "ON_SET_NOTHING",
                ON_SET_NOTHING.into(),
            ),
            (
                "MORAINE_ON_SET_CHECK_MAX_COMMIT_SIZE",
                "ON_SET_CHECK_MAX_COMMIT_SIZE",
                ON_SET_CHECK_MAX_COMMIT_SIZE.into(),
            ),
            (
                "MORAINE_ON_SET_SET_LOG_LEVEL",
                "ON_SET_SET_LOG_LEVEL",
                ON_SET_SET_LOG_LEVEL.into(),
            ),
        ]),
    );
    out.insert(
        "MoraineOp",
        named(&[
            ("MORAINE_OP_EQ", "OP_EQ", OP_EQ.into()),
            ("MORAINE_OP_LT", "OP_LT", OP_LT.into()),
            ("MORAINE_OP_LE", "OP_LE", OP_LE.into()),
            ("MORAINE_OP_GT", "OP_GT", OP_GT.into()),
            ("MORAINE_OP_GE", "OP_GE", OP_GE.into()),
            ("MORAINE_OP_IS_NULL", "OP_IS_NULL", OP_IS_NULL.into()),
        ]),
    );
    // (the header has no #define yet; one added there needs its Rust value here)
    out
}

#[derive(Debug, PartialEq, Eq)]
struct Layout {
    size: usize,
    align: usize,
    /// (name, offset, size) in declaration order
    fields: Vec<(String, usize, usize)>,
}

const fn size_of_pointee<T>(_: *const T) -> usize {
    size_of::<T>()
}

/// A Rust struct's layout: `layout!(Type { field, ... })`, every field in declaration order.
macro_rules! layout {
    ($t:ident { $($f:ident),* $(,)? }) => {{
        let probe = std::mem::MaybeUninit::<$t>::uninit();
        let base = probe.as_ptr();
        (
            stringify!($t),
            Layout {
                size: size_of::<$t>(),
                align: align_of::<$t>(),
                // (raw pointers to the fields of an uninitialized value: nothing is read)
                fields: vec![$((
                    stringify!($f).to_string(),
                    offset_of!($t, $f),
                    size_of_pointee(unsafe { std::ptr::addr_of!((*base).$f) }),
                )),*],
            },
        )
    }};
}

/// Every `#[repr(C)]` struct of ffi.rs that the header declares.
fn rust_layouts() -> BTreeMap<&'static str, Layout> {
    [
        layout!(MoraineError {
            ptr,
            len,
            kind,
            exception
        }),
        layout!(MoraineCell {
            tag,
            i,
            f,
            ptr,
            len
        }),
        layout!(MoraineColumnIn {
            name,
            name_len,
            type_name,
            type_name_len,
            type_blob,
            type_blob_len
        }),
        layout!(MoraineOption {
            key,
            key_len,
            value,
            value_len
        }),
        layout!(MoraineSetting {
            name,
            name_len,
            description,
            description_len,
            default_value,
            default_len,
            ty,
            on_set,
            store_option,
            store_option_len
        }),
        layout!(MoraineAttachPlan {
            s3,
            read_only,
            read_write_again
        }),
        layout!(MorainePredicate {
            filter,
            clause,
            column,
            op,
            value
        }),
        layout!(MoraineIntStats {
            min,
            max,
            has_value,
            has_null
        }),
    ]
    .into_iter()
    .collect()
}

// ---- the C++ compiler's view -------------------------------------------------------------

#[repr(C)]
struct AbiConstant {
    name: *const c_char,
    value: i64,
}

#[repr(C)]
struct AbiField {
    type_name: *const c_char,
    field: *const c_char,
    offset: usize,
    size: usize,
    type_size: usize,
    type_align: usize,
}

#[link(name = "moraine_abi", kind = "static")]
extern "C" {
    fn moraine_abi_constants(out: *mut *const AbiConstant) -> usize;
    fn moraine_abi_fields(out: *mut *const AbiField) -> usize;
}

fn c_text(p: *const c_char) -> String {
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

fn cpp_constants() -> BTreeMap<String, i64> {
    let mut at = std::ptr::null();
    let n = unsafe { moraine_abi_constants(&mut at) };
    let all = unsafe { std::slice::from_raw_parts(at, n) };
    all.iter().map(|c| (c_text(c.name), c.value)).collect()
}

fn cpp_layouts() -> BTreeMap<String, Layout> {
    let mut at = std::ptr::null();
    let n = unsafe { moraine_abi_fields(&mut at) };
    let all = unsafe { std::slice::from_raw_parts(at, n) };
    let mut out: BTreeMap<String, Layout> = BTreeMap::new();
    for f in all {
        out.entry(c_text(f.type_name))
            .or_insert(Layout {
                size: f.type_size,
                align: f.type_align,
                fields: Vec::new(),
            })
            .fields
            .push((c_text(f.field), f.offset, f.size));
    }
    out
}

/// Panics listing every difference, if any.
fn report(what: &str, problems: Vec<String>) {
    assert!(
        problems.is_empty(),
        "{what}: moraine_ffi.h and Rust disagree:\n  {}",
        problems.join("\n  ")
    );
}

// ---- the checks --------------------------------------------------------------------------

#[test]
fn every_header_constant_has_rust_s_value() {
    let header = parse_header(HEADER);
    let rust = rust_constants();
    let mut problems = Vec::new();
    for (group, constants) in &header.constants {
        let Some(ours) = rust.get(group.as_str()) else {
            problems.push(format!(
                "{group} ({} constants) has no Rust counterpart in abi_tests.rs",
                constants.len()
            ));
            continue;
        };
        for (name, value) in constants {
            match ours.get(name) {
                Some((_, v)) if v == value => {}
                Some((rust_name, v)) => problems.push(format!(
                    "{group}: {name} is {value} in moraine_ffi.h but {rust_name} is {v} in Rust"
                )),
                None => problems.push(format!("{group}: {name} = {value} has no Rust value")),
            }
        }
        for (name, (rust_name, v)) in ours {
            if !constants.contains_key(name) {
                problems.push(format!(
                    "{group}: {rust_name} = {v} has no {name} in moraine_ffi.h"
                ));
            }
        }
    }
    for group in rust.keys() {
        if !header.constants.contains_key(*group) {
            problems.push(format!("enum {group} is missing from moraine_ffi.h"));
        }
    }
    report("constants", problems);
}

#[test]
fn every_rust_constant_and_kind_is_checked() {
    // every TAG_ / FIELD_ / OP_ / SETTING_ / ON_SET_ constant of ffi.rs has its header constant in rust_constants()
    let checked: Vec<String> = rust_constants()
        .values()
        .flat_map(|m| m.values().map(|(rust, _)| rust.clone()))
        .collect();
    for line in FFI_RS.lines() {
        let Some(rest) = line.strip_prefix("const ") else {
            continue;
        };
        let name = rest.split(':').next().unwrap_or("").trim();
        if ["TAG_", "FIELD_", "OP_", "SETTING_", "ON_SET_"]
            .iter()
            .any(|p| name.starts_with(p))
        {
            assert!(
                checked.iter().any(|c| c == name),
                "ffi.rs's {name} is not compared with moraine_ffi.h (add it to rust_constants)"
            );
        }
    }
    // Kind::ALL holds every variant of Kind (read from src/error.rs), Exception::ALL every one
    // of Exception (from ffi.rs), in order; none is 0 (no error)
    let kinds: Vec<(String, u32)> = Kind::ALL
        .iter()
        .map(|k| (format!("{k:?}"), *k as u32))
        .collect();
    assert_eq!(
        declared_variants(ERROR_RS, "pub enum Kind {"),
        kinds,
        "Kind::ALL must list every Kind, in order"
    );
    let exceptions: Vec<(String, u32)> = Exception::ALL
        .iter()
        .map(|e| (format!("{e:?}"), *e as u32))
        .collect();
    assert_eq!(
        declared_variants(FFI_RS, "enum Exception {"),
        exceptions,
        "Exception::ALL must list every Exception, in order"
    );
    assert!(kinds.iter().chain(&exceptions).all(|(_, v)| *v != 0));
}

/// The variants of the Rust enum `opening` starts in `source`, each `Name = <number>,` (doc
/// comments aside), with their numbers.
fn declared_variants(source: &str, opening: &str) -> Vec<(String, u32)> {
    let body = source
        .split_once(opening)
        .and_then(|(_, rest)| rest.split_once('}'))
        .unwrap_or_else(|| panic!("no `{opening} ... }}` in the source"))
        .0;
    body.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
        .map(|l| {
            let (name, value) = l
                .trim_end_matches(',')
                .split_once(" = ")
                .unwrap_or_else(|| panic!("`{opening}`: variant `{l}` without its number"));
            (name.to_string(), value.parse().expect("a variant's number"))
        })
        .collect()
}

#[test]
fn every_header_struct_has_rust_s_fields_in_order() {
    let header = parse_header(HEADER);
    let rust = rust_layouts();
    let mut problems = Vec::new();
    for (name, fields) in &header.structs {
        match rust.get(name.as_str()) {
            Some(layout) => {
                let ours: Vec<&String> = layout.fields.iter().map(|f| &f.0).collect();
                let theirs: Vec<&String> = fields.iter().collect();
                if ours != theirs {
                    problems.push(format!(
                        "{name}: fields {theirs:?} in moraine_ffi.h but {ours:?} in Rust"
                    ));
                }
            }
            None => problems.push(format!("{name} has no Rust layout in abi_tests.rs")),
        }
    }
    for name in rust.keys() {
        if !header.structs.contains_key(*name) {
            problems.push(format!("{name} is not declared in moraine_ffi.h"));
        }
    }
    // every #[repr(C)] struct of ffi.rs is here
    let mut lines = FFI_RS.lines();
    while let Some(line) = lines.next() {
        if line.trim() == "#[repr(C)]" {
            let next = lines.next().unwrap_or("");
            let name = next
                .trim()
                .trim_start_matches("pub ")
                .strip_prefix("struct ")
                .and_then(|s| s.split([' ', '{', '(']).next())
                .unwrap_or("");
            if !name.is_empty() && !rust.contains_key(name) {
                problems.push(format!("ffi.rs's #[repr(C)] {name} has no layout here"));
            }
        }
    }
    report("structs", problems);
}

#[test]
fn the_cpp_compiler_sees_rust_s_layouts_and_values() {
    let header = parse_header(HEADER);
    let mut problems = Vec::new();
    // constants: the compiler's values are the header's text's, for each constant of the header
    let cpp = cpp_constants();
    let text: BTreeMap<&String, i64> = header
        .constants
        .values()
        .flat_map(|m| m.iter().map(|(k, v)| (k, *v)))
        .collect();
    for (name, value) in &text {
        match cpp.get(*name) {
            Some(v) if v == value => {}
            Some(v) => problems.push(format!(
                "{name} reads {value} in moraine_ffi.h but the C++ compiler has {v}"
            )),
            None => problems.push(format!(
                "{name} is missing from extension/abi/moraine_abi.cpp's constants"
            )),
        }
    }
    for name in cpp.keys() {
        if !text.contains_key(name) {
            problems.push(format!(
                "moraine_abi.cpp lists {name}, which the header lacks"
            ));
        }
    }
    // layouts: the C++ compiler's, field by field, are Rust's
    let cpp = cpp_layouts();
    let rust = rust_layouts();
    for (name, fields) in &header.structs {
        let Some(theirs) = cpp.get(name) else {
            problems.push(format!(
                "{name} is missing from extension/abi/moraine_abi.cpp's fields"
            ));
            continue;
        };
        let listed: Vec<&String> = theirs.fields.iter().map(|f| &f.0).collect();
        if listed != fields.iter().collect::<Vec<_>>() {
            problems.push(format!(
                "{name}: moraine_abi.cpp lists {listed:?}, the header declares {fields:?}"
            ));
        }
        let Some(ours) = rust.get(name.as_str()) else {
            continue;
        };
        if (theirs.size, theirs.align) != (ours.size, ours.align) {
            problems.push(format!(
                "{name}: size {} align {} in C++, size {} align {} in Rust",
                theirs.size, theirs.align, ours.size, ours.align
            ));
        }
        for (field, offset, size) in &theirs.fields {
            match ours.fields.iter().find(|f| &f.0 == field) {
                Some((_, o, s)) if (o, s) == (offset, size) => {}
                Some((_, o, s)) => problems.push(format!(
                    "{name}.{field}: offset {offset} size {size} in C++, offset {o} size {s} in Rust"
                )),
                None => problems.push(format!("{name}.{field}: not a field in Rust")),
            }
        }
    }
    for name in cpp.keys() {
        if !header.structs.contains_key(name) {
            problems.push(format!(
                "moraine_abi.cpp lists {name}, which the header lacks"
            ));
        }
    }
    report("the C++ compiler's view", problems);
}

#[test]
fn the_parser_reads_what_it_is_given_or_refuses() {
    let header = parse_header(
        "#define MORAINE_X 0x10\n\
         enum E { A = 1, // one\n B = -2 /* two */ };\n\
         typedef struct T { const uint8_t *p; size_t n; } T;\n\
         typedef struct Opaque Opaque;\n\
         void f(struct Opaque *o);\n",
    );
    assert_eq!(header.constants["#define"]["MORAINE_X"], 16);
    assert_eq!(header.constants["E"]["A"], 1);
    assert_eq!(header.constants["E"]["B"], -2);
    assert_eq!(header.structs["T"], vec!["p".to_string(), "n".to_string()]);
    assert_eq!(header.structs.len(), 1);
    for refused in [
        "enum E { A, B = 2 };",
        "enum E { A = 1 << 2 };",
        "#define X (1 << 2)",
        "typedef struct { int a, b; } T;",
        "typedef struct { int a[2]; } T;",
        "typedef struct { void (*cb)(void); } T;",
        "struct T { int a; };",
    ] {
        let caught = std::panic::catch_unwind(|| parse_header(refused));
        assert!(caught.is_err(), "parsed without complaint: {refused}");
    }
}
