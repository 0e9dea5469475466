// A table of a lake: DuckDB binds against it; its rows come from its scan (moraine_scan.cpp).
#include "moraine_table_entry.hpp"

#include "moraine_scan.hpp"

#include "duckdb/storage/table_storage_info.hpp"

namespace duckdb {

MoraineTableEntry::MoraineTableEntry(Catalog &catalog, SchemaCatalogEntry &schema, CreateTableInfo &info)
    : TableCatalogEntry(catalog, schema, info) {
}

unique_ptr<BaseStatistics> MoraineTableEntry::GetStatistics(ClientContext &context, column_t column_id) {
	return nullptr;
}

TableStorageInfo MoraineTableEntry::GetStorageInfo(ClientContext &context) {
	return TableStorageInfo();
}

TableFunction MoraineTableEntry::GetScanFunction(ClientContext &context, unique_ptr<FunctionData> &bind_data) {
	return MoraineScanFunction(*this, bind_data);
}

} // namespace duckdb
