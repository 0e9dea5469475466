// A moraine table's scan. It marshals: DuckDB's pushed-down filters go to Rust as neutral
// predicates, and Rust (src/scan.rs) decides which the scan applies, whether it reads history and
// which rows it emits; this file writes those rows into DuckDB's vectors.
#include "moraine_scan.hpp"

#include "moraine_cells.hpp"
#include "moraine_error.hpp"
#include "moraine_transaction.hpp"

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

#include <deque>

namespace duckdb {

struct MoraineMatFree {
	void operator()(MoraineMat *mat) const {
		moraine_mat_free(mat);
	}
};
using MoraineMatPtr = unique_ptr<MoraineMat, MoraineMatFree>;

struct MoraineScanBindData : public TableFunctionData {
	explicit MoraineScanBindData(MoraineTableEntry &table)
	    : table(table), scan(moraine_scan_new(table.schema.name.c_str(), table.schema.name.size(), table.name.c_str(),
	                                          table.name.size())) {
	}
	~MoraineScanBindData() override {
		moraine_scan_free(scan);
	}
	MoraineTableEntry &table;
	//! The pushed-down filters and the rows they leave, kept for the planning callbacks and the scan.
	MoraineScan *scan;

	//! A plan over moraine's rows holds for its own transaction only (its cardinality and
	//! statistics were read from that transaction's rows): DuckDB rebinds it for every execution.
	bool SupportStatementCache() const override {
		return false;
	}
};

//! The rows the scan emits in this context's transaction; null with `err` set when they cannot be read.
static MoraineMatPtr MoraineScanRows(ClientContext &context, const MoraineScanBindData &bind_data, MoraineError &err) {
	auto txn = MoraineTransaction::Get(context, bind_data.table.catalog).Txn();
	return MoraineMatPtr(moraine_scan_rows(bind_data.scan, txn, &err));
}

//! The same, for a planning callback: null when they cannot be read (the scan reports the error).
static MoraineMatPtr MoraineRowsToPlan(ClientContext &context, const FunctionData *bind_data_p) {
	try {
		MoraineError err {};
		auto mat = MoraineScanRows(context, bind_data_p->Cast<MoraineScanBindData>(), err);
		if (!mat) {
			MoraineTakeError(err);
		}
		return mat;
	} catch (std::exception &) {
		return nullptr;
	}
}

//! One filter as predicates (moraine_ffi.h, MorainePredicate).
struct MorainePredicates {
	MorainePredicates(LogicalGet &get, idx_t filter, std::deque<string> &scratch)
	    : get(get), filter(filter), scratch(scratch) {
	}
	LogicalGet &get;
	idx_t filter;
	idx_t clause = 0;
	vector<MorainePredicate> out;
	//! Owns the text and serialized values the cells point to, until the pushdown returns (a
	//! deque: what it holds never moves).
	std::deque<string> &scratch;

	//! The table column a bound column reference of this scan names, if it is a plain column.
	optional_idx Column(Expression &expr) {
		if (expr.GetExpressionClass() != ExpressionClass::BOUND_COLUMN_REF) {
			return optional_idx();
		}
		auto &ref = expr.Cast<BoundColumnRefExpression>();
		auto &column_ids = get.GetColumnIds();
		if (ref.binding.table_index != get.table_index || ref.binding.column_index >= column_ids.size() ||
		    column_ids[ref.binding.column_index].IsVirtualColumn()) {
			return optional_idx();
		}
		return optional_idx(column_ids[ref.binding.column_index].GetPrimaryIndex());
	}

	bool Add(optional_idx column, uint32_t op, const Value &value) {
		if (!column.IsValid()) {
			return false;
		}
		MorainePredicate predicate {filter, clause, column.GetIndex(), op, {}};
		scratch.emplace_back();
		MoraineValueToCell(value, value.type(), predicate.value, scratch.back());
		out.push_back(predicate);
		return true;
	}

	//! `column op constant` (either side), `column IS NULL`, `column IN (constants)`.
	bool Atom(Expression &expr) {
		auto type = expr.GetExpressionType();
		if (type == ExpressionType::OPERATOR_IS_NULL) {
			auto &op = expr.Cast<BoundOperatorExpression>();
			return op.children.size() == 1 && Add(Column(*op.children[0]), MORAINE_OP_IS_NULL, Value());
		}
		if (type == ExpressionType::COMPARE_IN) {
			auto &op = expr.Cast<BoundOperatorExpression>();
			if (op.children.size() < 2) {
				return false;
			}
			auto column = Column(*op.children[0]);
			for (idx_t i = 1; i < op.children.size(); i++) {
				auto &constant = *op.children[i];
				if (constant.GetExpressionClass() != ExpressionClass::BOUND_CONSTANT ||
				    !Add(column, MORAINE_OP_EQ, constant.Cast<BoundConstantExpression>().value)) {
					return false;
				}
			}
			return true;
		}
		if (expr.GetExpressionClass() != ExpressionClass::BOUND_COMPARISON) {
			return false;
		}
		auto &cmp = expr.Cast<BoundComparisonExpression>();
		for (idx_t side = 0; side < 2; side++) {
			auto &constant = side == 0 ? *cmp.right : *cmp.left;
			auto column = Column(side == 0 ? *cmp.left : *cmp.right);
			if (!column.IsValid() || constant.GetExpressionClass() != ExpressionClass::BOUND_CONSTANT) {
				continue;
			}
			// with the column on the right, `c < column` is `column > c`
			auto compared = side == 0 ? type : FlipComparisonExpression(type);
			auto op = compared == ExpressionType::COMPARE_EQUAL                  ? MORAINE_OP_EQ
			          : compared == ExpressionType::COMPARE_LESSTHAN             ? MORAINE_OP_LT
			          : compared == ExpressionType::COMPARE_LESSTHANOREQUALTO    ? MORAINE_OP_LE
			          : compared == ExpressionType::COMPARE_GREATERTHAN          ? MORAINE_OP_GT
			          : compared == ExpressionType::COMPARE_GREATERTHANOREQUALTO ? MORAINE_OP_GE
			                                                                     : UINT32_MAX;
			if (op == UINT32_MAX) {
				return false;
			}
			return Add(column, op, constant.Cast<BoundConstantExpression>().value);
		}
		return false;
	}

	//! A clause: an atom, or an OR of atoms.
	bool Clause(Expression &expr) {
		bool described = true;
		if (expr.GetExpressionType() == ExpressionType::CONJUNCTION_OR) {
			for (auto &child : expr.Cast<BoundConjunctionExpression>().children) {
				described = described && Atom(*child);
			}
		} else {
			described = Atom(expr);
		}
		clause++;
		return described;
	}

	//! A filter: an AND of clauses; `x BETWEEN a AND b` is `x >= a AND x <= b` (either bound may
	//! be exclusive).
	bool Filter(Expression &expr) {
		if (expr.GetExpressionType() == ExpressionType::CONJUNCTION_AND) {
			for (auto &child : expr.Cast<BoundConjunctionExpression>().children) {
				if (!Filter(*child)) {
					return false;
				}
			}
			return true;
		}
		if (expr.GetExpressionClass() == ExpressionClass::BOUND_BETWEEN) {
			auto &between = expr.Cast<BoundBetweenExpression>();
			auto column = Column(*between.input);
			for (auto bound : {between.lower.get(), between.upper.get()}) {
				auto lower = bound == between.lower.get();
				auto inclusive = lower ? between.lower_inclusive : between.upper_inclusive;
				auto op = lower ? (inclusive ? MORAINE_OP_GE : MORAINE_OP_GT) : (inclusive ? MORAINE_OP_LE : MORAINE_OP_LT);
				if (bound->GetExpressionClass() != ExpressionClass::BOUND_CONSTANT ||
				    !Add(column, op, bound->Cast<BoundConstantExpression>().value)) {
					return false;
				}
				clause++;
			}
			return true;
		}
		return Clause(expr);
	}
};

//! DuckDB's filter pushdown: the filters Rust applies leave the list (DuckDB does not evaluate
//! them again), and a scan they leave empty gets a constant FALSE in their stead, which DuckDB
//! plans away with the scan and a join over it, as for an empty table of its own.
static void MoraineScanPushdown(ClientContext &context, LogicalGet &get, FunctionData *bind_data_p,
                                vector<unique_ptr<Expression>> &filters) {
	auto &bind_data = bind_data_p->Cast<MoraineScanBindData>();
	vector<MorainePredicate> predicates;
	std::deque<string> scratch;
	for (idx_t f = 0; f < filters.size(); f++) {
		MorainePredicates filter(get, f, scratch);
		if (filter.Filter(*filters[f])) {
			predicates.insert(predicates.end(), filter.out.begin(), filter.out.end());
		}
	}
	vector<uint8_t> applied(filters.size(), 0);
	auto txn = MoraineTransaction::Get(context, bind_data.table.catalog).Txn();
	auto empty = moraine_scan_push(bind_data.scan, txn, predicates.data(), predicates.size(), filters.size(),
	                               applied.data());
	vector<unique_ptr<Expression>> remaining;
	for (idx_t f = 0; f < filters.size(); f++) {
		if (!applied[f]) {
			remaining.push_back(std::move(filters[f]));
		}
	}
	if (empty) {
		remaining.push_back(make_uniq<BoundConstantExpression>(Value::BOOLEAN(false)));
	}
	filters = std::move(remaining);
}

//! The rows the scan will emit, for DuckDB's join order (an empty side is built, not probed).
static unique_ptr<NodeStatistics> MoraineScanCardinality(ClientContext &context, const FunctionData *bind_data_p) {
	auto mat = MoraineRowsToPlan(context, bind_data_p);
	if (!mat) {
		return nullptr;
	}
	auto rows = NumericCast<idx_t>(moraine_mat_len(mat.get()));
	return make_uniq<NodeStatistics>(rows, rows);
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

//! Column statistics over exactly the rows the scan will emit (RFC 0009, "Scans"): none for any
//! column of an empty scan, a BIGINT column's bounds otherwise, as DuckDB's zone maps give them.
static unique_ptr<BaseStatistics> MoraineScanStatistics(ClientContext &context, const FunctionData *bind_data_p,
                                                        column_t column_id) {
	if (IsRowIdColumnId(column_id) || IsVirtualColumn(column_id) || column_id == COLUMN_IDENTIFIER_EMPTY) {
		return nullptr;
	}
	auto mat = MoraineRowsToPlan(context, bind_data_p);
	if (!mat) {
		return nullptr;
	}
	auto &type = bind_data_p->Cast<MoraineScanBindData>().table.GetColumn(LogicalIndex(column_id)).Type();
	if (moraine_mat_len(mat.get()) == 0) {
		return BaseStatistics::CreateEmpty(type).ToUnique();
	}
	return MoraineIntegerStatistics(mat.get(), column_id, type);
}

//! The scan's rows as one partition whose BIGINT columns' bounds are exact.
struct MoraineRowsPartition : public PartitionRowGroup {
	MoraineRowsPartition(MoraineMatPtr mat, MoraineTableEntry &table) : mat(std::move(mat)), table(table) {
	}
	unique_ptr<BaseStatistics> GetColumnStatistics(const StorageIndex &storage_index) override {
		auto column = storage_index.GetPrimaryIndex();
		if (column >= table.GetColumns().LogicalColumnCount()) {
			return nullptr;
		}
		return MoraineIntegerStatistics(mat.get(), column, table.GetColumn(LogicalIndex(column)).Type());
	}
	bool MinMaxIsExact(const BaseStatistics &, const StorageIndex &) override {
		return true;
	}

	MoraineMatPtr mat;
	MoraineTableEntry &table;
};

//! The rows the scan will emit as one partition with an exact count and exact BIGINT bounds, so
//! DuckDB answers an ungrouped COUNT(*), MIN or MAX over a scan with no filter left above it from
//! them, as from its own row groups. None when the rows cannot be read (the scan reports it).
static vector<PartitionStatistics> MoraineScanPartitionStats(ClientContext &context, GetPartitionStatsInput &input) {
	vector<PartitionStatistics> result;
	if (!input.bind_data) {
		return result;
	}
	auto mat = MoraineRowsToPlan(context, input.bind_data.get());
	if (!mat) {
		return result;
	}
	PartitionStatistics partition;
	partition.row_start = 0;
	partition.count = NumericCast<idx_t>(moraine_mat_len(mat.get()));
	partition.count_type = CountType::COUNT_EXACT;
	partition.partition_row_group =
	    make_shared_ptr<MoraineRowsPartition>(std::move(mat), input.bind_data->Cast<MoraineScanBindData>().table);
	result.push_back(std::move(partition));
	return result;
}

struct MoraineScanState : public GlobalTableFunctionState {
	MoraineMatPtr mat;
	idx_t position = 0;
	idx_t length = 0;
	vector<column_t> column_ids;
	//! Which cells of an integer column read in one call were valid.
	uint8_t valid[STANDARD_VECTOR_SIZE];

	idx_t MaxThreads() const override {
		return 1;
	}
};

static unique_ptr<GlobalTableFunctionState> MoraineScanInit(ClientContext &context, TableFunctionInitInput &input) {
	auto result = make_uniq<MoraineScanState>();
	MoraineError err {};
	result->mat = MoraineScanRows(context, input.bind_data->Cast<MoraineScanBindData>(), err);
	if (!result->mat) {
		MoraineThrow(err);
	}
	result->length = moraine_mat_len(result->mat.get());
	result->column_ids = input.column_ids;
	return std::move(result);
}

//! Rows of an integer column (or one DuckDB holds as a 32- or 64-bit integer) in one call; false
//! when the cells must be written one by one.
static bool MoraineScanInts(MoraineScanState &state, idx_t count, column_t column_id, Vector &vector) {
	auto &type = vector.GetType();
	auto physical = type.InternalType();
	uint8_t width = physical == PhysicalType::INT64 ? 8 : physical == PhysicalType::INT32 ? 4 : 0;
	auto held = MoraineHeldAsInteger(type);
	size_t nulls = 0;
	if (width == 0 || (!held && type.AuxInfo()) ||
	    !moraine_mat_ints(state.mat.get(), state.position, count, column_id, held ? 0 : uint8_t(type.id()), width,
	                      FlatVector::GetData(vector), state.valid, &nulls)) {
		return false;
	}
	if (count > 0 && nulls == count) {
		// every cell NULL (end_snapshot of live rows): one constant, as DuckDB's storage emits
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
	return true;
}

static void MoraineScanFunction(ClientContext &context, TableFunctionInput &input, DataChunk &output) {
	auto &state = input.global_state->Cast<MoraineScanState>();
	auto mat = state.mat.get();
	idx_t count = MinValue<idx_t>(STANDARD_VECTOR_SIZE, state.length - state.position);
	MoraineCell cell;
	for (idx_t c = 0; c < state.column_ids.size(); c++) {
		auto column_id = state.column_ids[c];
		auto &vector = output.data[c];
		if (IsRowIdColumnId(column_id)) {
			auto data = FlatVector::GetData<int64_t>(vector);
			for (idx_t r = 0; r < count; r++) {
				data[r] = moraine_mat_rowid(mat, state.position + r);
			}
			continue;
		}
		if (column_id == COLUMN_IDENTIFIER_EMPTY || IsVirtualColumn(column_id) ||
		    MoraineScanInts(state, count, column_id, vector)) {
			// (no column read, e.g. COUNT(*): DuckDB only needs the cardinality)
			continue;
		}
		for (idx_t r = 0; r < count; r++) {
			moraine_mat_cell(mat, state.position + r, column_id, &cell);
			string why;
			if (!MoraineWriteCell(vector, r, cell, why)) {
				// a stored cell its column cannot hold: Rust words the error (a corrupt record)
				auto &table = input.bind_data->Cast<MoraineScanBindData>().table;
				auto column = table.GetColumn(LogicalIndex(column_id)).Name();
				auto type = vector.GetType().ToString();
				MoraineError err {};
				moraine_mat_misfit(mat, state.position + r, column_id, column.c_str(), column.size(), type.c_str(),
				                   type.size(), why.c_str(), why.size(), &err);
				MoraineThrow(err);
			}
		}
	}
	state.position += count;
	output.SetCardinality(count);
}

//! EXPLAIN ANALYZE: the table, and once the scan ran, what Rust says of it (history read, rows).
static InsertionOrderPreservingMap<string> MoraineScanDynamicToString(TableFunctionDynamicToStringInput &input) {
	InsertionOrderPreservingMap<string> result;
	result["Table"] = input.bind_data->Cast<MoraineScanBindData>().table.name;
	if (input.global_state) {
		auto line = [](void *ud, const char *name, size_t name_len, const char *value, size_t value_len,
		               int64_t) noexcept {
			try {
				(*static_cast<InsertionOrderPreservingMap<string> *>(ud))[string(name, name_len)] =
				    string(value, value_len);
			} catch (...) {
				// (a line lost from EXPLAIN's text)
			}
		};
		moraine_mat_explain(input.global_state->Cast<MoraineScanState>().mat.get(), &result, line);
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

TableFunction MoraineScanFunction(MoraineTableEntry &table, unique_ptr<FunctionData> &bind_data) {
	bind_data = make_uniq<MoraineScanBindData>(table);
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
