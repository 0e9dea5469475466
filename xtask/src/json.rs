//! A small JSON reader for what xtask's Python helpers print: one value per line, from
//! `json.dumps` (bench.py's figures, `python -m slt.dump`'s records).
//!
//! It reads all of JSON, plus the `NaN`, `Infinity` and `-Infinity` that Python's `json.dumps`
//! writes for such floats by default. Objects keep their keys in order.

#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    /// The value under `key`, if this is an object that has it.
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Obj(kv) => kv.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Json::Num(v) => Some(*v),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Json]> {
        match self {
            Json::Arr(v) => Some(v),
            _ => None,
        }
    }
}

/// Parses one JSON value; anything but whitespace after it is an error.
pub fn parse(s: &str) -> Result<Json, String> {
    let mut r = Reader {
        b: s.chars().collect(),
        i: 0,
    };
    let v = r.value(0)?;
    r.ws();
    if r.i < r.b.len() {
        return Err(format!("trailing characters at {}", r.i));
    }
    Ok(v)
}

/// Nesting deeper than this is refused rather than risking the stack.
const MAX_DEPTH: usize = 128;

struct Reader {
    b: Vec<char>,
    i: usize,
}

impl Reader {
    fn ws(&mut self) {
        while self.i < self.b.len() && self.b[self.i].is_whitespace() {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<char> {
        self.b.get(self.i).copied()
    }

    fn expect(&mut self, c: char) -> Result<(), String> {
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(format!("expected {c:?} at {}", self.i))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json, String> {
        if depth > MAX_DEPTH {
            return Err(format!("nested deeper than {MAX_DEPTH}"));
        }
        self.ws();
        match self.peek() {
            None => Err("unexpected end".into()),
            Some('"') => Ok(Json::Str(self.string()?)),
            Some('[') => {
                self.i += 1;
                let mut out = Vec::new();
                self.ws();
                if self.peek() == Some(']') {
                    self.i += 1;
                    return Ok(Json::Arr(out));
                }
                loop {
                    out.push(self.value(depth + 1)?);
                    self.ws();
                    match self.peek() {
                        Some(',') => self.i += 1,
                        Some(']') => {
                            self.i += 1;
                            return Ok(Json::Arr(out));
                        }
                        _ => return Err(format!("expected ',' or ']' at {}", self.i)),
                    }
                }
            }
            Some('{') => {
                self.i += 1;
                let mut out = Vec::new();
                self.ws();
                if self.peek() == Some('}') {
                    self.i += 1;
                    return Ok(Json::Obj(out));
                }
                loop {
                    self.ws();
                    let key = self.string()?;
                    self.ws();
                    self.expect(':')?;
                    let v = self.value(depth + 1)?;
                    out.push((key, v));
                    self.ws();
                    match self.peek() {
                        Some(',') => self.i += 1,
                        Some('}') => {
                            self.i += 1;
                            return Ok(Json::Obj(out));
                        }
                        _ => return Err(format!("expected ',' or '}}' at {}", self.i)),
                    }
                }
            }
            Some(_) => {
                let start = self.i;
                while self.i < self.b.len()
                    && !matches!(self.b[self.i], ',' | '}' | ']')
                    && !self.b[self.i].is_whitespace()
                {
                    self.i += 1;
                }
                let word: String = self.b[start..self.i].iter().collect();
                Ok(match word.as_str() {
                    "true" => Json::Bool(true),
                    "false" => Json::Bool(false),
                    "null" => Json::Null,
                    "NaN" => Json::Num(f64::NAN),
                    "Infinity" => Json::Num(f64::INFINITY),
                    "-Infinity" => Json::Num(f64::NEG_INFINITY),
                    w if w.starts_with(|c: char| c == '-' || c.is_ascii_digit()) => {
                        Json::Num(w.parse().map_err(|_| format!("bad value {w:?}"))?)
                    }
                    w => return Err(format!("bad value {w:?}")),
                })
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let h: String = self
            .b
            .get(self.i..self.i + 4)
            .ok_or("short \\u escape")?
            .iter()
            .collect();
        self.i += 4;
        u32::from_str_radix(&h, 16).map_err(|e| format!("bad \\u escape {h:?}: {e}"))
    }

    fn string(&mut self) -> Result<String, String> {
        self.expect('"')?;
        let mut out = String::new();
        loop {
            let c = self.peek().ok_or("unterminated string")?;
            self.i += 1;
            match c {
                '"' => return Ok(out),
                '\\' => {
                    let e = self.peek().ok_or("unterminated escape")?;
                    self.i += 1;
                    match e {
                        '"' | '\\' | '/' => out.push(e),
                        'b' => out.push('\u{8}'),
                        'f' => out.push('\u{c}'),
                        'n' => out.push('\n'),
                        'r' => out.push('\r'),
                        't' => out.push('\t'),
                        'u' => {
                            let mut cp = self.hex4()?;
                            // a surrogate pair, as json.dumps writes non-BMP characters
                            if (0xD800..0xDC00).contains(&cp)
                                && self.peek() == Some('\\')
                                && self.b.get(self.i + 1) == Some(&'u')
                            {
                                self.i += 2;
                                let lo = self.hex4()?;
                                cp = 0x10000
                                    + ((cp - 0xD800) << 10)
                                    + (lo.wrapping_sub(0xDC00) & 0x3FF);
                            }
                            out.push(char::from_u32(cp).unwrap_or('\u{FFFD}'));
                        }
                        other => return Err(format!("bad escape \\{other}")),
                    }
                }
                c => out.push(c),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_including_pythons_non_finite_floats() {
        let v =
            parse(r#"{"a": true, "b": false, "c": -2, "d": NaN, "e": null, "f": 1.5e3}"#).unwrap();
        assert_eq!(v.get("a"), Some(&Json::Bool(true)));
        assert_eq!(v.get("b"), Some(&Json::Bool(false)));
        assert_eq!(v.get("c").and_then(Json::as_f64), Some(-2.0));
        assert!(v.get("d").and_then(Json::as_f64).unwrap().is_nan());
        assert_eq!(v.get("e"), Some(&Json::Null));
        assert_eq!(v.get("f").and_then(Json::as_f64), Some(1500.0));
        assert_eq!(parse("-Infinity").unwrap(), Json::Num(f64::NEG_INFINITY));
        assert_eq!(parse(" {} ").unwrap(), Json::Obj(vec![]));
    }

    #[test]
    fn nested_values_and_escapes() {
        let v = parse(r#"{"k": [1, [], {"x": "a\tb\n\"\\\/"}, "\u00e9\ud83e\udd86"], "z": {}}"#)
            .unwrap();
        let Some(Json::Arr(k)) = v.get("k") else {
            panic!("{v:?}")
        };
        assert_eq!(k.len(), 4);
        assert_eq!(k[1], Json::Arr(vec![]));
        assert_eq!(k[2].get("x").and_then(Json::as_str), Some("a\tb\n\"\\/"));
        assert_eq!(k[3].as_str(), Some("é🦆"));
        // keys keep their order
        match &v {
            Json::Obj(kv) => assert_eq!(kv[0].0, "k"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn malformed_input_is_an_error() {
        for bad in [
            "",
            "{",
            r#"{"a": 1"#,
            r#"{"a" 1}"#,
            r#"{"a": 1,}"#,
            "[1 2]",
            r#""open"#,
            r#""\q""#,
            "nope",
            "{} x",
            "Traceback (most recent call last):",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        let deep = "[".repeat(MAX_DEPTH + 2) + &"]".repeat(MAX_DEPTH + 2);
        assert!(parse(&deep).is_err());
    }
}
