// moraine_ffi.h as the C++ compiler sees it, for the ABI test (extension/src/abi_tests.rs): the
// value of every enum constant and #define, and the size, alignment and offset of every field of
// every struct the header declares. The test compares them with the header's text and with
// Rust's #[repr(C)] types and constants (extension/src/ffi.rs, src/error.rs). build.rs compiles
// this file into its own archive, which only the test build links.
#include "moraine_ffi.h"

#include <stddef.h>

// (the Rust test declares the same two structs)
struct MoraineAbiConstant {
	const char *name;
	long long value;
};

struct MoraineAbiField {
	const char *type;
	const char *field;
	size_t offset;
	size_t size;
	size_t type_size;
	size_t type_align;
};

namespace {

#define MORAINE_ABI_CONSTANT(name) {#name, static_cast<long long>(name)}
// (sizeof on a member of a null pointer is not evaluated)
#define MORAINE_ABI_FIELD(T, F)                                                                                        \
	{#T, #F, offsetof(T, F), sizeof(static_cast<T *>(nullptr)->F), sizeof(T), alignof(T)}

const MoraineAbiConstant CONSTANTS[] = {
    // MoraineErrorKind
    MORAINE_ABI_CONSTANT(MORAINE_ERROR_NONE),
    MORAINE_ABI_CONSTANT(MORAINE_ERROR_INVALID_INPUT),
    MORAINE_ABI_CONSTANT(MORAINE_ERROR_CONFLICT),
    MORAINE_ABI_CONSTANT(MORAINE_ERROR_DUPLICATE),
    MORAINE_ABI_CONSTANT(MORAINE_ERROR_CONSTRAINT),
    MORAINE_ABI_CONSTANT(MORAINE_ERROR_CATALOG),
    MORAINE_ABI_CONSTANT(MORAINE_ERROR_READ_ONLY),
    MORAINE_ABI_CONSTANT(MORAINE_ERROR_IO),
    MORAINE_ABI_CONSTANT(MORAINE_ERROR_OUTCOME_UNKNOWN),
    MORAINE_ABI_CONSTANT(MORAINE_ERROR_FENCED),
    MORAINE_ABI_CONSTANT(MORAINE_ERROR_CORRUPT),
    MORAINE_ABI_CONSTANT(MORAINE_ERROR_INTERNAL),
    // MoraineExceptionType
    MORAINE_ABI_CONSTANT(MORAINE_EXCEPTION_NONE),
    MORAINE_ABI_CONSTANT(MORAINE_EXCEPTION_INVALID_INPUT),
    MORAINE_ABI_CONSTANT(MORAINE_EXCEPTION_TRANSACTION),
    MORAINE_ABI_CONSTANT(MORAINE_EXCEPTION_CONSTRAINT),
    MORAINE_ABI_CONSTANT(MORAINE_EXCEPTION_CATALOG),
    MORAINE_ABI_CONSTANT(MORAINE_EXCEPTION_PERMISSION),
    MORAINE_ABI_CONSTANT(MORAINE_EXCEPTION_IO),
    MORAINE_ABI_CONSTANT(MORAINE_EXCEPTION_CONNECTION),
    // MoraineCellTag
    MORAINE_ABI_CONSTANT(MORAINE_NULL),
    MORAINE_ABI_CONSTANT(MORAINE_INT),
    MORAINE_ABI_CONSTANT(MORAINE_BOOL),
    MORAINE_ABI_CONSTANT(MORAINE_FLOAT),
    MORAINE_ABI_CONSTANT(MORAINE_TEXT),
    MORAINE_ABI_CONSTANT(MORAINE_BLOB),
    // MoraineFieldKind
    MORAINE_ABI_CONSTANT(MORAINE_FIELD_TEXT),
    MORAINE_ABI_CONSTANT(MORAINE_FIELD_BIGINT),
    MORAINE_ABI_CONSTANT(MORAINE_FIELD_TIME),
    // MoraineSettingType, MoraineOnSet
    MORAINE_ABI_CONSTANT(MORAINE_SETTING_INTERVAL),
    MORAINE_ABI_CONSTANT(MORAINE_SETTING_TEXT),
    MORAINE_ABI_CONSTANT(MORAINE_ON_SET_NOTHING),
    MORAINE_ABI_CONSTANT(MORAINE_ON_SET_CHECK_MAX_COMMIT_SIZE),
    MORAINE_ABI_CONSTANT(MORAINE_ON_SET_SET_LOG_LEVEL),
    // MoraineOp
    MORAINE_ABI_CONSTANT(MORAINE_OP_EQ),
    MORAINE_ABI_CONSTANT(MORAINE_OP_LT),
    MORAINE_ABI_CONSTANT(MORAINE_OP_LE),
    MORAINE_ABI_CONSTANT(MORAINE_OP_GT),
    MORAINE_ABI_CONSTANT(MORAINE_OP_GE),
    MORAINE_ABI_CONSTANT(MORAINE_OP_IS_NULL),
};

const MoraineAbiField FIELDS[] = {
    MORAINE_ABI_FIELD(MoraineError, ptr),
    MORAINE_ABI_FIELD(MoraineError, len),
    MORAINE_ABI_FIELD(MoraineError, kind),
    MORAINE_ABI_FIELD(MoraineError, exception),
    MORAINE_ABI_FIELD(MoraineCell, tag),
    MORAINE_ABI_FIELD(MoraineCell, i),
    MORAINE_ABI_FIELD(MoraineCell, f),
    MORAINE_ABI_FIELD(MoraineCell, ptr),
    MORAINE_ABI_FIELD(MoraineCell, len),
    MORAINE_ABI_FIELD(MoraineColumnIn, name),
    MORAINE_ABI_FIELD(MoraineColumnIn, name_len),
    MORAINE_ABI_FIELD(MoraineColumnIn, type_name),
    MORAINE_ABI_FIELD(MoraineColumnIn, type_name_len),
    MORAINE_ABI_FIELD(MoraineColumnIn, type_blob),
    MORAINE_ABI_FIELD(MoraineColumnIn, type_blob_len),
    MORAINE_ABI_FIELD(MoraineOption, key),
    MORAINE_ABI_FIELD(MoraineOption, key_len),
    MORAINE_ABI_FIELD(MoraineOption, value),
    MORAINE_ABI_FIELD(MoraineOption, value_len),
    MORAINE_ABI_FIELD(MoraineSetting, name),
    MORAINE_ABI_FIELD(MoraineSetting, name_len),
    MORAINE_ABI_FIELD(MoraineSetting, description),
    MORAINE_ABI_FIELD(MoraineSetting, description_len),
    MORAINE_ABI_FIELD(MoraineSetting, default_value),
    MORAINE_ABI_FIELD(MoraineSetting, default_len),
    MORAINE_ABI_FIELD(MoraineSetting, ty),
    MORAINE_ABI_FIELD(MoraineSetting, on_set),
    MORAINE_ABI_FIELD(MoraineSetting, store_option),
    MORAINE_ABI_FIELD(MoraineSetting, store_option_len),
    MORAINE_ABI_FIELD(MoraineAttachPlan, s3),
    MORAINE_ABI_FIELD(MoraineAttachPlan, read_only),
    MORAINE_ABI_FIELD(MoraineAttachPlan, read_write_again),
    MORAINE_ABI_FIELD(MorainePredicate, filter),
    MORAINE_ABI_FIELD(MorainePredicate, clause),
    MORAINE_ABI_FIELD(MorainePredicate, column),
    MORAINE_ABI_FIELD(MorainePredicate, op),
    MORAINE_ABI_FIELD(MorainePredicate, value),
    MORAINE_ABI_FIELD(MoraineIntStats, min),
    MORAINE_ABI_FIELD(MoraineIntStats, max),
    MORAINE_ABI_FIELD(MoraineIntStats, has_value),
    MORAINE_ABI_FIELD(MoraineIntStats, has_null),
};

} // namespace

extern "C" size_t moraine_abi_constants(const MoraineAbiConstant **out) {
	*out = CONSTANTS;
	return sizeof(CONSTANTS) / sizeof(CONSTANTS[0]);
}

extern "C" size_t moraine_abi_fields(const MoraineAbiField **out) {
	*out = FIELDS;
	return sizeof(FIELDS) / sizeof(FIELDS[0]);
}
