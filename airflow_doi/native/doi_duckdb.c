/*
 * doi: a DuckDB extension (C API v1.2.0) with native doi_key, doi_normalize, doi_is_valid,
 * doi_reason and doi_url.
 *
 * Why it exists: the generated SQL macros (sql/duckdb/doi_functions.sql) are exact but need
 * several string functions per value, each about as dear as UPPER(); a column of DOIs then
 * keys at a fifth of UPPER's speed. The parse itself is doi_core.h (shared with the CPython
 * binding doi_arrow.c); this file is only DuckDB's side: vectors in, vectors out.
 *
 * Built by setuptools at install time where a C compiler is present (setup.py), or by
 * airflow_doi.native.duckdb (cc -O2 -shared) at first use; airflow_doi.native.duckdb appends
 * the metadata footer DuckDB reads before loading an (unsigned) extension.
 */
#define DUCKDB_EXTENSION_NAME doi
#define DUCKDB_EXTENSION_API_VERSION_MAJOR 1
#define DUCKDB_EXTENSION_API_VERSION_MINOR 2
#define DUCKDB_EXTENSION_API_VERSION_PATCH 0
#include "duckdb_extension.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "doi_core.h"

DUCKDB_EXTENSION_EXTERN

#ifndef DOI_SOURCE_DIGEST
#define DOI_SOURCE_DIGEST "unknown"
#endif
/* Read by airflow_doi.native.duckdb (installed_library): a library built from other sources
 * than the installed ones is not loaded. */
__attribute__((used)) static const char SOURCE_DIGEST[] = "airflow-doi-source-digest:" DOI_SOURCE_DIGEST;

enum output { OUT_KEY, OUT_NORMALIZE, OUT_IS_VALID, OUT_REASON, OUT_URL };

static void run(duckdb_function_info info, duckdb_data_chunk input, duckdb_vector output, enum output what) {
	idx_t rows = duckdb_data_chunk_get_size(input);
	duckdb_vector in = duckdb_data_chunk_get_vector(input, 0);
	duckdb_string_t *data = (duckdb_string_t *)duckdb_vector_get_data(in);
	uint64_t *validity = duckdb_vector_get_validity(in);
	bool *flags = what == OUT_IS_VALID ? (bool *)duckdb_vector_get_data(output) : NULL;
	uint64_t *out_validity = NULL;
	unsigned char small[512];
	unsigned char *buf = small;
	size_t cap = sizeof(small);

	for (idx_t row = 0; row < rows; row++) {
		if (validity && !((validity[row / 64] >> (row % 64)) & 1)) {
			if (what == OUT_IS_VALID) {
				flags[row] = false;
			} else if (what == OUT_REASON) {
				duckdb_vector_assign_string_element_len(output, row, "empty", 5);
			} else {
				if (!out_validity) {
					duckdb_vector_ensure_validity_writable(output);
					out_validity = duckdb_vector_get_validity(output);
				}
				duckdb_validity_set_row_invalid(out_validity, row);
			}
			continue;
		}
		/* duckdb_string_t is a public layout: read it directly rather than through two calls. */
		size_t n = data[row].value.inlined.length;
		const unsigned char *s = (const unsigned char *)(n <= 12 ? data[row].value.inlined.inlined
		                                                         : data[row].value.pointer.ptr);
		/* Two scratch halves of n + 1 bytes for the parse, then room for a URL (3 bytes a byte,
		 * 2 more for a dot segment's slash). */
		if (n > (SIZE_MAX - sizeof(DOI_BASE_URL) - 2) / 8) {
			duckdb_scalar_function_set_error(info, "doi: value too large");
			break;
		}
		size_t want = 2 * n + 2 + (what == OUT_URL ? DOI_URL_CAPACITY(sizeof(DOI_BASE_URL) - 1, n) : 0);
		if (want > cap) {
			unsigned char *grown = (unsigned char *)malloc(want);
			if (!grown) {
				duckdb_scalar_function_set_error(info, "doi: out of memory");
				break;
			}
			if (buf != small) {
				free(buf);
			}
			buf = grown;
			cap = want;
		}
		const unsigned char *doi = NULL;
		size_t doi_len = 0;
		unsigned char *scratch_a = buf, *scratch_b = buf + n + 1;
		enum doi_reason reason = doi_analyse(s, n, DOI_DECODE_AUTO, scratch_a, scratch_b, &doi, &doi_len);
		int has_doi = reason == DOI_R_OK || reason == DOI_R_RESERVED_SUFFIX;
		switch (what) {
		case OUT_IS_VALID:
			flags[row] = reason == DOI_R_OK;
			break;
		case OUT_REASON:
			if (reason == DOI_R_OK) {
				if (!out_validity) {
					duckdb_vector_ensure_validity_writable(output);
					out_validity = duckdb_vector_get_validity(output);
				}
				duckdb_validity_set_row_invalid(out_validity, row);
			} else {
				const char *name = DOI_REASON_NAMES[reason];
				duckdb_vector_assign_string_element_len(output, row, name, strlen(name));
			}
			break;
		default:
			if (!has_doi) {
				if (!out_validity) {
					duckdb_vector_ensure_validity_writable(output);
					out_validity = duckdb_vector_get_validity(output);
				}
				duckdb_validity_set_row_invalid(out_validity, row);
				break;
			}
			if (what == OUT_URL) {
				unsigned char *url = buf + 2 * n + 2;
				duckdb_vector_assign_string_element_len(output, row, (const char *)url, doi_to_url(doi, doi_len, DOI_BASE_URL, sizeof(DOI_BASE_URL) - 1, url));
				break;
			}
			if (what == OUT_KEY) {
				unsigned char *key = (doi >= scratch_b) ? scratch_a : scratch_b; /* not over the DOI */
				doi_ascii_upper(doi, doi_len, key);
				doi = key;
			}
			duckdb_vector_assign_string_element_len(output, row, (const char *)doi, doi_len);
		}
	}
	if (buf != small) {
		free(buf);
	}
}

/* One callback for the five functions: which answer to give travels as the extra info. */
static enum output OUTPUTS[] = {OUT_KEY, OUT_NORMALIZE, OUT_IS_VALID, OUT_REASON, OUT_URL};

static void doi_function(duckdb_function_info info, duckdb_data_chunk input, duckdb_vector output) {
	run(info, input, output, *(enum output *)duckdb_scalar_function_get_extra_info(info));
}

static bool register_one(duckdb_connection con, const char *name, duckdb_type result, enum output *what,
                         bool null_aware) {
	duckdb_scalar_function f = duckdb_create_scalar_function();
	duckdb_scalar_function_set_name(f, name);
	duckdb_logical_type varchar = duckdb_create_logical_type(DUCKDB_TYPE_VARCHAR);
	duckdb_logical_type out = duckdb_create_logical_type(result);
	duckdb_scalar_function_add_parameter(f, varchar);
	duckdb_scalar_function_set_return_type(f, out);
	duckdb_scalar_function_set_function(f, doi_function);
	duckdb_scalar_function_set_extra_info(f, what, NULL); /* static storage: nothing to free */
	if (null_aware) {
		duckdb_scalar_function_set_special_handling(f);
	}
	duckdb_state state = duckdb_register_scalar_function(con, f);
	duckdb_destroy_logical_type(&varchar);
	duckdb_destroy_logical_type(&out);
	duckdb_destroy_scalar_function(&f);
	return state == DuckDBSuccess;
}

DUCKDB_EXTENSION_ENTRYPOINT(duckdb_connection connection, duckdb_extension_info info,
                            struct duckdb_extension_access *access) {
	/* doi_is_valid and doi_reason answer NULL too (false, 'empty'), so they see NULL rows. */
	if (!register_one(connection, "doi_key", DUCKDB_TYPE_VARCHAR, &OUTPUTS[OUT_KEY], false) ||
	    !register_one(connection, "doi_normalize", DUCKDB_TYPE_VARCHAR, &OUTPUTS[OUT_NORMALIZE], false) ||
	    !register_one(connection, "doi_is_valid", DUCKDB_TYPE_BOOLEAN, &OUTPUTS[OUT_IS_VALID], true) ||
	    !register_one(connection, "doi_reason", DUCKDB_TYPE_VARCHAR, &OUTPUTS[OUT_REASON], true) ||
	    !register_one(connection, "doi_url", DUCKDB_TYPE_VARCHAR, &OUTPUTS[OUT_URL], false)) {
		access->set_error(info, "doi: could not register the DOI functions");
		return false;
	}
	return true;
}
