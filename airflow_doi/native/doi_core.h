/*
 * doi_core.h: the DOI standard in one pass over a value's UTF-8 bytes, for the native bindings
 * (doi_duckdb.c, the DuckDB extension; doi_arrow.c, the CPython module over Arrow arrays).
 *
 * Why C: the generated SQL and the Arrow compute path each need several string passes or a
 * regular expression per value; this parses a value once, with no allocation: the caller
 * hands in scratch space. It is a port of airflow_doi.syntax._analyse and
 * presentation.encode_path; its tables come from the Python constants (doi_tables.h, generated
 * by airflow_doi/native/tables.py), and the tests run every conformance vector, hypothesis
 * strings and random mixtures through both. Change the Python and this file together.
 *
 * Header-only (every function static): each binding is one translation unit, so the compiler
 * inlines the parse into the binding's row loop.
 */
#ifndef DOI_CORE_H
#define DOI_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "doi_tables.h"

/* syntax.Decode: when percent-escapes are undone. */
enum doi_decode { DOI_DECODE_AUTO = 0, DOI_DECODE_ALWAYS = 1, DOI_DECODE_NEVER = 2 };

/* Word-at-a-time tests on eight bytes (exact as a yes/no answer: a false hit can only sit
 * above a true one). */
#define DOI_ONES UINT64_C(0x0101010101010101)

static inline uint64_t doi_has_zero_byte(uint64_t w) {
	return (w - DOI_ONES) & ~w & DOI_ONES * 0x80;
}

/* Some byte below b (b <= 0x80); bytes >= 0x80 never count. */
static inline uint64_t doi_has_byte_below(uint64_t w, unsigned char b) {
	return (w - DOI_ONES * b) & ~w & DOI_ONES * 0x80;
}

/* Decode one UTF-8 code point of valid UTF-8 text; returns its length. */
static inline size_t doi_utf8_next(const unsigned char *s, size_t n, uint32_t *cp) {
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
static inline size_t doi_utf8_prev_len(const unsigned char *s, size_t n) {
	size_t len = 1;
	while (len < n && len < 4 && (s[n - len] & 0xC0) == 0x80) {
		len++;
	}
	return len;
}

static inline int doi_in_set(uint32_t cp, const uint32_t *set, size_t n) {
	for (size_t i = 0; i < n; i++) {
		if (set[i] == cp) {
			return 1;
		}
	}
	return 0;
}

static inline int doi_is_whitespace(uint32_t cp) {
	return doi_in_set(cp, DOI_WHITESPACE, DOI_N_WHITESPACE);
}

static inline int doi_is_trim(uint32_t cp) {
	return doi_is_whitespace(cp) || doi_in_set(cp, DOI_TRIM_EXTRA, DOI_N_TRIM_EXTRA);
}

static inline int doi_is_illegal(uint32_t cp) {
	if (cp < 0x80) {
		return cp < 0x20 || cp == 0x7F;
	}
	for (size_t i = 0; i < DOI_N_ILLEGAL; i++) {
		if (cp < DOI_ILLEGAL[i][0]) {
			return 0;
		}
		if (cp <= DOI_ILLEGAL[i][1]) {
			return 1;
		}
	}
	return 0;
}

/* A byte that can only be a printable ASCII character other than space: never trimmed. */
static inline int doi_kept_edge(unsigned char c) {
	return c > 0x20 && c < 0x7F;
}

/* Strip TRIM_CHARS from both ends of *s. */
static inline void doi_trim(const unsigned char **s, size_t *n) {
	const unsigned char *p = *s;
	size_t k = *n;
	while (k && !doi_kept_edge(p[0])) {
		uint32_t cp;
		size_t len = doi_utf8_next(p, k, &cp);
		if (!doi_is_trim(cp)) {
			break;
		}
		p += len;
		k -= len;
	}
	while (k && !doi_kept_edge(p[k - 1])) {
		size_t len = doi_utf8_prev_len(p, k);
		uint32_t cp;
		doi_utf8_next(p + k - len, len, &cp);
		if (!doi_is_trim(cp)) {
			break;
		}
		k -= len;
	}
	*s = p;
	*n = k;
}

static inline unsigned char doi_ascii_lower(unsigned char c) {
	return (c >= 'A' && c <= 'Z') ? (unsigned char)(c + 32) : c;
}

/* Does s (length n) start with the lower-case ASCII literal lit (length k), ignoring ASCII
 * case only (never the Kelvin sign for k, nor the long s for s)? */
static inline int doi_starts_ci(const unsigned char *s, size_t n, const char *lit, size_t k) {
	if (n < k) {
		return 0;
	}
	for (size_t i = 0; i < k; i++) {
		if (doi_ascii_lower(s[i]) != (unsigned char)lit[i]) {
			return 0;
		}
	}
	return 1;
}

#define DOI_STARTS_CI(s, n, lit) doi_starts_ci((s), (n), (lit), sizeof(lit) - 1)

static inline size_t doi_match_host(const unsigned char *s, size_t n, const char *const *hosts, size_t count) {
	for (size_t i = 0; i < count; i++) {
		size_t k = strlen(hosts[i]);
		if (doi_starts_ci(s, n, hosts[i], k)) {
			return k;
		}
	}
	return 0;
}

/* Length of the URL prefix (syntax._URL_RE) at the start of s, or 0. */
static inline size_t doi_url_prefix(const unsigned char *s, size_t n) {
	size_t scheme = DOI_STARTS_CI(s, n, "https://") ? 8 : DOI_STARTS_CI(s, n, "http://") ? 7 : 0;
	if (scheme) {
		size_t host = doi_match_host(s + scheme, n - scheme, DOI_URL_HOSTS, DOI_N_URL_HOSTS);
		if (host) {
			return scheme + host;
		}
	}
	return doi_match_host(s, n, DOI_SCHEMELESS_HOSTS, DOI_N_SCHEMELESS_HOSTS);
}

static inline int doi_hexval(unsigned char c) {
	if (c >= '0' && c <= '9') {
		return c - '0';
	}
	c = doi_ascii_lower(c);
	return (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
}

/* Length of a well-formed UTF-8 sequence at b[0..n) (Python's strict decoder), or 0. */
static inline size_t doi_utf8_valid_seq(const unsigned char *b, size_t n) {
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
static inline int doi_percent_decode(const unsigned char *s, size_t n, unsigned char *out, size_t *out_len) {
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
			int h = doi_hexval(s[i + 1]), l = doi_hexval(s[i + 2]);
			if (h < 0 || l < 0) {
				return 0;
			}
			out[o++] = (unsigned char)(h * 16 + l);
			i += 3;
		}
		for (size_t k = run_start; k < o;) {
			size_t len = doi_utf8_valid_seq(out + k, o - k);
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
 * The parse (syntax._analyse) of valid UTF-8 text. On success (DOI_R_OK or DOI_R_RESERVED_SUFFIX)
 * *doi and *doi_len hold the normalized DOI: into the input, or into scratch_a or scratch_b
 * (n bytes each) when it had to be rebuilt (a URN's colon, escapes).
 */
static inline enum doi_reason doi_analyse(const unsigned char *s, size_t n, enum doi_decode mode,
                                          unsigned char *scratch_a, unsigned char *scratch_b,
                                          const unsigned char **doi, size_t *doi_len) {
	doi_trim(&s, &n);
	if (!n) {
		return DOI_R_EMPTY;
	}

	/* Unwrap (syntax._unwrap): the form decides whether "auto" decodes. */
	int decode = mode == DOI_DECODE_ALWAYS, urn = 0;
	const unsigned char *d = s;
	size_t dn = n;
	if (n >= sizeof(DOI_DIRECTORY) - 1 && memcmp(s, DOI_DIRECTORY, sizeof(DOI_DIRECTORY) - 1) == 0) {
		/* bare */
	} else {
		size_t prefix = doi_url_prefix(s, n);
		if (prefix) {
			d = s + prefix;
			dn = n - prefix;
			/* The query or fragment is cut: at the first "?" or "#". */
			const unsigned char *query = memchr(d, '?', dn), *fragment = memchr(d, '#', dn);
			if (query && (!fragment || query < fragment)) {
				dn = (size_t)(query - d);
			} else if (fragment) {
				dn = (size_t)(fragment - d);
			}
			decode |= mode == DOI_DECODE_AUTO;
			if (DOI_STARTS_CI(d, dn, DOI_URN_PREFIX)) {
				d += sizeof(DOI_URN_PREFIX) - 1;
				dn -= sizeof(DOI_URN_PREFIX) - 1;
				urn = 1;
			}
		} else if (DOI_STARTS_CI(s, n, DOI_SCHEME)) {
			d = s + sizeof(DOI_SCHEME) - 1;
			dn = n - (sizeof(DOI_SCHEME) - 1);
			while (dn) {
				uint32_t cp;
				size_t len = doi_utf8_next(d, dn, &cp);
				if (!doi_is_whitespace(cp)) {
					break;
				}
				d += len;
				dn -= len;
			}
		} else if (DOI_STARTS_CI(s, n, DOI_URN_PREFIX)) {
			d = s + sizeof(DOI_URN_PREFIX) - 1;
			dn = n - (sizeof(DOI_URN_PREFIX) - 1);
			decode |= mode == DOI_DECODE_AUTO;
			urn = 1;
		} else if (DOI_STARTS_CI(s, n, DOI_INFO_PREFIX)) {
			d = s + sizeof(DOI_INFO_PREFIX) - 1;
			dn = n - (sizeof(DOI_INFO_PREFIX) - 1);
			decode |= mode == DOI_DECODE_AUTO;
		}
	}
	if (!dn) {
		return DOI_R_EMPTY;
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
		if (!doi_percent_decode(d, dn, out, &dn)) {
			return DOI_R_BAD_ENCODING;
		}
		d = out;
	}

	/* Trim again: decoding (%20), a cut query or a wrapper can leave an edge that the first
	 * trim would have removed from a bare DOI. */
	doi_trim(&d, &dn);
	if (!dn) {
		return DOI_R_EMPTY;
	}

	/* bad_character: decoded bytes are well-formed UTF-8 here (input, or checked runs). A
	 * word-at-a-time pass finds ASCII controls and whether any byte is non-ASCII; only then
	 * are code points decoded and looked up. */
	uint64_t any_high = 0, any_control = 0;
	size_t i = 0;
	for (; i + 8 <= dn; i += 8) {
		uint64_t w;
		memcpy(&w, d + i, 8);
		any_high |= w;
		any_control |= doi_has_byte_below(w, 0x20) | doi_has_zero_byte(w ^ DOI_ONES * 0x7F);
	}
	for (; i < dn; i++) {
		any_high |= d[i];
		any_control |= (uint64_t)((d[i] < 0x20) | (d[i] == 0x7F));
	}
	if (any_control) {
		return DOI_R_BAD_CHARACTER;
	}
	if (any_high & DOI_ONES * 0x80) {
		for (i = 0; i < dn;) {
			if (d[i] < 0x80) {
				i++;
				continue;
			}
			uint32_t cp;
			i += doi_utf8_next(d + i, dn - i, &cp);
			if (doi_is_illegal(cp)) {
				return DOI_R_BAD_CHARACTER;
			}
		}
	}
	if (dn < sizeof(DOI_DIRECTORY) - 1 || memcmp(d, DOI_DIRECTORY, sizeof(DOI_DIRECTORY) - 1) != 0) {
		/* A shortDOI (syntax.SHORT_DOI_PATTERN): the prefix, then code bytes, a letter among them. */
		size_t k = sizeof(DOI_SHORT_PREFIX) - 1;
		if (dn > k && memcmp(d, DOI_SHORT_PREFIX, k) == 0) {
			int letter = 0;
			while (k < dn && d[k] < 0x80 && DOI_SHORT_CODE_BYTE[d[k]]) {
				letter |= DOI_SHORT_CODE_BYTE[d[k]] == 2;
				k++;
			}
			if (k == dn && letter) {
				return DOI_R_SHORT_DOI;
			}
		}
		return DOI_R_BAD_DIRECTORY;
	}
	/* Registrant: [0-9]+(\.[0-9]+)* up to the first "/". */
	i = sizeof(DOI_DIRECTORY) - 1;
	int digits = 0;
	for (; i < dn && d[i] != '/'; i++) {
		if (d[i] >= '0' && d[i] <= '9') {
			digits++;
		} else if (d[i] == '.' && digits) {
			digits = 0;
		} else {
			return DOI_R_BAD_REGISTRANT;
		}
	}
	if (!digits) {
		return DOI_R_BAD_REGISTRANT;
	}
	if (i >= dn || i + 1 >= dn) {
		return DOI_R_MISSING_SUFFIX;
	}
	*doi = d;
	*doi_len = dn;
	/* Reserved (Z39.84 4.3): the suffix's second character is "/"; the first may be multi-byte. */
	const unsigned char *suffix = d + i + 1;
	size_t rest = dn - i - 1;
	uint32_t cp;
	size_t first = doi_utf8_next(suffix, rest, &cp);
	if (rest > first && suffix[first] == '/') {
		return DOI_R_RESERVED_SUFFIX;
	}
	return DOI_R_OK;
}

/* ASCII a-z to A-Z only (the comparison key): bytes >= 0x80 belong to multi-byte characters.
 * Eight bytes at a time: a byte's high bit marks it as a-z (from the 7-bit value, and only
 * where the byte itself is ASCII), and that bit shifted to 0x20 clears its case. */
static inline void doi_ascii_upper(const unsigned char *in, size_t n, unsigned char *out) {
	size_t k = 0;
	for (; k + 8 <= n; k += 8) {
		uint64_t w;
		memcpy(&w, in + k, 8);
		uint64_t low7 = w & DOI_ONES * 0x7F;
		uint64_t at_least_a = low7 + DOI_ONES * (0x80 - 'a');
		uint64_t above_z = low7 + DOI_ONES * (0x7F - 'z');
		uint64_t lower = at_least_a & ~above_z & ~w & DOI_ONES * 0x80;
		w ^= lower >> 2;
		memcpy(out + k, &w, 8);
	}
	for (; k < n; k++) {
		unsigned char c = in[k];
		out[k] = (c >= 'a' && c <= 'z') ? (unsigned char)(c - 32) : c;
	}
}

/* Room to_url needs for a DOI of n bytes after a base of base_len bytes. */
#define DOI_URL_CAPACITY(base_len, n) ((base_len) + 5 * (n) + 2)

/*
 * base + presentation.encode_path(doi): both IDF sets and every non-ASCII byte as %XX
 * (upper-case hex), then presentation.DOT_SEGMENT_REWRITES: "/./" -> "/.%2F" and "/../" ->
 * "/..%2F", left to right, then a final "/." or "/.." -> "%2F." or "%2F..". out needs
 * DOI_URL_CAPACITY(base_len, n) bytes. Returns the URL's length.
 */
static inline size_t doi_to_url(const unsigned char *doi, size_t n, const char *base, size_t base_len,
                                unsigned char *out) {
	static const char HEX[] = "0123456789ABCDEF";
	size_t o = base_len;
	memcpy(out, base, base_len);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = doi[i];
		if (DOI_URL_ESCAPE_BYTE[c]) {
			out[o++] = '%';
			out[o++] = (unsigned char)HEX[c >> 4];
			out[o++] = (unsigned char)HEX[c & 15];
			continue;
		}
		out[o++] = c;
		/* A dot segment ends at this "/": "/./" or "/../" just written, not overlapping an
		 * earlier replacement (whose "%2F" cannot be a "/"). */
		if (c == '/') {
			if (o - base_len >= 3 && out[o - 2] == '.' && out[o - 3] == '/') {
				memcpy(out + o - 1, "%2F", 3);
				o += 2;
			} else if (o - base_len >= 4 && out[o - 2] == '.' && out[o - 3] == '.' && out[o - 4] == '/') {
				memcpy(out + o - 1, "%2F", 3);
				o += 2;
			}
		}
	}
	/* A dot segment at the end has no slash after it: encode the one before it. A DOI holds
	 * "10.x/" before its suffix, so the slash found is the DOI's, never the base URL's. */
	size_t dots = (o - base_len >= 1 && out[o - 1] == '.') ? ((o - base_len >= 2 && out[o - 2] == '.') ? 2 : 1) : 0;
	if (dots && o - base_len > dots && out[o - dots - 1] == '/') {
		memmove(out + o - dots + 2, out + o - dots, dots);
		memcpy(out + o - dots - 1, "%2F", 3);
		o += 2;
	}
	return o;
}

#endif
