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
	auto exception = err.exception;
	auto message = MoraineTakeError(err);
	// Rust chose the type (Exception::for_kind in ffi.rs); DuckLake's retry reads only the
	// message, which the core words for exactly the retryable kinds.
	switch (exception) {
	case MORAINE_EXCEPTION_TRANSACTION:
		throw TransactionException(message);
	case MORAINE_EXCEPTION_CONSTRAINT:
		throw ConstraintException(message);
	case MORAINE_EXCEPTION_CATALOG:
		throw CatalogException(message);
	case MORAINE_EXCEPTION_PERMISSION:
		throw PermissionException(message);
	case MORAINE_EXCEPTION_IO:
		throw IOException(message);
	case MORAINE_EXCEPTION_CONNECTION:
		throw ConnectionException(message);
	case MORAINE_EXCEPTION_INVALID_INPUT:
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

//! A serialized Value (SerializeValue) of a type that has no extra type info and is held as a
//! 32- or 64-bit integer (DATE, TIME, the TIMESTAMPs, ...), read straight from its bytes into
//! `vector`: building a BinaryDeserializer and a Value per cell costs more than the rest of the
//! scan's row (every snapshot row's snapshot_time is one). Only the layout DuckDB's
//! BinarySerializer writes for such a value is accepted:
//!   field 100 (type) { field 100 (id): LEB128 id, end }, field 101 (is_null): 0,
//!   field 102 (value): signed LEB128, end
//! where a field is its id as two little-endian bytes and `end` is 0xFFFF. Anything else
//! (another type, a type with extra info, a null) returns false and takes the general path.
static bool WriteSerializedInteger(Vector &vector, idx_t row, const uint8_t *p, size_t len) {
	auto &type = vector.GetType();
	auto physical = type.InternalType();
	if ((physical != PhysicalType::INT64 && physical != PhysicalType::INT32) || type.AuxInfo()) {
		return false;
	}
	auto end = p + len;
	auto expect = [&](uint8_t lo, uint8_t hi) {
		if (end - p < 2 || p[0] != lo || p[1] != hi) {
			return false;
		}
		p += 2;
		return true;
	};
	// field 100, the type: its field 100, the id (one LEB128 byte: every id is below 128)
	if (!expect(100, 0) || !expect(100, 0) || p == end || (*p & 0x80) ||
	    *p != static_cast<uint8_t>(type.id())) {
		return false;
	}
	p++;
	// the type's end (no field 101: no extra type info), is_null = false, then the value
	if (!expect(0xFF, 0xFF) || !expect(101, 0) || p == end || *p != 0) {
		return false;
	}
	p++;
	if (!expect(102, 0)) {
		return false;
	}
	uint64_t bits = 0;
	idx_t shift = 0;
	uint8_t byte;
	do {
		if (p == end || shift >= 64) {
			return false;
		}
		byte = *p++;
		bits |= static_cast<uint64_t>(byte & 0x7F) << shift;
		shift += 7;
	} while (byte & 0x80);
	if (shift < 64 && (byte & 0x40)) {
		bits |= ~uint64_t(0) << shift; // sign extension
	}
	if (!expect(0xFF, 0xFF) || p != end) {
		return false;
	}
	auto value = static_cast<int64_t>(bits);
	if (physical == PhysicalType::INT64) {
		SetFlat<int64_t>(vector, row, value);
		return true;
	}
	if (value < NumericLimits<int32_t>::Minimum() || value > NumericLimits<int32_t>::Maximum()) {
		return false;
	}
	SetFlat<int32_t>(vector, row, static_cast<int32_t>(value));
	return true;
}

bool MoraineWriteCell(Vector &vector, idx_t row, const MoraineCell &cell, string &why) {
	auto &type = vector.GetType();
	if (cell.tag == MORAINE_NULL) {
		FlatVector::SetNull(vector, row, true);
		return true;
	}
	if (cell.tag == MORAINE_BLOB) {
		if (WriteSerializedInteger(vector, row, cell.ptr, cell.len)) {
			return true;
		}
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
