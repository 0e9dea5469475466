// Marshalling between DuckDB values and moraine cells. Types the Rust core interprets
// (integers, booleans, floats, text) travel as themselves; every other type travels as
// a DuckDB-serialized Value the core stores opaquely.
#include "moraine_cells.hpp"

#include "duckdb/common/serializer/binary_deserializer.hpp"
#include "duckdb/common/serializer/binary_serializer.hpp"
#include "duckdb/common/serializer/memory_stream.hpp"

namespace duckdb {

enum class CellKind { INT, BOOL, FLOAT, TEXT, BLOB };

static CellKind KindOf(const LogicalType &type) {
	switch (type.id()) {
	case LogicalTypeId::TINYINT:
	case LogicalTypeId::SMALLINT:
	case LogicalTypeId::INTEGER:
	case LogicalTypeId::BIGINT:
	case LogicalTypeId::UTINYINT:
	case LogicalTypeId::USMALLINT:
	case LogicalTypeId::UINTEGER:
		return CellKind::INT;
	case LogicalTypeId::BOOLEAN:
		return CellKind::BOOL;
	case LogicalTypeId::FLOAT:
	case LogicalTypeId::DOUBLE:
		return CellKind::FLOAT;
	case LogicalTypeId::VARCHAR:
		return type.HasAlias() ? CellKind::BLOB : CellKind::TEXT;
	default:
		return CellKind::BLOB;
	}
}

bool MoraineHeldAsInteger(const LogicalType &type) {
	return KindOf(type) == CellKind::INT;
}

static string SerializeValue(const Value &value) {
	MemoryStream stream;
	BinarySerializer serializer(stream);
	serializer.Begin();
	value.Serialize(serializer);
	serializer.End();
	return string(const_char_ptr_cast(stream.GetData()), stream.GetPosition());
}

static Value DeserializeValue(const uint8_t *data, size_t len) {
	MemoryStream stream(const_cast<data_ptr_t>(data), len);
	BinaryDeserializer deserializer(stream);
	deserializer.Begin();
	auto value = Value::Deserialize(deserializer);
	deserializer.End();
	return value;
}

string MoraineSerializeType(const LogicalType &type) {
	MemoryStream stream;
	BinarySerializer serializer(stream);
	serializer.Begin();
	type.Serialize(serializer);
	serializer.End();
	return string(const_char_ptr_cast(stream.GetData()), stream.GetPosition());
}

LogicalType MoraineDeserializeType(const uint8_t *data, size_t len) {
	MemoryStream stream(const_cast<data_ptr_t>(data), len);
	BinaryDeserializer deserializer(stream);
	deserializer.Begin();
	auto type = LogicalType::Deserialize(deserializer);
	deserializer.End();
	return type;
}

void MoraineValueToCell(const Value &value, const LogicalType &type, MoraineCell &cell, string &scratch) {
	cell = MoraineCell {MORAINE_NULL, 0, 0, nullptr, 0};
	if (value.IsNull()) {
		return;
	}
	switch (KindOf(type)) {
	case CellKind::INT:
		cell.tag = MORAINE_INT;
		cell.i = value.GetValue<int64_t>();
		return;
	case CellKind::BOOL:
		cell.tag = MORAINE_BOOL;
		cell.i = value.GetValue<bool>() ? 1 : 0;
		return;
	case CellKind::FLOAT:
		cell.tag = MORAINE_FLOAT;
		cell.f = value.GetValue<double>();
		return;
	case CellKind::TEXT:
		cell.tag = MORAINE_TEXT;
		scratch = StringValue::Get(value);
		break;
	case CellKind::BLOB:
		cell.tag = MORAINE_BLOB;
		scratch = SerializeValue(value);
		break;
	}
	cell.ptr = const_data_ptr_cast(scratch.data());
	cell.len = scratch.size();
}

template <class T>
static void SetFlat(Vector &vector, idx_t row, T value) {
	FlatVector::GetData<T>(vector)[row] = value;
}

//! An integer cell into a column of integer type T; false when T cannot hold it.
template <class T>
static bool SetInteger(Vector &vector, idx_t row, int64_t value) {
	if (value < static_cast<int64_t>(NumericLimits<T>::Minimum()) ||
	    value > static_cast<int64_t>(NumericLimits<T>::Maximum())) {
		return false;
	}
	SetFlat<T>(vector, row, static_cast<T>(value));
	return true;
}

bool MoraineWriteCell(Vector &vector, idx_t row, const MoraineCell &cell, string &why) {
	auto &type = vector.GetType();
	if (cell.tag == MORAINE_NULL) {
		FlatVector::SetNull(vector, row, true);
		return true;
	}
	if (cell.tag == MORAINE_BLOB) {
		// stored bytes: whatever DuckDB throws reading or converting them is about them
		Value value;
		try {
			value = DeserializeValue(cell.ptr, cell.len);
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
	// a cell of the kind MoraineValueToCell makes for the type, and a value the type holds
	switch (type.id()) {
	case LogicalTypeId::TINYINT:
		return cell.tag == MORAINE_INT && SetInteger<int8_t>(vector, row, cell.i);
	case LogicalTypeId::SMALLINT:
		return cell.tag == MORAINE_INT && SetInteger<int16_t>(vector, row, cell.i);
	case LogicalTypeId::INTEGER:
		return cell.tag == MORAINE_INT && SetInteger<int32_t>(vector, row, cell.i);
	case LogicalTypeId::BIGINT:
		return cell.tag == MORAINE_INT && SetInteger<int64_t>(vector, row, cell.i);
	case LogicalTypeId::UTINYINT:
		return cell.tag == MORAINE_INT && SetInteger<uint8_t>(vector, row, cell.i);
	case LogicalTypeId::USMALLINT:
		return cell.tag == MORAINE_INT && SetInteger<uint16_t>(vector, row, cell.i);
	case LogicalTypeId::UINTEGER:
		return cell.tag == MORAINE_INT && SetInteger<uint32_t>(vector, row, cell.i);
	case LogicalTypeId::BOOLEAN:
		if (cell.tag != MORAINE_BOOL || (cell.i != 0 && cell.i != 1)) {
			return false;
		}
		SetFlat<bool>(vector, row, cell.i != 0);
		return true;
	case LogicalTypeId::FLOAT:
		if (cell.tag != MORAINE_FLOAT) {
			return false;
		}
		SetFlat<float>(vector, row, static_cast<float>(cell.f));
		return true;
	case LogicalTypeId::DOUBLE:
		if (cell.tag != MORAINE_FLOAT) {
			return false;
		}
		SetFlat<double>(vector, row, cell.f);
		return true;
	case LogicalTypeId::VARCHAR:
		if (cell.tag != MORAINE_TEXT) {
			return false;
		}
		FlatVector::GetData<string_t>(vector)[row] =
		    StringVector::AddString(vector, const_char_ptr_cast(cell.ptr), cell.len);
		return true;
	default:
		return false;
	}
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
