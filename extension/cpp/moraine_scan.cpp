// Table entries and their scan: rows come from one materialization per transaction
// (RFC 0009); each emitted rowid names a row of exactly that materialization.
#include "moraine_catalog.hpp"

#include "duckdb/function/partition_stats.hpp"
#include "duckdb/planner/expression/bound_between_expression.hpp"
#include "duckdb/planner/expression/bound_columnref_expression.hpp"
#include "duckdb/planner/expression/bound_comparison_expression.hpp"
#include "duckdb/planner/expression/bound_conjunction_expression.hpp"
#include "duckdb/planner/expression/bound_constant_expression.hpp"
#include "duckdb/planner/expression/bound_operator_expression.hpp"
#include "duckdb/planner/operator/logical_get.hpp"
#include "duckdb/storage/statistics/numeric_stats.hpp"
#include "duckdb/storage/table_storage_info.hpp"

#include <algorithm>

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

struct MoraineScanBindData : public TableFunctionData {
	MoraineScanBindData(MoraineTableEntry &table) : table(table) {
	}
	~MoraineScanBindData() override {
		if (kept) {
			moraine_mat_free(kept);
		}
	}
	MoraineTableEntry &table;
	//! Set when a pushed-down filter admits only rows with end_snapshot NULL or > this value.
	optional_idx end_snapshot_floor;
	//! Set when a pushed-down filter admits only rows with end_snapshot NULL.
	bool only_live = false;
	//! Conjuncts `column = constant` / `column IN (constants)` on integer columns: the scan
	//! emits exactly the rows that pass them (DuckDB no longer applies them).
	vector<pair<idx_t, vector<int64_t>>> selections;
	//! Conjuncts `column <op> constant` (<, <=, >, >=) and `column BETWEEN c1 AND c2` on integer
	//! columns, as [lo, hi] bounds, applied by the scan in the same way.
	vector<pair<idx_t, pair<int64_t, int64_t>>> ranges;
	//! The rows the scan emits, narrowed by the selections, kept for the planning callbacks
	//! (cardinality, each column's statistics) and the scan, which all read the same rows: read
	//! again when the transaction's stamp changed (another transaction, or one that staged a
	//! write since) or the pushed-down filters did (DuckDB's statistics propagation can push
	//! more after the cardinality was asked for).
	mutable mutex kept_lock;
	mutable MoraineMat *kept = nullptr;
	mutable MoraineStamp kept_stamp {0, 0};
	//! Whether the kept rows include ended versions.
	mutable bool kept_history = false;
	//! The filters the kept rows were read under: how many selections and ranges, only_live,
	//! end_snapshot_floor.
	mutable idx_t kept_filters = 0;
	mutable bool kept_only_live = false;
	mutable optional_idx kept_floor;

	//! A plan over moraine's rows holds for its own transaction only (its cardinality and
	//! statistics, e.g. an empty result, were read from that transaction's rows): DuckDB rebinds
	//! it for every execution, whatever the catalog reports about its version.
	bool SupportStatementCache() const override {
		return false;
	}
};

//! The committed history holds only versions that ended at or before head. A scan whose filter
//! keeps only live versions, or versions still live after some snapshot >= head, never needs it:
//! this is how loading the catalog at head stays off the history keyspace (RFC 0002).
static bool IsEndSnapshot(LogicalGet &get, Expression &expr) {
	if (expr.GetExpressionClass() != ExpressionClass::BOUND_COLUMN_REF) {
		return false;
	}
	auto &ref = expr.Cast<BoundColumnRefExpression>();
	auto &column_ids = get.GetColumnIds();
	if (ref.binding.table_index != get.table_index || ref.binding.column_index >= column_ids.size()) {
		return false;
	}
	auto &column = column_ids[ref.binding.column_index];
	if (column.IsVirtualColumn()) {
		return false;
	}
	auto table = get.GetTable();
	return table && table->GetColumn(LogicalIndex(column.GetPrimaryIndex())).Name() == "end_snapshot";
}

static bool IsEndSnapshotNull(LogicalGet &get, Expression &expr) {
	if (expr.GetExpressionType() != ExpressionType::OPERATOR_IS_NULL) {
		return false;
	}
	auto &op = expr.Cast<BoundOperatorExpression>();
	return op.children.size() == 1 && IsEndSnapshot(get, *op.children[0]);
}

//! Matches `S < end_snapshot` / `end_snapshot > S` (and >=) with a constant S; returns the floor.
static optional_idx EndSnapshotAbove(LogicalGet &get, Expression &expr) {
	if (expr.GetExpressionClass() != ExpressionClass::BOUND_COMPARISON) {
		return optional_idx();
	}
	auto &cmp = expr.Cast<BoundComparisonExpression>();
	auto type = cmp.GetExpressionType();
	Expression *column = nullptr, *constant = nullptr;
	if (type == ExpressionType::COMPARE_GREATERTHAN || type == ExpressionType::COMPARE_GREATERTHANOREQUALTO) {
		column = cmp.left.get();
		constant = cmp.right.get();
	} else if (type == ExpressionType::COMPARE_LESSTHAN || type == ExpressionType::COMPARE_LESSTHANOREQUALTO) {
		column = cmp.right.get();
		constant = cmp.left.get();
	} else {
		return optional_idx();
	}
	if (!IsEndSnapshot(get, *column) || constant->GetExpressionClass() != ExpressionClass::BOUND_CONSTANT) {
		return optional_idx();
	}
	auto &value = constant->Cast<BoundConstantExpression>().value;
	if (value.IsNull()) {
		return optional_idx();
	}
	auto floor = value.GetValue<int64_t>();
	bool inclusive = type == ExpressionType::COMPARE_GREATERTHANOREQUALTO || type == ExpressionType::COMPARE_LESSTHANOREQUALTO;
	// end_snapshot > floor admits nothing that ended at or before floor; ">=" shifts it by one
	floor -= inclusive ? 1 : 0;
	if (floor < 0) {
		return optional_idx();
	}
	return optional_idx(NumericCast<idx_t>(floor));
}

//! The table column a bound column reference of this scan names, if it is a plain column.
static optional_idx ScanColumn(LogicalGet &get, Expression &expr) {
	if (expr.GetExpressionClass() != ExpressionClass::BOUND_COLUMN_REF) {
		return optional_idx();
	}
	auto &ref = expr.Cast<BoundColumnRefExpression>();
	auto &column_ids = get.GetColumnIds();
	if (ref.binding.table_index != get.table_index || ref.binding.column_index >= column_ids.size()) {
		return optional_idx();
	}
	auto &column = column_ids[ref.binding.column_index];
	if (column.IsVirtualColumn()) {
		return optional_idx();
	}
	return optional_idx(column.GetPrimaryIndex());
}

//! An integer constant, exactly (no rounding).
static bool IntegerConstant(ClientContext &context, Expression &expr, int64_t &out) {
	if (expr.GetExpressionClass() != ExpressionClass::BOUND_CONSTANT) {
		return false;
	}
	auto &value = expr.Cast<BoundConstantExpression>().value;
	if (value.IsNull() || !MoraineHeldAsInteger(value.type())) {
		return false;
	}
	Value cast;
	string error;
	if (!value.DefaultTryCastAs(LogicalType::BIGINT, cast, &error, true)) {
		return false;
	}
	out = cast.GetValue<int64_t>();
	return true;
}

//! The table column a bound column reference of this scan names, if it is a plain column that
//! moraine holds as integers.
static bool IntegerColumn(LogicalGet &get, Expression &expr, idx_t &index) {
	auto table = get.GetTable();
	auto column = ScanColumn(get, expr);
	if (!table || !column.IsValid()) {
		return false;
	}
	index = column.GetIndex();
	return MoraineHeldAsInteger(table->GetColumn(LogicalIndex(index)).Type());
}

//! `column = c`, `c = column`, `column IN (c1, c2, ...)` on an integer column of this scan.
static bool IntegerSelection(ClientContext &context, LogicalGet &get, Expression &expr,
                             pair<idx_t, vector<int64_t>> &out) {
	int64_t value;
	if (expr.GetExpressionType() == ExpressionType::COMPARE_EQUAL) {
		auto &cmp = expr.Cast<BoundComparisonExpression>();
		for (idx_t side = 0; side < 2; side++) {
			auto &column = side == 0 ? *cmp.left : *cmp.right;
			auto &constant = side == 0 ? *cmp.right : *cmp.left;
			if (IntegerColumn(get, column, out.first) && IntegerConstant(context, constant, value)) {
				out.second = {value};
				return true;
			}
		}
		return false;
	}
	if (expr.GetExpressionType() == ExpressionType::COMPARE_IN) {
		auto &op = expr.Cast<BoundOperatorExpression>();
		if (op.children.size() < 2 || !IntegerColumn(get, *op.children[0], out.first)) {
			return false;
		}
		out.second.clear();
		for (idx_t i = 1; i < op.children.size(); i++) {
			if (!IntegerConstant(context, *op.children[i], value)) {
				return false;
			}
			out.second.push_back(value);
		}
		return true;
	}
	return false;
}

//! `column BETWEEN c1 AND c2` on an integer column (DuckDB's filter combiner writes a column's
//! lower and upper bound as one), either bound exclusive: the values the column may hold, as
//! inclusive bounds.
static bool IntegerBetween(ClientContext &context, LogicalGet &get, Expression &expr,
                           pair<idx_t, pair<int64_t, int64_t>> &out) {
	if (expr.GetExpressionClass() != ExpressionClass::BOUND_BETWEEN) {
		return false;
	}
	auto &between = expr.Cast<BoundBetweenExpression>();
	idx_t column;
	int64_t lo, hi;
	if (!IntegerColumn(get, *between.input, column) || !IntegerConstant(context, *between.lower, lo) ||
	    !IntegerConstant(context, *between.upper, hi)) {
		return false;
	}
	if (!between.lower_inclusive) {
		if (lo == NumericLimits<int64_t>::Maximum()) {
			return false;
		}
		lo++;
	}
	if (!between.upper_inclusive) {
		if (hi == NumericLimits<int64_t>::Minimum()) {
			return false;
		}
		hi--;
	}
	out = {column, {lo, hi}};
	return true;
}

//! `column < c`, `c < column` and the like on an integer column: the values the column may hold,
//! as inclusive bounds.
static bool IntegerRange(ClientContext &context, LogicalGet &get, Expression &expr,
                         pair<idx_t, pair<int64_t, int64_t>> &out) {
	if (IntegerBetween(context, get, expr, out)) {
		return true;
	}
	auto type = expr.GetExpressionType();
	if (type != ExpressionType::COMPARE_LESSTHAN && type != ExpressionType::COMPARE_LESSTHANOREQUALTO &&
	    type != ExpressionType::COMPARE_GREATERTHAN && type != ExpressionType::COMPARE_GREATERTHANOREQUALTO) {
		return false;
	}
	auto &cmp = expr.Cast<BoundComparisonExpression>();
	for (idx_t side = 0; side < 2; side++) {
		auto &column_expr = side == 0 ? *cmp.left : *cmp.right;
		auto &constant = side == 0 ? *cmp.right : *cmp.left;
		idx_t column;
		int64_t value;
		if (!IntegerColumn(get, column_expr, column) || !IntegerConstant(context, constant, value)) {
			continue;
		}
		// with the column on the right, `c < column` is `column > c`
		auto op = side == 0 ? type : FlipComparisonExpression(type);
		int64_t lo = NumericLimits<int64_t>::Minimum(), hi = NumericLimits<int64_t>::Maximum();
		switch (op) {
		case ExpressionType::COMPARE_LESSTHAN:
			if (value == NumericLimits<int64_t>::Minimum()) {
				return false;
			}
			hi = value - 1;
			break;
		case ExpressionType::COMPARE_LESSTHANOREQUALTO:
			hi = value;
			break;
		case ExpressionType::COMPARE_GREATERTHAN:
			if (value == NumericLimits<int64_t>::Maximum()) {
				return false;
			}
			lo = value + 1;
			break;
		default:
			lo = value;
			break;
		}
		out = {column, {lo, hi}};
		return true;
	}
	return false;
}

static unique_ptr<NodeStatistics> MoraineScanCardinality(ClientContext &context, const FunctionData *bind_data_p);

//! Appends `item` unless `items` holds it already.
template <class T>
static void AddOnce(vector<T> &items, T item) {
	if (std::find(items.begin(), items.end(), item) == items.end()) {
		items.push_back(std::move(item));
	}
}

static void MoraineScanPushdown(ClientContext &context, LogicalGet &get, FunctionData *bind_data_p,
                                vector<unique_ptr<Expression>> &filters) {
	// An integer selection or range the scan applies exactly, through the rows' index, and takes
	// out of the list: DuckDB then does not evaluate it again above the scan (as its own storage
	// applies a table filter inside the scan). Every other filter stays for DuckDB, and some of
	// them only tell the scan what it need not read (history).
	//
	// DuckDB runs filter pushdown more than once per query, so a filter this callback put back
	// (below) comes again: it is recorded once, so the rows kept for the scan, read under the
	// same filters, still serve it.
	auto &bind_data = bind_data_p->Cast<MoraineScanBindData>();
	vector<unique_ptr<Expression>> remaining, applied;
	for (auto &filter : filters) {
		pair<idx_t, vector<int64_t>> selection;
		if (IntegerSelection(context, get, *filter, selection)) {
			AddOnce(bind_data.selections, std::move(selection));
			applied.push_back(std::move(filter));
			continue;
		}
		pair<idx_t, pair<int64_t, int64_t>> range;
		if (IntegerRange(context, get, *filter, range)) {
			AddOnce(bind_data.ranges, std::move(range));
			applied.push_back(std::move(filter));
			// (a range on end_snapshot never tells whether history is needed: only the
			// disjunction below does)
			continue;
		}
		remaining.push_back(std::move(filter));
		auto &kept = *remaining.back();
		if (IsEndSnapshotNull(get, kept)) {
			bind_data.only_live = true;
			continue;
		}
		if (kept.GetExpressionType() != ExpressionType::CONJUNCTION_OR) {
			continue;
		}
		auto &disjunction = kept.Cast<BoundConjunctionExpression>();
		if (disjunction.children.size() != 2) {
			continue;
		}
		for (idx_t i = 0; i < 2; i++) {
			auto floor = EndSnapshotAbove(get, *disjunction.children[i]);
			if (floor.IsValid() && IsEndSnapshotNull(get, *disjunction.children[1 - i])) {
				bind_data.end_snapshot_floor = floor;
			}
		}
	}
	if (!applied.empty()) {
		// A scan the selections leave empty emits nothing whatever filter sits above it, so it
		// hands DuckDB a constant FALSE in their stead: a filter over the scan that DuckDB's
		// next filter pushdown pass (or its statistics propagation) finds unsatisfiable, and
		// replaces, with the scan and a join over it, by an empty result, as for an empty
		// table of its own catalog (DuckLake's delete-file join, on a table without delete
		// files). When the rows could not be read, the selections stay in the plan as well and
		// the scan reports the error.
		auto cardinality = MoraineScanCardinality(context, bind_data_p);
		if (!cardinality || !cardinality->has_max_cardinality) {
			for (auto &filter : applied) {
				remaining.push_back(std::move(filter));
			}
		} else if (cardinality->max_cardinality == 0) {
			remaining.push_back(make_uniq<BoundConstantExpression>(Value::BOOLEAN(false)));
		}
	}
	filters = std::move(remaining);
}

static bool ScanNeedsHistory(MoraineTxn *txn, const MoraineScanBindData &bind_data) {
	if (bind_data.only_live) {
		return false;
	}
	if (!bind_data.end_snapshot_floor.IsValid()) {
		return true;
	}
	int64_t head = 0;
	MoraineError err {nullptr, 0, MORAINE_ERROR_NONE, MORAINE_EXCEPTION_NONE};
	auto &lake = bind_data.table.schema.name;
	auto has_head = moraine_txn_head_snapshot(txn, lake.c_str(), lake.size(), &head, &err);
	if (has_head < 0) {
		MoraineThrow(err);
	}
	// no snapshot yet: nothing has ended, so there is no history
	return has_head == 1 && NumericCast<int64_t>(bind_data.end_snapshot_floor.GetIndex()) < head;
}

//! This transaction's rows of the scan's table, narrowed by the pushed-down selections, and
//! whether they include ended versions (`history`); null with `err` set when they could not be
//! read. The rows are kept, so the planning callbacks and the scan read them once.
static MoraineMat *MoraineScanRows(MoraineTxn *txn, const MoraineScanBindData &bind_data, bool &history,
                                   MoraineError &err) {
	MoraineStamp stamp;
	if (moraine_txn_stamp(txn, &stamp, &err) != 0) {
		return nullptr;
	}
	auto filters = bind_data.selections.size() + bind_data.ranges.size();
	lock_guard<mutex> guard(bind_data.kept_lock);
	if (bind_data.kept && bind_data.kept_stamp.txn == stamp.txn &&
	    bind_data.kept_stamp.generation == stamp.generation && bind_data.kept_filters == filters &&
	    bind_data.kept_only_live == bind_data.only_live && bind_data.kept_floor == bind_data.end_snapshot_floor) {
		history = bind_data.kept_history;
		return moraine_mat_clone(bind_data.kept);
	}
	history = ScanNeedsHistory(txn, bind_data);
	auto &table = bind_data.table;
	auto &schema = table.schema.name;
	auto mat = moraine_txn_rows(txn, schema.c_str(), schema.size(), table.name.c_str(), table.name.size(),
	                            history ? 1 : 0, &err);
	if (!mat) {
		return nullptr;
	}
	// DuckDB no longer applies these filters: a selection that fails fails the scan (its error
	// goes to the caller, as a failed read of the rows does)
	if (filters > 0) {
		vector<MoraineIn> ins;
		for (auto &selection : bind_data.selections) {
			ins.push_back({selection.first, selection.second.data(), selection.second.size()});
		}
		vector<MoraineBetween> ranges;
		for (auto &range : bind_data.ranges) {
			ranges.push_back({range.first, range.second.first, range.second.second});
		}
		if (moraine_mat_narrow(mat, ins.data(), ins.size(), ranges.data(), ranges.size(), &err) != 0) {
			moraine_mat_free(mat);
			return nullptr;
		}
	}
	if (bind_data.kept) {
		moraine_mat_free(bind_data.kept);
	}
	bind_data.kept = moraine_mat_clone(mat);
	bind_data.kept_stamp = stamp;
	bind_data.kept_history = history;
	bind_data.kept_filters = filters;
	bind_data.kept_only_live = bind_data.only_live;
	bind_data.kept_floor = bind_data.end_snapshot_floor;
	return mat;
}

//! The rows the scan will emit, for a planning callback; null when they could not be read (the
//! error is left for the scan to report).
static MoraineMat *MoraineRowsToPlan(ClientContext &context, const MoraineScanBindData &bind_data) {
	auto txn = MoraineTransaction::Get(context, bind_data.table.catalog).Txn();
	MoraineError err {nullptr, 0, MORAINE_ERROR_NONE, MORAINE_EXCEPTION_NONE};
	bool history;
	auto mat = MoraineScanRows(txn, bind_data, history, err);
	if (!mat) {
		MoraineTakeError(err);
	}
	return mat;
}

//! The rows the scan will emit, for DuckDB's join order (an empty side is built, not probed).
//! It is the same materialization the scan reads (kept by the transaction), so this costs the
//! scan nothing extra; an error here is left for the scan to report.
static unique_ptr<NodeStatistics> MoraineScanCardinality(ClientContext &context, const FunctionData *bind_data_p) {
	auto &bind_data = bind_data_p->Cast<MoraineScanBindData>();
	try {
		auto mat = MoraineRowsToPlan(context, bind_data);
		if (!mat) {
			return nullptr;
		}
		auto rows = NumericCast<idx_t>(moraine_mat_len(mat));
		moraine_mat_free(mat);
		return make_uniq<NodeStatistics>(rows, rows);
	} catch (std::exception &) {
		return nullptr;
	}
}

//! A BIGINT column's least and greatest value over the rows `mat` emits and whether it holds
//! NULL, as exact statistics; null for another type, or a cell that is not an integer.
static unique_ptr<BaseStatistics> MoraineIntegerStatistics(MoraineMat *mat, column_t column_id,
                                                           const LogicalType &type) {
	MoraineIntStats ints;
	if (type.id() != LogicalTypeId::BIGINT || !moraine_mat_int_stats(mat, column_id, &ints)) {
		return nullptr;
	}
	auto stats = BaseStatistics::CreateEmpty(type);
	if (ints.has_value) {
		NumericStats::SetMin(stats, Value::BIGINT(ints.min));
		NumericStats::SetMax(stats, Value::BIGINT(ints.max));
		stats.SetHasNoNull();
	}
	if (ints.has_null) {
		stats.SetHasNull();
	}
	return stats.ToUnique();
}

//! Column statistics for DuckDB's optimizer. They read the materialization the scan will read,
//! narrowed by the selections recorded so far, so they hold for every row it emits: a filter
//! DuckDB pushes down after asking (from a join's statistics) only narrows the scan further. An
//! error is left for the scan to report.
//!
//! - A scan that will emit no row: no values for any column (a scan its pushed-down selections
//!   left empty also has a constant FALSE above it, MoraineScanPushdown, which plans it away).
//! - A scan that emits rows: a BIGINT column reports its least and greatest value and whether it
//!   holds NULL, as DuckDB's own storage does from its zone maps, so a filter every emitted row
//!   passes (DuckLake's snapshot bounds over live rows, whose end_snapshot is NULL; a table_id
//!   an index selected) is dropped instead of evaluated row by row. Other columns report nothing
//!   (DuckDB assumes any value).
static unique_ptr<BaseStatistics> MoraineScanStatistics(ClientContext &context, const FunctionData *bind_data_p,
                                                        column_t column_id) {
	auto &bind_data = bind_data_p->Cast<MoraineScanBindData>();
	if (IsRowIdColumnId(column_id) || IsVirtualColumn(column_id) || column_id == COLUMN_IDENTIFIER_EMPTY) {
		return nullptr;
	}
	try {
		auto mat = MoraineRowsToPlan(context, bind_data);
		if (!mat) {
			return nullptr;
		}
		auto &type = bind_data.table.GetColumn(LogicalIndex(column_id)).Type();
		auto stats = moraine_mat_len(mat) != 0 ? MoraineIntegerStatistics(mat, column_id, type)
		                                        : BaseStatistics::CreateEmpty(type).ToUnique();
		moraine_mat_free(mat);
		return stats;
	} catch (std::exception &) {
		return nullptr;
	}
}

//! The scan's rows as one partition whose BIGINT columns' bounds are exact (they are computed
//! over exactly the rows the scan emits).
struct MoraineRowsPartition : public PartitionRowGroup {
	MoraineRowsPartition(MoraineMat *mat, MoraineTableEntry &table) : mat(mat), table(table) {
	}
	~MoraineRowsPartition() override {
		moraine_mat_free(mat);
	}
	unique_ptr<BaseStatistics> GetColumnStatistics(const StorageIndex &storage_index) override {
		auto column = storage_index.GetPrimaryIndex();
		if (column >= table.GetColumns().LogicalColumnCount()) {
			return nullptr;
		}
		return MoraineIntegerStatistics(mat, column, table.GetColumn(LogicalIndex(column)).Type());
	}
	bool MinMaxIsExact(const BaseStatistics &, const StorageIndex &) override {
		return true;
	}

	MoraineMat *mat;
	MoraineTableEntry &table;
};

//! The rows the scan will emit as one partition with an exact count and exact BIGINT bounds:
//! DuckDB then answers an ungrouped COUNT(*), MIN or MAX straight over the scan (DuckLake's
//! `MAX(snapshot_id)`, its inlined rows' `COUNT(*)` once the scan applied their snapshot bounds)
//! from them instead of reading the rows, as it does from its own storage's row groups. Only a
//! scan with no filter left above it qualifies (DuckDB checks; a filter the scan's statistics
//! prove true is gone by then, and those statistics read the same rows), so they hold for its
//! result. No partition (DuckDB reads the rows) when they could not be read; the scan reports
//! that error.
static vector<PartitionStatistics> MoraineScanPartitionStats(ClientContext &context, GetPartitionStatsInput &input) {
	vector<PartitionStatistics> result;
	if (!input.bind_data) {
		return result;
	}
	auto &bind_data = input.bind_data->Cast<MoraineScanBindData>();
	try {
		auto mat = MoraineRowsToPlan(context, bind_data);
		if (!mat) {
			return result;
		}
		shared_ptr<MoraineRowsPartition> rows;
		try {
			rows = make_shared_ptr<MoraineRowsPartition>(mat, bind_data.table);
		} catch (...) {
			moraine_mat_free(mat);
			throw;
		}
		PartitionStatistics partition;
		partition.row_start = 0;
		partition.count = NumericCast<idx_t>(moraine_mat_len(rows->mat));
		partition.count_type = CountType::COUNT_EXACT;
		partition.partition_row_group = std::move(rows);
		result.push_back(std::move(partition));
	} catch (std::exception &) {
		result.clear();
	}
	return result;
}

struct MoraineScanState : public GlobalTableFunctionState {
	~MoraineScanState() override {
		if (mat) {
			moraine_mat_free(mat);
		}
	}
	MoraineMat *mat = nullptr;
	idx_t position = 0;
	idx_t length = 0;
	bool read_history = true;
	bool selected = false;
	vector<column_t> column_ids;
	//! Which cells of a BIGINT column read in one call were valid.
	uint8_t valid[STANDARD_VECTOR_SIZE];

	idx_t MaxThreads() const override {
		return 1;
	}
};

static unique_ptr<GlobalTableFunctionState> MoraineScanInit(ClientContext &context, TableFunctionInitInput &input) {
	auto &bind_data = input.bind_data->Cast<MoraineScanBindData>();
	auto &table = bind_data.table;
	auto &transaction = MoraineTransaction::Get(context, table.catalog);
	auto result = make_uniq<MoraineScanState>();
	MoraineError err {nullptr, 0, MORAINE_ERROR_NONE, MORAINE_EXCEPTION_NONE};
	result->mat = MoraineScanRows(transaction.Txn(), bind_data, result->read_history, err);
	if (!result->mat) {
		MoraineThrow(err);
	}
	result->selected = !bind_data.selections.empty() || !bind_data.ranges.empty();
	result->length = moraine_mat_len(result->mat);
	result->column_ids = input.column_ids;
	return std::move(result);
}

static void MoraineScanFunction(ClientContext &context, TableFunctionInput &input, DataChunk &output) {
	auto &state = input.global_state->Cast<MoraineScanState>();
	idx_t count = MinValue<idx_t>(STANDARD_VECTOR_SIZE, state.length - state.position);
	MoraineCell cell;
	for (idx_t c = 0; c < state.column_ids.size(); c++) {
		auto column_id = state.column_ids[c];
		auto &vector = output.data[c];
		if (IsRowIdColumnId(column_id)) {
			auto data = FlatVector::GetData<int64_t>(vector);
			for (idx_t r = 0; r < count; r++) {
				data[r] = moraine_mat_rowid(state.mat, state.position + r);
			}
			continue;
		}
		if (column_id == COLUMN_IDENTIFIER_EMPTY || IsVirtualColumn(column_id)) {
			// no column is read (e.g. COUNT(*)): DuckDB only needs the cardinality
			continue;
		}
		size_t nulls = 0;
		if (vector.GetType().id() == LogicalTypeId::BIGINT &&
		    moraine_mat_ints(state.mat, state.position, count, column_id, FlatVector::GetData<int64_t>(vector),
		                     state.valid, &nulls)) {
			if (count > 0 && nulls == count) {
				// every cell NULL (end_snapshot of live rows): one constant, as DuckDB's own
				// storage emits for a constant segment
				vector.SetVectorType(VectorType::CONSTANT_VECTOR);
				ConstantVector::SetNull(vector, true);
			} else if (nulls > 0) {
				auto &validity = FlatVector::Validity(vector);
				for (idx_t r = 0; r < count; r++) {
					if (!state.valid[r]) {
						validity.SetInvalid(r);
					}
				}
			}
			continue;
		}
		for (idx_t r = 0; r < count; r++) {
			moraine_mat_cell(state.mat, state.position + r, column_id, &cell);
			string why;
			if (!MoraineWriteCell(vector, r, cell, why)) {
				// a stored cell its column cannot hold: Rust words the error (a corrupt record)
				auto &table = input.bind_data->Cast<MoraineScanBindData>().table;
				auto column = table.GetColumn(LogicalIndex(column_id)).Name();
				auto type = vector.GetType().ToString();
				MoraineError err {nullptr, 0, MORAINE_ERROR_NONE, MORAINE_EXCEPTION_NONE};
				moraine_mat_misfit(state.mat, state.position + r, column_id, column.c_str(), column.size(),
				                   type.c_str(), type.size(), why.c_str(), why.size(), &err);
				MoraineThrow(err);
			}
		}
	}
	state.position += count;
	output.SetCardinality(count);
}

//! EXPLAIN ANALYZE shows whether the scan had to read ended versions (the history keyspace).
static InsertionOrderPreservingMap<string> MoraineScanDynamicToString(TableFunctionDynamicToStringInput &input) {
	InsertionOrderPreservingMap<string> result;
	result["Table"] = input.bind_data->Cast<MoraineScanBindData>().table.name;
	if (input.global_state) {
		auto &state = input.global_state->Cast<MoraineScanState>();
		result["History read"] = state.read_history ? "yes" : "no";
		result["Rows"] = to_string(state.length) + (state.selected ? " (by index)" : "");
	}
	return result;
}

//! Tells DuckDB's binder the scan reads a base table, so UPDATE / DELETE can target it.
static BindInfo MoraineScanBindInfo(const optional_ptr<FunctionData> bind_data) {
	return BindInfo(bind_data->Cast<MoraineScanBindData>().table);
}

//! A scan names its table by reference, which does not serialize. Refusing to serialize also
//! keeps DuckDB's common-subplan optimizer from merging two scans of same-named tables in
//! different lakes or metadata catalogs (it compares plans by their serialized form).
static void MoraineScanSerialize(Serializer &, const optional_ptr<FunctionData>, const TableFunction &) {
	throw NotImplementedException("moraine_scan cannot be serialized");
}

static unique_ptr<FunctionData> MoraineScanDeserialize(Deserializer &, TableFunction &) {
	throw NotImplementedException("moraine_scan cannot be deserialized");
}

TableFunction MoraineTableEntry::GetScanFunction(ClientContext &context, unique_ptr<FunctionData> &bind_data) {
	bind_data = make_uniq<MoraineScanBindData>(*this);
	TableFunction function("moraine_scan", {}, MoraineScanFunction, nullptr, MoraineScanInit);
	function.projection_pushdown = true;
	function.pushdown_complex_filter = MoraineScanPushdown;
	function.cardinality = MoraineScanCardinality;
	function.statistics = MoraineScanStatistics;
	function.get_partition_stats = MoraineScanPartitionStats;
	function.get_bind_info = MoraineScanBindInfo;
	function.dynamic_to_string = MoraineScanDynamicToString;
	function.serialize = MoraineScanSerialize;
	function.deserialize = MoraineScanDeserialize;
	function.verify_serialization = false;
	return function;
}

} // namespace duckdb
