// Rust errors thrown as DuckDB exceptions: Rust chose the exception type (ffi.rs).
#include "moraine_error.hpp"

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

} // namespace duckdb
