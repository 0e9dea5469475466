// Marshalling between DuckDB values and moraine cells (moraine_cells.cpp).
#pragma once

#include "duckdb.hpp"
#include "moraine_ffi.h"

namespace duckdb {

//! Converts one DuckDB value to a cell; `scratch` owns any bytes the cell points at.
void MoraineValueToCell(const Value &value, const LogicalType &type, MoraineCell &cell, string &scratch);
//! Writes one cell into row `row` of a flat vector. False, writing nothing, when the cell does
//! not fit the vector's type (a cell of another kind, an integer the type cannot hold, stored
//! bytes that do not deserialize or convert; `why` then says what failed, or is left empty):
//! the caller reports it through moraine_mat_misfit, never as an InternalException.
bool MoraineWriteCell(Vector &vector, idx_t row, const MoraineCell &cell, string &why);
//! Whether moraine holds values of this type as integer cells (the only columns an index serves).
bool MoraineHeldAsInteger(const LogicalType &type);
string MoraineSerializeType(const LogicalType &type);
LogicalType MoraineDeserializeType(const uint8_t *data, size_t len);
//! Pushes every row of `chunk` (columns in order) into `rows`.
void MoraineAppendChunk(MoraineRows *rows, DataChunk &chunk);

} // namespace duckdb
