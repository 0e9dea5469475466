// Marshalling between DuckDB values and moraine cells. Types the Rust core interprets
// (integers, booleans, floats, text) travel as themselves; every other type travels as
// a DuckDB-serialized Value the core stores opaquely.
#include "moraine_catalog.hpp"

#include "duckdb/common/serializer/binary_deserializer.hpp"
#include "duckdb/common/serializer/binary_serializer.hpp"
#include "duckdb/common/serializer/memory_stream.hpp"

namespace duckdb {

string MoraineTakeError(MoraineError &err) {
	string message = err.ptr ? string(err.ptr, err.len) : string("unknown moraine error");
	moraine_error_free(err);
	err.ptr = nullptr;
	err.len = 0;
	return message;
}

void MoraineThrow(MoraineError &err) {
	auto kind = err.kind;
	auto message = MoraineTakeError(err);
	// The kind decides the type; DuckLake's retry reads only the message, which the core words
	// for exactly the retryable kinds.
	switch (kind) {
	case MORAINE_ERROR_CONFLICT:
		throw TransactionException(message);
	case MORAINE_ERROR_DUPLICATE:
	case MORAINE_ERROR_CONSTRAINT:
		throw ConstraintException(message);
	case MORAINE_ERROR_CATALOG:
		throw CatalogException(message);
	case MORAINE_ERROR_READ_ONLY:
		throw PermissionException(message);
	case MORAINE_ERROR_IO:
	case MORAINE_ERROR_OUTCOME_UNKNOWN:
	case MORAINE_ERROR_FENCED:
	case MORAINE_ERROR_CORRUPT:
		throw IOException(message);
	case MORAINE_ERROR_INTERNAL:
		// not DuckDB's InternalException, which invalidates the whole database instance: the
		// failure is confined to this transaction, which can only roll back
		throw TransactionException(message);
	case MORAINE_ERROR_INVALID_INPUT:
	default:
		throw InvalidInputException(message);
	}
}

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

void MoraineWriteCell(Vector &vector, idx_t row, const MoraineCell &cell) {
	auto &type = vector.GetType();
	if (cell.tag == MORAINE_NULL) {
		FlatVector::SetNull(vector, row, true);
		return;
	}
	if (cell.tag == MORAINE_BLOB) {
		vector.SetValue(row, DeserializeValue(cell.ptr, cell.len));
		return;
	}
	switch (type.id()) {
	case LogicalTypeId::TINYINT:
		return SetFlat<int8_t>(vector, row, NumericCast<int8_t>(cell.i));
	case LogicalTypeId::SMALLINT:
		return SetFlat<int16_t>(vector, row, NumericCast<int16_t>(cell.i));
	case LogicalTypeId::INTEGER:
		return SetFlat<int32_t>(vector, row, NumericCast<int32_t>(cell.i));
	case LogicalTypeId::BIGINT:
		return SetFlat<int64_t>(vector, row, cell.i);
	case LogicalTypeId::UTINYINT:
		return SetFlat<uint8_t>(vector, row, NumericCast<uint8_t>(cell.i));
	case LogicalTypeId::USMALLINT:
		return SetFlat<uint16_t>(vector, row, NumericCast<uint16_t>(cell.i));
	case LogicalTypeId::UINTEGER:
		return SetFlat<uint32_t>(vector, row, NumericCast<uint32_t>(cell.i));
	case LogicalTypeId::BOOLEAN:
		return SetFlat<bool>(vector, row, cell.i != 0);
	case LogicalTypeId::FLOAT:
		return SetFlat<float>(vector, row, static_cast<float>(cell.f));
	case LogicalTypeId::DOUBLE:
		return SetFlat<double>(vector, row, cell.f);
	case LogicalTypeId::VARCHAR:
		FlatVector::GetData<string_t>(vector)[row] =
		    StringVector::AddString(vector, const_char_ptr_cast(cell.ptr), cell.len);
		return;
	default:
		throw InternalException("moraine: stored cell does not match column type %s", type.ToString());
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
