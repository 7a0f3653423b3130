/*
 * doi: a DuckDB extension (C API v1.2.0) with native doi_key, doi_normalize, doi_is_valid,
 * doi_reason and doi_url.
 *
 * Why it exists: the generated SQL macros (sql/duckdb/doi_functions.sql) are exact but need
 * several string functions per value, each about as dear as UPPER(); a column of DOIs then
 * keys at a fifth of UPPER's speed. This file parses a value in one pass over its bytes.
 *
 * It is a line-for-line port of airflow_doi.syntax._analyse (decode="auto"); the constants
 * below are checked against the Python ones by tests/test_duckdb_native.py, and every
 * conformance vector and a random mixture are run through both. Change the two together.
 *
 * Built by airflow_doi.duckdb_native (cc -O2 -shared), which appends the metadata footer
 * DuckDB reads before loading an (unsigned) extension.
 */
#define DUCKDB_EXTENSION_NAME doi
#define DUCKDB_EXTENSION_API_VERSION_MAJOR 1
#define DUCKDB_EXTENSION_API_VERSION_MINOR 2
#define DUCKDB_EXTENSION_API_VERSION_PATCH 0
#include "duckdb_extension.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

DUCKDB_EXTENSION_EXTERN

/* Reason codes, in syntax.REASONS order; R_OK: a valid DOI. */
enum reason {
	R_OK = -1,
	R_EMPTY = 0,
	R_BAD_ENCODING,
	R_BAD_CHARACTER,
	R_BAD_DIRECTORY,
	R_BAD_REGISTRANT,
	R_MISSING_SUFFIX,
	R_RESERVED_SUFFIX,
};
static const char *const REASON_NAMES[] = {"empty",          "bad_encoding",   "bad_character", "bad_directory",
                                           "bad_registrant", "missing_suffix", "reserved_suffix"};

/* syntax.WHITESPACE (stripped after "doi:") and syntax.TRIM_CHARS (stripped at both ends). */
static const uint32_t WHITESPACE[] = {0x09,   0x0A,   0x0B,   0x0C,   0x0D,   0x20,   0x85,   0xA0,
                                      0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006,
                                      0x2007, 0x2008, 0x2009, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F,
                                      0x3000};
#define N_WHITESPACE (sizeof(WHITESPACE) / sizeof(WHITESPACE[0]))
static const uint32_t TRIM_EXTRA[] = {0x200B, 0xFEFF};

/* syntax.ILLEGAL_RANGES: code points that are not legal graphic characters (Unicode 14). */
static const uint32_t ILLEGAL[][2] = {
    {0x0000, 0x001F},   {0x007F, 0x009F},   {0x00AD, 0x00AD},   {0x0600, 0x0605},   {0x061C, 0x061C},
    {0x06DD, 0x06DD},   {0x070F, 0x070F},   {0x0890, 0x0891},   {0x08E2, 0x08E2},   {0x180E, 0x180E},
    {0x200B, 0x200F},   {0x2028, 0x202E},   {0x2060, 0x2064},   {0x2066, 0x206F},   {0xE000, 0xF8FF},
    {0xFDD0, 0xFDEF},   {0xFEFF, 0xFEFF},   {0xFFF9, 0xFFFB},   {0xFFFE, 0xFFFF},   {0x110BD, 0x110BD},
    {0x110CD, 0x110CD}, {0x13430, 0x13438}, {0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A}, {0x1FFFE, 0x1FFFF},
    {0x2FFFE, 0x2FFFF}, {0x3FFFE, 0x3FFFF}, {0x4FFFE, 0x4FFFF}, {0x5FFFE, 0x5FFFF}, {0x6FFFE, 0x6FFFF},
    {0x7FFFE, 0x7FFFF}, {0x8FFFE, 0x8FFFF}, {0x9FFFE, 0x9FFFF}, {0xAFFFE, 0xAFFFF}, {0xBFFFE, 0xBFFFF},
    {0xCFFFE, 0xCFFFF}, {0xDFFFE, 0xDFFFF}, {0xE0001, 0xE0001}, {0xE0020, 0xE007F}, {0xEFFFE, 0x10FFFF},
};
#define N_ILLEGAL (sizeof(ILLEGAL) / sizeof(ILLEGAL[0]))

/* syntax.URL_HOSTS (after http:// or https://) and syntax.SCHEMELESS_HOSTS, each with "/". */
static const char *const URL_HOSTS[] = {"doi.org/", "dx.doi.org/", "www.doi.org/", "hdl.handle.net/"};
static const char *const SCHEMELESS_HOSTS[] = {"doi.org/", "dx.doi.org/"};

/* Decode one UTF-8 code point (DuckDB strings are valid UTF-8); returns its length. */
static inline size_t utf8_next(const unsigned char *s, size_t n, uint32_t *cp) {
	unsigned char c = s[0];
	if (c < 0x80 || n < 2) {
		*cp = c;
		return 1;
	}
	if (c < 0xE0) {
		*cp = ((uint32_t)(c & 0x1F) << 6) | (s[1] & 0x3F);
		return 2;
	}
	if (c < 0xF0 || n < 4) {
		*cp = n < 3 ? c : ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
		return n < 3 ? 1 : 3;
	}
	*cp = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) | ((uint32_t)(s[2] & 0x3F) << 6) |
	      (s[3] & 0x3F);
	return 4;
}

/* Length of the code point that ends at s[n-1]. */
static inline size_t utf8_prev_len(const unsigned char *s, size_t n) {
	size_t len = 1;
	while (len < n && len < 4 && (s[n - len] & 0xC0) == 0x80) {
		len++;
	}
	return len;
}

static int in_set(uint32_t cp, const uint32_t *set, size_t n) {
	for (size_t i = 0; i < n; i++) {
		if (set[i] == cp) {
			return 1;
		}
	}
	return 0;
}

static inline int is_trim(uint32_t cp) {
	return in_set(cp, WHITESPACE, N_WHITESPACE) || in_set(cp, TRIM_EXTRA, 2);
}

static int is_illegal(uint32_t cp) {
	if (cp < 0x80) {
		return cp < 0x20 || cp == 0x7F;
	}
	for (size_t i = 0; i < N_ILLEGAL; i++) {
		if (cp < ILLEGAL[i][0]) {
			return 0;
		}
		if (cp <= ILLEGAL[i][1]) {
			return 1;
		}
	}
	return 0;
}

/* Strip TRIM_CHARS from both ends of *s (a printable ASCII end byte other than space stays). */
static void trim(const unsigned char **s, size_t *n) {
	const unsigned char *p = *s;
	size_t k = *n;
	while (k && !(p[0] > 0x20 && p[0] < 0x7F)) {
		uint32_t cp;
		size_t len = utf8_next(p, k, &cp);
		if (!is_trim(cp)) {
			break;
		}
		p += len;
		k -= len;
	}
	while (k && !(p[k - 1] > 0x20 && p[k - 1] < 0x7F)) {
		size_t len = utf8_prev_len(p, k);
		uint32_t cp;
		utf8_next(p + k - len, len, &cp);
		if (!is_trim(cp)) {
			break;
		}
		k -= len;
	}
	*s = p;
	*n = k;
}

static inline unsigned char ascii_lower(unsigned char c) {
	return (c >= 'A' && c <= 'Z') ? (unsigned char)(c + 32) : c;
}

/* Does s (length n) start with the lower-case ASCII literal lit, ignoring ASCII case only? */
static int starts_ci(const unsigned char *s, size_t n, const char *lit) {
	size_t k = strlen(lit);
	if (n < k) {
		return 0;
	}
	for (size_t i = 0; i < k; i++) {
		if (ascii_lower(s[i]) != (unsigned char)lit[i]) {
			return 0;
		}
	}
	return 1;
}

static size_t match_host(const unsigned char *s, size_t n, const char *const *hosts, size_t count) {
	for (size_t i = 0; i < count; i++) {
		if (starts_ci(s, n, hosts[i])) {
			return strlen(hosts[i]);
		}
	}
	return 0;
}

/* Length of the URL prefix (syntax._URL_RE) at the start of s, or 0. */
static size_t url_prefix(const unsigned char *s, size_t n) {
	size_t scheme = starts_ci(s, n, "https://") ? 8 : starts_ci(s, n, "http://") ? 7 : 0;
	if (scheme) {
		size_t host = match_host(s + scheme, n - scheme, URL_HOSTS, 4);
		if (host) {
			return scheme + host;
		}
	}
	return match_host(s, n, SCHEMELESS_HOSTS, 2);
}

static inline int hexval(unsigned char c) {
	if (c >= '0' && c <= '9') {
		return c - '0';
	}
	c = ascii_lower(c);
	return (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
}

/* Length of a well-formed UTF-8 sequence at b[0..n) (Python's strict decoder), or 0. */
static size_t utf8_valid_seq(const unsigned char *b, size_t n) {
	unsigned char c = b[0];
	if (c < 0x80) {
		return 1;
	}
	size_t len;
	unsigned char lo = 0x80, hi = 0xBF;
	if (c >= 0xC2 && c <= 0xDF) {
		len = 2;
	} else if (c >= 0xE0 && c <= 0xEF) {
		len = 3;
		lo = c == 0xE0 ? 0xA0 : 0x80;
		hi = c == 0xED ? 0x9F : 0xBF;
	} else if (c >= 0xF0 && c <= 0xF4) {
		len = 4;
		lo = c == 0xF0 ? 0x90 : 0x80;
		hi = c == 0xF4 ? 0x8F : 0xBF;
	} else {
		return 0;
	}
	if (n < len || b[1] < lo || b[1] > hi) {
		return 0;
	}
	for (size_t i = 2; i < len; i++) {
		if (b[i] < 0x80 || b[i] > 0xBF) {
			return 0;
		}
	}
	return len;
}

/*
 * syntax._percent_decode into out (capacity >= n): every "%" must start "%XX", and each run
 * of escapes must decode to well-formed UTF-8 on its own. Returns 1 and the length, or 0.
 */
static int percent_decode(const unsigned char *s, size_t n, unsigned char *out, size_t *out_len) {
	size_t o = 0, i = 0;
	while (i < n) {
		if (s[i] != '%') {
			out[o++] = s[i++];
			continue;
		}
		size_t run_start = o;
		while (i < n && s[i] == '%') {
			if (i + 2 >= n) {
				return 0;
			}
			int h = hexval(s[i + 1]), l = hexval(s[i + 2]);
			if (h < 0 || l < 0) {
				return 0;
			}
			out[o++] = (unsigned char)(h * 16 + l);
			i += 3;
		}
		for (size_t k = run_start; k < o;) {
			size_t len = utf8_valid_seq(out + k, o - k);
			if (!len) {
				return 0;
			}
			k += len;
		}
	}
	*out_len = o;
	return 1;
}

/*
 * The parse (syntax._analyse with decode="auto"). On success (reason R_OK or
 * R_RESERVED_SUFFIX) *doi and *doi_len point at the normalized DOI: into the input, or into
 * scratch_a or scratch_b (n bytes each) when it had to be rebuilt (a URN's colon, escapes).
 */
static enum reason analyse(const unsigned char *s, size_t n, unsigned char *scratch_a, unsigned char *scratch_b,
                           const unsigned char **doi, size_t *doi_len) {
	trim(&s, &n);
	if (!n) {
		return R_EMPTY;
	}

	/* Unwrap (syntax._unwrap). */
	int decode = 0, urn = 0;
	const unsigned char *d = s;
	size_t dn = n;
	if (n >= 3 && memcmp(s, "10.", 3) == 0) {
		/* bare */
	} else {
		size_t prefix = url_prefix(s, n);
		if (prefix) {
			d = s + prefix;
			dn = n - prefix;
			for (size_t i = 0; i < dn; i++) {
				if (d[i] == '?' || d[i] == '#') {
					dn = i;
					break;
				}
			}
			decode = 1;
			if (starts_ci(d, dn, "urn:doi:")) {
				d += 8;
				dn -= 8;
				urn = 1;
			}
		} else if (starts_ci(s, n, "doi:")) {
			d = s + 4;
			dn = n - 4;
			while (dn) {
				uint32_t cp;
				size_t len = utf8_next(d, dn, &cp);
				if (!in_set(cp, WHITESPACE, N_WHITESPACE)) {
					break;
				}
				d += len;
				dn -= len;
			}
		} else if (starts_ci(s, n, "urn:doi:")) {
			d = s + 8;
			dn = n - 8;
			decode = urn = 1;
		} else if (starts_ci(s, n, "info:doi/")) {
			d = s + 9;
			dn = n - 9;
			decode = 1;
		}
	}
	if (!dn) {
		return R_EMPTY;
	}
	if (urn) {
		/* syntax._urn_colon: a colon before any slash stands for the first slash. */
		for (size_t i = 0; i < dn; i++) {
			if (d[i] == '/') {
				break;
			}
			if (d[i] == ':') {
				memcpy(scratch_a, d, dn);
				scratch_a[i] = '/';
				d = scratch_a;
				break;
			}
		}
	}
	if (decode && memchr(d, '%', dn)) {
		unsigned char *out = (d == scratch_a) ? scratch_b : scratch_a;
		if (!percent_decode(d, dn, out, &dn)) {
			return R_BAD_ENCODING;
		}
		d = out;
	}

	/* Trim again (syntax._analyse): decoding (%20), a cut query or a wrapper can leave an
	 * edge that the first trim would have removed from a bare DOI. */
	trim(&d, &dn);
	if (!dn) {
		return R_EMPTY;
	}

	/* bad_character: decoded bytes are well-formed UTF-8 here (input, or checked runs). */
	for (size_t i = 0; i < dn;) {
		if (d[i] < 0x80) {
			if (d[i] < 0x20 || d[i] == 0x7F) {
				return R_BAD_CHARACTER;
			}
			i++;
			continue;
		}
		uint32_t cp;
		i += utf8_next(d + i, dn - i, &cp);
		if (is_illegal(cp)) {
			return R_BAD_CHARACTER;
		}
	}
	if (dn < 3 || memcmp(d, "10.", 3) != 0) {
		return R_BAD_DIRECTORY;
	}
	/* Registrant: [0-9]+(\.[0-9]+)* up to the first "/". */
	size_t i = 3;
	int digits = 0;
	for (; i < dn && d[i] != '/'; i++) {
		if (d[i] >= '0' && d[i] <= '9') {
			digits++;
		} else if (d[i] == '.' && digits) {
			digits = 0;
		} else {
			return R_BAD_REGISTRANT;
		}
	}
	if (!digits) {
		return R_BAD_REGISTRANT;
	}
	if (i >= dn || i + 1 >= dn) {
		return R_MISSING_SUFFIX;
	}
	*doi = d;
	*doi_len = dn;
	/* Reserved (Z39.84 4.3): the suffix's second character is "/". The first character may be
	 * multi-byte. */
	const unsigned char *suffix = d + i + 1;
	size_t rest = dn - i - 1;
	uint32_t cp;
	size_t first = utf8_next(suffix, rest, &cp);
	if (rest > first && suffix[first] == '/') {
		return R_RESERVED_SUFFIX;
	}
	return R_OK;
}

/* presentation.DEFAULT_BASE_URL, and the IDF mandatory + recommended sets (presentation). */
static const char BASE_URL[] = "https://doi.org/";
static const char URL_ESCAPED[] = "%\"# ?<>{}^[]`|\\+";

/*
 * presentation.encode_path after the base URL: both IDF sets and every non-ASCII byte as %XX
 * (upper-case hex), then presentation.DOT_SEGMENT_REWRITES: "/./" -> "/.%2F" and "/../" ->
 * "/..%2F", left to right, then a final "/." or "/.." -> "%2F." or "%2F..". out needs room for
 * sizeof(BASE_URL) + 5 * n bytes.
 */
static size_t to_url(const unsigned char *doi, size_t n, unsigned char *out) {
	static const char HEX[] = "0123456789ABCDEF";
	size_t o = sizeof(BASE_URL) - 1;
	memcpy(out, BASE_URL, o);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = doi[i];
		if (c >= 0x80 || (c && strchr(URL_ESCAPED, c))) {
			out[o++] = '%';
			out[o++] = (unsigned char)HEX[c >> 4];
			out[o++] = (unsigned char)HEX[c & 15];
			continue;
		}
		out[o++] = c;
		/* A dot segment ends at this "/": "/./" or "/../" just written, not overlapping an
		 * earlier replacement (whose "%2F" cannot be a "/"). */
		if (c == '/') {
			size_t start = sizeof(BASE_URL) - 1;
			if (o - start >= 3 && out[o - 2] == '.' && out[o - 3] == '/') {
				memcpy(out + o - 1, "%2F", 3);
				o += 2;
			} else if (o - start >= 4 && out[o - 2] == '.' && out[o - 3] == '.' && out[o - 4] == '/') {
				memcpy(out + o - 1, "%2F", 3);
				o += 2;
			}
		}
	}
	/* A dot segment at the end has no slash after it: encode the one before it. A DOI holds
	 * "10.x/" before its suffix, so the slash found is the DOI's, never the base URL's. */
	size_t dots = (o >= 2 && out[o - 1] == '.') ? (out[o - 2] == '.' ? 2 : 1) : 0;
	if (dots && o > dots && out[o - dots - 1] == '/' && o - dots - 1 >= sizeof(BASE_URL) - 1) {
		memmove(out + o - dots + 2, out + o - dots, dots);
		memcpy(out + o - dots - 1, "%2F", 3);
		o += 2;
	}
	return o;
}

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
		if (n > (SIZE_MAX - sizeof(BASE_URL) - 2) / 8) {
			duckdb_scalar_function_set_error(info, "doi: value too large");
			break;
		}
		size_t want = 2 * n + 2 + (what == OUT_URL ? sizeof(BASE_URL) + 5 * n : 0);
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
		enum reason reason = analyse(s, n, scratch_a, scratch_b, &doi, &doi_len);
		int has_doi = reason == R_OK || reason == R_RESERVED_SUFFIX;
		switch (what) {
		case OUT_IS_VALID:
			flags[row] = reason == R_OK;
			break;
		case OUT_REASON:
			if (reason == R_OK) {
				if (!out_validity) {
					duckdb_vector_ensure_validity_writable(output);
					out_validity = duckdb_vector_get_validity(output);
				}
				duckdb_validity_set_row_invalid(out_validity, row);
			} else {
				const char *name = REASON_NAMES[reason];
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
				duckdb_vector_assign_string_element_len(output, row, (const char *)url, to_url(doi, doi_len, url));
				break;
			}
			if (what == OUT_KEY) {
				/* ASCII a-z only: bytes >= 0x80 belong to multi-byte characters and stay. */
				unsigned char *key = (doi == scratch_b) ? scratch_a : scratch_b; /* not over the DOI */
				for (size_t k = 0; k < doi_len; k++) {
					unsigned char c = doi[k];
					key[k] = (c >= 'a' && c <= 'z') ? (unsigned char)(c - 32) : c;
				}
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
