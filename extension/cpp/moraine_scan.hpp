// The scan of a moraine table (moraine_scan.cpp).
#pragma once

#include "duckdb/function/table_function.hpp"
#include "moraine_table_entry.hpp"

namespace duckdb {

//! The table function that scans `table`; sets `bind_data` to its bind data.
TableFunction MoraineScanFunction(MoraineTableEntry &table, unique_ptr<FunctionData> &bind_data);

} // namespace duckdb
