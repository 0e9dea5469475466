// Marshalling between DuckDB values and moraine cells. Types the Rust core interprets
// (integers, booleans, floats, text) travel as themselves; every other type travels as
// a DuckDB-serialized Value the core stores opaquely.
#include "moraine_cells.hpp"

#include "duckdb/common/serializer/binary_deserializer.hpp"
#include "duckdb/common/serializer/binary_serializer.hpp"
#include "duckdb/common/serializer/memory_stream.hpp"

namespace duckdb {

// the type ids Rust names (src/duckdb_types.rs, through moraine_ffi.h) are DuckDB's
#define MORAINE_SAME_TYPE_ID(NAME)                                                                                     \
	static_assert(uint8_t(LogicalTypeId::NAME) == MORAINE_TYPE_##NAME, "LogicalTypeId::" #NAME);
MORAINE_SAME_TYPE_ID(BOOLEAN)
MORAINE_SAME_TYPE_ID(TINYINT)
MORAINE_SAME_TYPE_ID(SMALLINT)
MORAINE_SAME_TYPE_ID(INTEGER)
MORAINE_SAME_TYPE_ID(BIGINT)
MORAINE_SAME_TYPE_ID(FLOAT)
MORAINE_SAME_TYPE_ID(DOUBLE)
MORAINE_SAME_TYPE_ID(VARCHAR)
MORAINE_SAME_TYPE_ID(UTINYINT)
MORAINE_SAME_TYPE_ID(USMALLINT)
MORAINE_SAME_TYPE_ID(UINTEGER)
MORAINE_SAME_TYPE_ID(TIMESTAMP_TZ)
MORAINE_SAME_TYPE_ID(UUID)
MORAINE_SAME_TYPE_ID(BLOB)
MORAINE_SAME_TYPE_ID(DATE)
MORAINE_SAME_TYPE_ID(TIME)
MORAINE_SAME_TYPE_ID(TIMESTAMP)

bool MoraineHeldAsInteger(const LogicalType &type) {
	return moraine_type_tag(uint8_t(type.id()), type.HasAlias()) == MORAINE_INT;
}

//! A DuckDB Value or LogicalType as DuckDB's BinarySerializer writes it, and back.
template <class T>
static string Serialize(const T &object) {
	MemoryStream stream;
	BinarySerializer serializer(stream);
	serializer.Begin();
	object.Serialize(serializer);
	serializer.End();
	return string(const_char_ptr_cast(stream.GetData()), stream.GetPosition());
}

template <class T>
static T Deserialize(const uint8_t *data, size_t len) {
	MemoryStream stream(const_cast<data_ptr_t>(data), len);
	BinaryDeserializer deserializer(stream);
	deserializer.Begin();
	auto object = T::Deserialize(deserializer);
	deserializer.End();
	return object;
}

string MoraineSerializeType(const LogicalType &type) {
	return Serialize(type);
}

LogicalType MoraineDeserializeType(const uint8_t *data, size_t len) {
	return Deserialize<LogicalType>(data, len);
}

void MoraineValueToCell(const Value &value, const LogicalType &type, MoraineCell &cell, string &scratch) {
	cell = MoraineCell {MORAINE_NULL, 0, 0, nullptr, 0};
	if (value.IsNull()) {
		return;
	}
	// the cell the type crosses as: Rust says (src/duckdb_types.rs)
	cell.tag = moraine_type_tag(uint8_t(type.id()), type.HasAlias());
	switch (cell.tag) {
	case MORAINE_INT:
		cell.i = value.GetValue<int64_t>();
		return;
	case MORAINE_BOOL:
		cell.i = value.GetValue<bool>() ? 1 : 0;
		return;
	case MORAINE_FLOAT:
		cell.f = value.GetValue<double>();
		return;
	case MORAINE_TEXT:
		scratch = StringValue::Get(value);
		break;
	default:
		scratch = Serialize(value);
	}
	cell.ptr = const_data_ptr_cast(scratch.data());
	cell.len = scratch.size();
}

bool MoraineWriteCell(Vector &vector, idx_t row, const MoraineCell &cell, string &why) {
	auto &type = vector.GetType();
	if (cell.tag == MORAINE_NULL) {
		FlatVector::SetNull(vector, row, true);
		return true;
	}
	// a cell of the kind the type crosses as, and a value the type holds: Rust says
	if (!moraine_cell_fits(uint8_t(type.id()), type.HasAlias(), &cell)) {
		return false;
	}
	switch (cell.tag) {
	case MORAINE_TEXT:
		FlatVector::GetData<string_t>(vector)[row] =
		    StringVector::AddString(vector, const_char_ptr_cast(cell.ptr), cell.len);
		return true;
	case MORAINE_BLOB:
		break;
	default:
		// (cast to the column's type by DuckDB, within the range Rust checked)
		vector.SetValue(row, cell.tag == MORAINE_FLOAT  ? Value::DOUBLE(cell.f)
		                     : cell.tag == MORAINE_BOOL ? Value::BOOLEAN(cell.i != 0)
		                                                : Value::BIGINT(cell.i));
		return true;
	}
	// stored bytes: whatever DuckDB throws reading or converting them is about them
	Value value;
	try {
		value = Deserialize<Value>(cell.ptr, cell.len);
	} catch (std::exception &ex) {
		why = "does not deserialize (" + ErrorData(ex).RawMessage() + ")";
		return false;
	}
	try {
		vector.SetValue(row, value);
	} catch (std::exception &ex) {
		why = "is a " + value.type().ToString() + " that does not convert (" + ErrorData(ex).RawMessage() + ")";
		return false;
	}
	return true;
}

void MoraineAppendChunk(MoraineRows *rows, DataChunk &chunk) {
	string scratch;
	MoraineCell cell;
	for (idx_t r = 0; r < chunk.size(); r++) {
		for (idx_t c = 0; c < chunk.ColumnCount(); c++) {
			auto &vector = chunk.data[c];
			MoraineValueToCell(vector.GetValue(r), vector.GetType(), cell, scratch);
			moraine_rows_push(rows, &cell);
		}
	}
}

} // namespace duckdb
