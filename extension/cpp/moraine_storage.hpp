// The "moraine" storage extension: ATTACH 'moraine:<url>' (moraine_storage.cpp).
#pragma once

#include "duckdb/storage/storage_extension.hpp"

namespace duckdb {

shared_ptr<StorageExtension> MoraineStorageExtension();

} // namespace duckdb
