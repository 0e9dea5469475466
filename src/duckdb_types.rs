//! How moraine holds a value of each DuckDB type, named by its `LogicalTypeId`: the integer,
//! boolean, float and text types as cells the core interprets (an index serves integer columns;
//! filters compare them), every other type (and an aliased VARCHAR) as the value DuckDB
//! serialized, stored opaquely. And whether a stored cell fits the type of the column a scan
//! writes it into: a cell that does not is a corrupt record, never a DuckDB internal error.

/// The kind of cell moraine holds a type's values as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    Int,
    Bool,
    Float,
    Text,
    /// DuckDB's serialized value.
    Serialized,
}

/// DuckDB's `LogicalTypeId`s the core interprets (duckdb/common/types.hpp, v1.5.5).
pub const BOOLEAN: u8 = 10;
pub const TINYINT: u8 = 11;
pub const SMALLINT: u8 = 12;
pub const INTEGER: u8 = 13;
pub const BIGINT: u8 = 14;
pub const DATE: u8 = 15;
pub const TIME: u8 = 16;
pub const TIMESTAMP: u8 = 19;
pub const FLOAT: u8 = 22;
pub const DOUBLE: u8 = 23;
pub const VARCHAR: u8 = 25;
pub const UTINYINT: u8 = 28;
pub const USMALLINT: u8 = 29;
pub const UINTEGER: u8 = 30;
pub const BLOB: u8 = 26;
pub const TIMESTAMP_TZ: u8 = 32;
pub const UUID: u8 = 54;

/// How values of the type `type_id` (with an alias, `has_alias`) are held.
pub fn held(type_id: u8, has_alias: bool) -> Held {
    match type_id {
        TINYINT | SMALLINT | INTEGER | BIGINT | UTINYINT | USMALLINT | UINTEGER => Held::Int,
        BOOLEAN => Held::Bool,
        FLOAT | DOUBLE => Held::Float,
        VARCHAR if !has_alias => Held::Text,
        _ => Held::Serialized,
    }
}

/// The range of the integer type `type_id`; `None` for a type not held as integers.
fn range(type_id: u8) -> Option<(i64, i64)> {
    Some(match type_id {
        TINYINT => (i8::MIN.into(), i8::MAX.into()),
        SMALLINT => (i16::MIN.into(), i16::MAX.into()),
        INTEGER => (i32::MIN.into(), i32::MAX.into()),
        BIGINT => (i64::MIN, i64::MAX),
        UTINYINT => (0, u8::MAX.into()),
        USMALLINT => (0, u16::MAX.into()),
        UINTEGER => (0, u32::MAX.into()),
        _ => return None,
    })
}

/// Whether a non-NULL stored cell held as `cell` (with payload `i` for an integer or boolean,
/// `f` for a float) fits a column of type `type_id`: the kind the type is held as, an integer in
/// the type's range, a boolean of 0 or 1, a FLOAT's value within a float's range (or not
/// finite). A serialized value fits here; DuckDB's deserializer has the last word on it.
pub fn fits(type_id: u8, has_alias: bool, cell: Held, i: i64, f: f64) -> bool {
    if held(type_id, has_alias) != cell {
        return false;
    }
    match cell {
        Held::Int => range(type_id).is_some_and(|(lo, hi)| (lo..=hi).contains(&i)),
        Held::Bool => i == 0 || i == 1,
        Held::Float => type_id == DOUBLE || !f.is_finite() || f.abs() <= f64::from(f32::MAX),
        Held::Text | Held::Serialized => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_type_is_held_as_its_kind() {
        for id in [
            TINYINT, SMALLINT, INTEGER, BIGINT, UTINYINT, USMALLINT, UINTEGER,
        ] {
            assert_eq!(held(id, false), Held::Int, "type {id}");
        }
        assert_eq!(held(BOOLEAN, false), Held::Bool);
        assert_eq!(held(FLOAT, false), Held::Float);
        assert_eq!(held(DOUBLE, false), Held::Float);
        assert_eq!(held(VARCHAR, false), Held::Text);
        // an aliased VARCHAR (e.g. JSON) keeps its alias only in DuckDB's serialized value
        assert_eq!(held(VARCHAR, true), Held::Serialized);
        // UBIGINT does not fit an i64; DATE, TIMESTAMP WITH TIME ZONE, DECIMAL, UUID, ...
        for id in [31, 15, 32, 21, 54] {
            assert_eq!(held(id, false), Held::Serialized, "type {id}");
        }
    }

    #[test]
    fn a_cell_fits_its_type_only_in_kind_and_range() {
        assert!(fits(TINYINT, false, Held::Int, -128, 0.0));
        assert!(!fits(TINYINT, false, Held::Int, 128, 0.0));
        assert!(fits(UTINYINT, false, Held::Int, 255, 0.0));
        assert!(!fits(UTINYINT, false, Held::Int, -1, 0.0));
        assert!(!fits(USMALLINT, false, Held::Int, 65_536, 0.0));
        assert!(fits(UINTEGER, false, Held::Int, 4_294_967_295, 0.0));
        assert!(!fits(INTEGER, false, Held::Int, 2_147_483_648, 0.0));
        assert!(fits(BIGINT, false, Held::Int, i64::MIN, 0.0));
        assert!(fits(BOOLEAN, false, Held::Bool, 1, 0.0));
        assert!(!fits(BOOLEAN, false, Held::Bool, 2, 0.0));
        assert!(!fits(BIGINT, false, Held::Text, 0, 0.0));
        assert!(!fits(VARCHAR, false, Held::Int, 1, 0.0));
        assert!(fits(DOUBLE, false, Held::Float, 0, 0.0));
        assert!(fits(DOUBLE, false, Held::Float, 0, 1e300));
        assert!(fits(FLOAT, false, Held::Float, 0, 3.0e38));
        assert!(!fits(FLOAT, false, Held::Float, 0, 1e300));
        assert!(fits(FLOAT, false, Held::Float, 0, f64::INFINITY));
        assert!(!fits(VARCHAR, true, Held::Text, 0, 0.0));
        assert!(fits(VARCHAR, true, Held::Serialized, 0, 0.0));
    }
}
