// Rust errors thrown as DuckDB exceptions, and callbacks that keep what they catch.
#pragma once

#include "duckdb.hpp"
#include "moraine_ffi.h"

namespace duckdb {

//! Throws a DuckDB exception carrying a Rust error (and frees it).
[[noreturn]] void MoraineThrow(MoraineError &err);
//! Throws the error a moraine_* call set when it returned nonzero.
inline void MoraineCheck(int32_t rc, MoraineError &err) {
	if (rc != 0) {
		MoraineThrow(err);
	}
}
//! Frees the Rust error and returns its message.
string MoraineTakeError(MoraineError &err);

//! What a callback Rust calls collects, and the first exception it caught: no exception may
//! leave a callback while Rust is on the stack, so each keeps it here and the C++ caller
//! rethrows it (MoraineRethrow) once the moraine_* call has returned.
struct MoraineCallbackState {
	std::exception_ptr caught;
};
//! Runs a callback's body; an exception is kept in `state` and later calls do nothing.
template <class F>
void MoraineCallback(MoraineCallbackState &state, F &&body) noexcept {
	if (state.caught) {
		return;
	}
	try {
		body();
	} catch (...) {
		state.caught = std::current_exception();
	}
}
//! Rethrows what a callback caught, if anything.
inline void MoraineRethrow(MoraineCallbackState &state) {
	if (state.caught) {
		std::rethrow_exception(state.caught);
	}
}

} // namespace duckdb
