// One open store, shared by a catalog and the calls that outlive its DETACH.
#pragma once

#include "duckdb.hpp"
#include "moraine_ffi.h"

namespace duckdb {

struct MoraineStoreRef {
	explicit MoraineStoreRef(MoraineStore *store) : store(store) {
	}
	~MoraineStoreRef() {
		moraine_store_free(store);
	}
	MoraineStore *store;
};

} // namespace duckdb
