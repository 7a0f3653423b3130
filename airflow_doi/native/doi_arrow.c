/*
 * airflow_doi.native._core: the C core (doi_core.h) over Arrow string arrays, for CPython.
 *
 * Why: Series.doi, airflow-doi normalize and the Python-mode operators hold their values as
 * Arrow arrays; the pure-Arrow path (airflow_doi.columns) needs a regular expression per value
 * and leaves Arrow for anything unusual. This module reads an Arrow string array through the
 * Arrow C Data Interface (the PyCapsules of __arrow_c_array__), parses every value once with
 * the GIL released, and returns the buffers of the answer (a large_string array and an int8
 * reason code per row): never a Python object per row. airflow_doi.native.arrow wraps it (threads,
 * chunked arrays, the fallback when this module was not built).
 *
 * Built by setuptools at install time (setup.py, optional: no compiler, no module).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>

#include "doi_core.h"

#ifndef DOI_SOURCE_DIGEST
#define DOI_SOURCE_DIGEST "unknown"
#endif

/* The Arrow C Data Interface (https://arrow.apache.org/docs/format/CDataInterface.html). */
struct ArrowSchema {
	const char *format;
	const char *name;
	const char *metadata;
	int64_t flags;
	int64_t n_children;
	struct ArrowSchema **children;
	struct ArrowSchema *dictionary;
	void (*release)(struct ArrowSchema *);
	void *private_data;
};

struct ArrowArray {
	int64_t length;
	int64_t null_count;
	int64_t offset;
	int64_t n_buffers;
	int64_t n_children;
	const void **buffers;
	struct ArrowArray **children;
	struct ArrowArray *dictionary;
	void (*release)(struct ArrowArray *);
	void *private_data;
};

/* What a call returns, per row. */
enum output {
	OUT_DOI = 0,    /* the normalized DOI (null where there is none) */
	OUT_KEY = 1,    /* the comparison key */
	OUT_URL = 2,    /* base + the encoded DOI */
	OUT_ENCODE = 3, /* the values are normalized DOIs (no control characters): base + encoded, no parse */
};

/* One input value: its bytes, or NULL for a null. */
struct input {
	const struct ArrowArray *array;
	const uint8_t *validity;
	const int32_t *offsets32;
	const int64_t *offsets64;
	const unsigned char *data;
	int clean; /* csv_write: no cell of the column needs quotes */
};

static inline const unsigned char *input_value(const struct input *in, int64_t row, size_t *n) {
	int64_t i = in->array->offset + row;
	if (in->validity && !((in->validity[i >> 3] >> (i & 7)) & 1)) {
		return NULL;
	}
	int64_t start, end;
	if (in->offsets64) {
		start = in->offsets64[i];
		end = in->offsets64[i + 1];
	} else {
		start = in->offsets32[i];
		end = in->offsets32[i + 1];
	}
	*n = (size_t)(end - start);
	/* An empty value may come with a null data buffer: never dereferenced for n == 0. */
	return in->data ? in->data + start : (const unsigned char *)"";
}

static int read_input(PyObject *schema_capsule, PyObject *array_capsule, struct input *in) {
	struct ArrowSchema *schema = (struct ArrowSchema *)PyCapsule_GetPointer(schema_capsule, "arrow_schema");
	if (!schema) {
		return -1;
	}
	struct ArrowArray *array = (struct ArrowArray *)PyCapsule_GetPointer(array_capsule, "arrow_array");
	if (!array) {
		return -1;
	}
	memset(in, 0, sizeof(*in));
	in->array = array;
	if (!schema->release || !array->release) {
		PyErr_SetString(PyExc_ValueError, "the Arrow array was already released");
		return -1;
	}
	int large = strcmp(schema->format, "U") == 0;
	if (!large && strcmp(schema->format, "u") != 0) {
		PyErr_Format(PyExc_TypeError, "expected an Arrow string or large_string array, not format '%s'",
		             schema->format);
		return -1;
	}
	if (array->n_buffers != 3 || array->length < 0 || array->offset < 0) {
		PyErr_SetString(PyExc_ValueError, "not a valid Arrow string array (three buffers)");
		return -1;
	}
	if (array->length == 0) {
		return 0; /* some producers export no buffers at all for an empty array */
	}
	if (!array->buffers[1]) {
		PyErr_SetString(PyExc_ValueError, "an Arrow string array without offsets");
		return -1;
	}
	if (large) {
		in->offsets64 = (const int64_t *)array->buffers[1];
	} else {
		in->offsets32 = (const int32_t *)array->buffers[1];
	}
	in->validity = array->null_count == 0 ? NULL : (const uint8_t *)array->buffers[0];
	in->data = (const unsigned char *)array->buffers[2];
	return 0;
}

/* The bytes of every value in the array (a bound for the output's size). */
static size_t input_bytes(const struct input *in) {
	if (in->array->length == 0) {
		return 0;
	}
	int64_t first = in->array->offset, last = in->array->offset + in->array->length;
	if (in->offsets64) {
		return (size_t)(in->offsets64[last] - in->offsets64[first]);
	}
	return (size_t)(in->offsets32[last] - in->offsets32[first]);
}

/*
 * run(schema_capsule, array_capsule, decode, output, base) ->
 *     (validity, offsets, data, codes, null_count)
 *
 * validity/offsets/data are the buffers of a large_string array of len(array) rows (validity
 * None when no row is null); codes is one int8 per row (syntax.REASONS index, -1 valid; None
 * for OUT_ENCODE).
 */
static PyObject *run(PyObject *self, PyObject *args) {
	(void)self;
	PyObject *schema_capsule, *array_capsule;
	int decode, what;
	const char *base;
	Py_ssize_t base_len;
	if (!PyArg_ParseTuple(args, "OOiiy#", &schema_capsule, &array_capsule, &decode, &what, &base, &base_len)) {
		return NULL;
	}
	if (decode < DOI_DECODE_AUTO || decode > DOI_DECODE_NEVER || what < OUT_DOI || what > OUT_ENCODE) {
		PyErr_SetString(PyExc_ValueError, "decode or output out of range");
		return NULL;
	}
	struct input in;
	if (read_input(schema_capsule, array_capsule, &in) < 0) {
		return NULL;
	}
	int64_t rows = in.array->length;
	size_t total = input_bytes(&in);
	int url = what == OUT_URL || what == OUT_ENCODE;
	/* Output bound: a DOI is never longer than its value; a URL is base + 3 bytes a byte + 2 for
	 * a trailing dot segment, per row. */
	if (total > (size_t)PY_SSIZE_T_MAX / 20 || (size_t)base_len > 4096 ||
	    (url && (size_t)rows > ((size_t)PY_SSIZE_T_MAX / 4 - 5 * total) / ((size_t)base_len + 2))) {
		PyErr_SetString(PyExc_MemoryError, "doi: array too large for one call");
		return NULL;
	}
	size_t capacity = url ? (size_t)rows * ((size_t)base_len + 2) + 5 * total : total;

	PyObject *validity_obj = PyBytes_FromStringAndSize(NULL, (rows + 7) / 8);
	PyObject *offsets_obj = PyBytes_FromStringAndSize(NULL, (rows + 1) * (Py_ssize_t)sizeof(int64_t));
	PyObject *data_obj = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)capacity);
	PyObject *codes_obj = what == OUT_ENCODE ? (Py_INCREF(Py_None), Py_None) : PyBytes_FromStringAndSize(NULL, rows);
	if (!validity_obj || !offsets_obj || !data_obj || !codes_obj) {
		goto fail;
	}
	uint8_t *validity = (uint8_t *)PyBytes_AS_STRING(validity_obj);
	int64_t *offsets = (int64_t *)PyBytes_AS_STRING(offsets_obj);
	unsigned char *data = (unsigned char *)PyBytes_AS_STRING(data_obj);
	int8_t *codes = what == OUT_ENCODE ? NULL : (int8_t *)PyBytes_AS_STRING(codes_obj);
	int64_t nulls = 0;
	int failed = 0;

	Py_BEGIN_ALLOW_THREADS
	memset(validity, 0, (size_t)(rows + 7) / 8);
	unsigned char *scratch = NULL;
	size_t scratch_cap = 0;
	size_t o = 0;
	offsets[0] = 0;
	for (int64_t row = 0; row < rows; row++) {
		size_t n = 0;
		const unsigned char *s = input_value(&in, row, &n);
		const unsigned char *doi = NULL;
		size_t doi_len = 0;
		enum doi_reason reason;
		if (!s) {
			reason = DOI_R_EMPTY;
		} else if (what == OUT_ENCODE) {
			doi = s;
			doi_len = n;
			reason = DOI_R_OK;
		} else {
			if (2 * n + 2 > scratch_cap) {
				size_t want = 2 * n + 2 > 4096 ? 2 * n + 2 : 4096;
				unsigned char *grown = (unsigned char *)realloc(scratch, want);
				if (!grown) {
					failed = 1;
					break;
				}
				scratch = grown;
				scratch_cap = want;
			}
			reason = doi_analyse(s, n, (enum doi_decode)decode, scratch, scratch + n + 1, &doi, &doi_len);
		}
		if (codes) {
			codes[row] = (int8_t)reason;
		}
		if (doi) {
			validity[row >> 3] |= (uint8_t)(1u << (row & 7));
			if (what == OUT_DOI) {
				memcpy(data + o, doi, doi_len);
				o += doi_len;
			} else if (what == OUT_KEY) {
				doi_ascii_upper(doi, doi_len, data + o);
				o += doi_len;
			} else {
				o += doi_to_url(doi, doi_len, base, (size_t)base_len, data + o);
			}
		} else {
			nulls++;
		}
		offsets[row + 1] = (int64_t)o;
	}
	free(scratch);
	Py_END_ALLOW_THREADS

	if (failed) {
		PyErr_NoMemory();
		goto fail;
	}
	if (_PyBytes_Resize(&data_obj, (Py_ssize_t)offsets[rows]) < 0) {
		data_obj = NULL;
		goto fail;
	}
	if (nulls == 0) {
		Py_DECREF(validity_obj);
		Py_INCREF(Py_None);
		validity_obj = Py_None;
	}
	return Py_BuildValue("(NNNNL)", validity_obj, offsets_obj, data_obj, codes_obj, (long long)nulls);

fail:
	Py_XDECREF(validity_obj);
	Py_XDECREF(offsets_obj);
	Py_XDECREF(data_obj);
	Py_XDECREF(codes_obj);
	return NULL;
}

/*
 * scalar(value, decode) -> (doi or None, reason code): one str (or None) through the core, for callers
 * that hold one value at a time (SQLite's functions). The value must be encodable as UTF-8.
 */
static PyObject *scalar(PyObject *self, PyObject *args) {
	(void)self;
	PyObject *value;
	int decode;
	if (!PyArg_ParseTuple(args, "Oi", &value, &decode)) {
		return NULL;
	}
	if (value == Py_None) {
		return Py_BuildValue("(Oi)", Py_None, (int)DOI_R_EMPTY);
	}
	if (!PyUnicode_Check(value)) {
		PyErr_SetString(PyExc_TypeError, "scalar() takes a str or None (bytes go to the Python parser)");
		return NULL;
	}
	Py_ssize_t n;
	const char *text = PyUnicode_AsUTF8AndSize(value, &n); /* UnicodeEncodeError: lone surrogates */
	if (!text) {
		return NULL;
	}
	if (decode < DOI_DECODE_AUTO || decode > DOI_DECODE_NEVER) {
		PyErr_SetString(PyExc_ValueError, "decode out of range");
		return NULL;
	}
	unsigned char small[512];
	unsigned char *scratch = (size_t)n * 2 + 2 <= sizeof(small) ? small : (unsigned char *)malloc((size_t)n * 2 + 2);
	if (!scratch) {
		return PyErr_NoMemory();
	}
	const unsigned char *doi = NULL;
	size_t doi_len = 0;
	enum doi_reason reason = doi_analyse((const unsigned char *)text, (size_t)n, (enum doi_decode)decode, scratch,
	                                     scratch + n + 1, &doi, &doi_len);
	PyObject *result;
	if (doi) {
		result = Py_BuildValue("(s#i)", (const char *)doi, (Py_ssize_t)doi_len, (int)reason);
	} else {
		result = Py_BuildValue("(Oi)", Py_None, (int)reason);
	}
	if (scratch != small) {
		free(scratch);
	}
	return result;
}

/* Whether a CSV cell must be quoted: it holds the separator, a quote or a line break. */
static inline int csv_special(unsigned char c, unsigned char delimiter) {
	return c == delimiter || c == '"' || c == '\n' || c == '\r';
}

/* A byte of x that is zero, word at a time (the classic bit trick). */
static inline uint64_t csv_zero_byte(uint64_t x) {
	return (x - 0x0101010101010101ULL) & ~x & 0x8080808080808080ULL;
}

/* Whether any byte of the cell is special: eight bytes at a time. */
static inline int csv_needs_quotes(const unsigned char *v, size_t n, unsigned char delimiter) {
	const uint64_t ones = 0x0101010101010101ULL;
	const uint64_t d = ones * delimiter, q = ones * '"', lf = ones * '\n', cr = ones * '\r';
	size_t k = 0;
	for (; k + 8 <= n; k += 8) {
		uint64_t x;
		memcpy(&x, v + k, 8);
		if (csv_zero_byte(x ^ d) | csv_zero_byte(x ^ q) | csv_zero_byte(x ^ lf) | csv_zero_byte(x ^ cr)) {
			return 1;
		}
	}
	for (; k < n; k++) {
		if (csv_special(v[k], delimiter)) {
			return 1;
		}
	}
	return 0;
}

/* memcpy for the short cells most columns hold, without a library call per cell. */
static inline unsigned char *csv_copy(unsigned char *out, const unsigned char *v, size_t n) {
	if (n >= 8) {
		memcpy(out, v, n);
		return out + n;
	}
	switch (n) { /* short cells (true, 2019, ...) without a call */
	case 7: out[6] = v[6]; /* fall through */
	case 6: out[5] = v[5]; /* fall through */
	case 5: out[4] = v[4]; /* fall through */
	case 4: out[3] = v[3]; /* fall through */
	case 3: out[2] = v[2]; /* fall through */
	case 2: out[1] = v[1]; /* fall through */
	case 1: out[0] = v[0]; /* fall through */
	default: break;
	}
	return out + n;
}

/* The cell as CSV text at out (quoted, quotes doubled, when it must be); returns the end.
 * clean: the whole column was found to hold no special byte, so no cell is looked at. */
static inline unsigned char *csv_cell_write(unsigned char *out, const unsigned char *v, size_t n,
                                            unsigned char delimiter, int clean) {
	if (clean || !csv_needs_quotes(v, n, delimiter)) {
		return csv_copy(out, v, n);
	}
	*out++ = '"';
	const unsigned char *end = v + n;
	while (v < end) { /* copy up to and including each quote, then double it */
		const unsigned char *quote = (const unsigned char *)memchr(v, '"', (size_t)(end - v));
		if (!quote) {
			out = csv_copy(out, v, (size_t)(end - v));
			break;
		}
		out = csv_copy(out, v, (size_t)(quote - v) + 1);
		*out++ = '"';
		v = quote + 1;
	}
	*out++ = '"';
	return out;
}

#define CSV_MAX_COLUMNS (1 << 20)
#define CSV_BUFFER (1 << 20)

/* Every byte of data to fd (a short write or EINTR: again); 0, or -1 with errno set. */
static int csv_flush(int fd, const unsigned char *data, size_t n) {
	while (n) {
		ssize_t wrote = write(fd, data, n);
		if (wrote < 0) {
			if (errno == EINTR) {
				continue;
			}
			return -1;
		}
		data += wrote;
		n -= (size_t)wrote;
	}
	return 0;
}

/*
 * csv_write(fd, columns, delimiter, eol) -> int: the rows of equally long Arrow string arrays
 * (columns: a sequence of (schema_capsule, array_capsule)) written to the file descriptor fd
 * as CSV text; returns the bytes written. Each cell is as it is unless it holds the
 * separator, a quote or a line break (then quoted, quotes doubled: csv's QUOTE_MINIMAL); a
 * null is an empty cell; every row ends with eol. One pass through a 1 MiB buffer, the GIL
 * released; a failed write is an OSError.
 */
static PyObject *csv_write(PyObject *self, PyObject *args) {
	(void)self;
	int fd;
	PyObject *columns;
	const char *delimiter_text, *eol;
	Py_ssize_t delimiter_len, eol_len;
	if (!PyArg_ParseTuple(args, "iOy#y#", &fd, &columns, &delimiter_text, &delimiter_len, &eol, &eol_len)) {
		return NULL;
	}
	if (delimiter_len != 1 || eol_len < 1 || eol_len > 2) {
		PyErr_SetString(PyExc_ValueError, "the separator must be one byte and the line ending one or two");
		return NULL;
	}
	PyObject *seq = PySequence_Fast(columns, "columns must be a sequence of capsule pairs");
	if (!seq) {
		return NULL;
	}
	Py_ssize_t width = PySequence_Fast_GET_SIZE(seq);
	if (width < 1 || width > CSV_MAX_COLUMNS) {
		Py_DECREF(seq);
		PyErr_SetString(PyExc_ValueError, "between 1 and 1,048,576 columns");
		return NULL;
	}
	struct input *inputs = (struct input *)calloc((size_t)width, sizeof(struct input));
	unsigned char *buffer = (unsigned char *)malloc(CSV_BUFFER);
	if (!inputs || !buffer) {
		free(inputs);
		free(buffer);
		Py_DECREF(seq);
		return PyErr_NoMemory();
	}
	int64_t rows = -1;
	for (Py_ssize_t c = 0; c < width; c++) {
		PyObject *pair = PySequence_Fast_GET_ITEM(seq, c);
		PyObject *schema_capsule, *array_capsule;
		if (!PyArg_ParseTuple(pair, "OO", &schema_capsule, &array_capsule) ||
		    read_input(schema_capsule, array_capsule, &inputs[c]) < 0) {
			free(inputs);
			free(buffer);
			Py_DECREF(seq);
			return NULL;
		}
		if (rows >= 0 && inputs[c].array->length != rows) {
			free(inputs);
			free(buffer);
			Py_DECREF(seq);
			PyErr_SetString(PyExc_ValueError, "the columns differ in length");
			return NULL;
		}
		rows = inputs[c].array->length;
	}
	unsigned char delimiter = (unsigned char)delimiter_text[0];
	int failed = 0, no_memory = 0;
	size_t total = 0;
	Py_BEGIN_ALLOW_THREADS
	for (Py_ssize_t c = 0; c < width; c++) { /* a column with no special byte anywhere: copied */
		struct input *in = &inputs[c];
		size_t bytes = rows ? input_bytes(in) : 0;
		in->clean = 1;
		if (in->data && bytes) {
			int64_t at = in->array->offset;
			const unsigned char *start = in->data + (in->offsets64 ? in->offsets64[at] : in->offsets32[at]);
			in->clean = !csv_needs_quotes(start, bytes, delimiter);
		}
	}
	unsigned char *out = buffer, *end = buffer + CSV_BUFFER;
	for (int64_t r = 0; r < rows && !failed; r++) {
		for (Py_ssize_t c = 0; c < width && !failed; c++) {
			size_t n = 0;
			const unsigned char *v = input_value(&inputs[c], r, &n);
			size_t most = (v ? 2 * n + 2 : 0) + 1 + (size_t)eol_len; /* the cell, a separator, eol */
			if (__builtin_expect((size_t)(end - out) >= most, 1)) { /* the usual case */
				if (c) {
					*out++ = delimiter;
				}
				if (v) {
					out = csv_cell_write(out, v, n, delimiter, inputs[c].clean);
				}
				continue;
			}
			if ((size_t)(end - out) < most) {
				if (csv_flush(fd, buffer, (size_t)(out - buffer)) < 0) {
					failed = 1;
					break;
				}
				total += (size_t)(out - buffer);
				out = buffer;
			}
			if (most > CSV_BUFFER) { /* a cell larger than the buffer: a buffer of its own */
				unsigned char *own = (unsigned char *)malloc(most);
				if (!own) {
					failed = no_memory = 1;
					break;
				}
				unsigned char *at = own;
				if (c) {
					*at++ = delimiter;
				}
				at = csv_cell_write(at, v, n, delimiter, inputs[c].clean);
				if (csv_flush(fd, own, (size_t)(at - own)) < 0) {
					failed = 1;
				}
				total += (size_t)(at - own);
				free(own);
				continue;
			}
			if (c) {
				*out++ = delimiter;
			}
			if (v) {
				out = csv_cell_write(out, v, n, delimiter, inputs[c].clean);
			}
		}
		if (!failed) {
			memcpy(out, eol, (size_t)eol_len); /* room kept by the last cell's check */
			out += eol_len;
		}
	}
	if (!failed && out > buffer) {
		if (csv_flush(fd, buffer, (size_t)(out - buffer)) < 0) {
			failed = 1;
		} else {
			total += (size_t)(out - buffer);
		}
	}
	Py_END_ALLOW_THREADS
	free(inputs);
	free(buffer);
	Py_DECREF(seq);
	if (no_memory) {
		return PyErr_NoMemory();
	}
	if (failed) {
		return PyErr_SetFromErrno(PyExc_OSError);
	}
	return PyLong_FromSize_t(total);
}

/*
 * line_rows(schema_capsule, array_capsule) -> bytes or None: one byte per row, 1 where the cell
 * may hide a quote left open: it holds a line break and a quote character, or a carriage
 * return not followed by a line feed (which Arrow's reader can make of a CRLF split across
 * its blocks); None when no cell does (the common case: the column's bytes are searched for
 * line breaks with memchr, and only the rows they fall in are looked at). airflow_doi.files.read
 * then has Python's csv module read the file, which decides from the raw lines.
 */
static PyObject *line_rows(PyObject *self, PyObject *args) {
	(void)self;
	PyObject *schema_capsule, *array_capsule;
	if (!PyArg_ParseTuple(args, "OO", &schema_capsule, &array_capsule)) {
		return NULL;
	}
	struct input in;
	if (read_input(schema_capsule, array_capsule, &in) < 0) {
		return NULL;
	}
	int64_t rows = in.array->length;
	size_t bytes = rows ? input_bytes(&in) : 0;
	if (!in.data || !bytes) {
		Py_RETURN_NONE;
	}
	int64_t at = in.array->offset;
	int64_t first = in.offsets64 ? in.offsets64[at] : in.offsets32[at];
	const unsigned char *start = in.data + first, *end = start + bytes;
	PyObject *flags = NULL;
	unsigned char *out = NULL;
	for (int pass = 0; pass < 2; pass++) {
		const unsigned char mark = pass ? '\r' : '\n';
		const unsigned char *p = start;
		while (p < end && (p = (const unsigned char *)memchr(p, mark, (size_t)(end - p))) != NULL) {
			int64_t position = first + (p - start);
			int64_t lo = 0, hi = rows; /* the row r with offset[r] <= position < offset[r + 1] */
			while (hi - lo > 1) {
				int64_t mid = lo + (hi - lo) / 2;
				int64_t offset = in.offsets64 ? in.offsets64[at + mid] : in.offsets32[at + mid];
				if (offset <= position) {
					lo = mid;
				} else {
					hi = mid;
				}
			}
			int64_t cell_start = in.offsets64 ? in.offsets64[at + lo] : in.offsets32[at + lo];
			int64_t cell_end = in.offsets64 ? in.offsets64[at + lo + 1] : in.offsets32[at + lo + 1];
			const unsigned char *cell = in.data + cell_start, *stop = in.data + cell_end;
			int lone_cr = mark == '\r' && (p + 1 >= stop || p[1] != '\n');
			int quote = memchr(cell, '"', (size_t)(stop - cell)) != NULL;
			if (lone_cr || quote) {
				if (!flags) {
					flags = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)rows);
					if (!flags) {
						return NULL;
					}
					out = (unsigned char *)PyBytes_AS_STRING(flags);
					memset(out, 0, (size_t)rows);
				}
				out[lo] = 1;
			}
			p++;
		}
	}
	if (!flags) {
		Py_RETURN_NONE;
	}
	return flags;
}

static PyMethodDef METHODS[] = {
    {"run", run, METH_VARARGS, "Parse every value of an Arrow string array (see doi_arrow.c)."},
    {"scalar", scalar, METH_VARARGS, "Parse one str: (doi or None, reason code)."},
    {"csv_write", csv_write, METH_VARARGS, "Arrow string columns to a file descriptor as CSV text."},
    {"line_rows", line_rows, METH_VARARGS, "Rows whose cell may hide a quote left open."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT, "airflow_doi.native._core", "The native DOI core over Arrow arrays (doi_arrow.c).", -1,
    METHODS, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__core(void) {
	PyObject *module = PyModule_Create(&MODULE);
	if (!module) {
		return NULL;
	}
	if (PyModule_AddStringConstant(module, "SOURCE_DIGEST", DOI_SOURCE_DIGEST) < 0 ||
	    PyModule_AddIntConstant(module, "OUT_DOI", OUT_DOI) < 0 ||
	    PyModule_AddIntConstant(module, "OUT_KEY", OUT_KEY) < 0 ||
	    PyModule_AddIntConstant(module, "OUT_URL", OUT_URL) < 0 ||
	    PyModule_AddIntConstant(module, "OUT_ENCODE", OUT_ENCODE) < 0) {
		Py_DECREF(module);
		return NULL;
	}
	return module;
}
