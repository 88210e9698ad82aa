/* tfpack.formats._wire: tf.train.Example records and TFRecord framing, compiled.
 *
 * Python API (see tfpack/formats/wire.py, the only caller):
 *
 *   encode(splits, features, framed) -> (bytes, sizes)
 *     Serializes P = len(splits) - 1 `tf.train.Example` records back to back.
 *     Record p is made of the *members* m in [splits[p], splits[p + 1]).
 *     `features` is a list of tuples, in the order the features are written
 *     (sorted by name):
 *       (key: bytes, is_float: bool, width: int, pad: float,
 *        values: buffer or None, kind: str ('i' int32, 'q' int64, 'f' float32),
 *        starts: int64 buffer [n] or None, runs: int64 buffer [n] or None,
 *        base: int64 buffer [n] or None, ramp: bool, constant: float)
 *     Member m contributes runs[m] values (1 without `runs`); value i of it is
 *       ints:   values[starts[m] + i] (0 without `values`) + base[m] (0 without)
 *               + (ramp ? i : 0)
 *       floats: values[starts[m] + i], or `constant` without `values`
 *     then the row is padded with `pad` to `width` values. A row whose runs add
 *     up to more than `width` raises ValueError. Ints are varints (negative ones
 *     ten bytes, two's complement), floats little-endian float32: the bytes of
 *     `SerializeToString(deterministic=True)`.
 *     With `framed`, each record is wrapped as TFRecord does it: uint64 length,
 *     masked CRC-32C of the length, data, masked CRC-32C of the data.
 *     `sizes` is the bytes of int64 [P], each record's data length (unframed).
 *
 *   frame(records: list of bytes) -> bytes
 *     The TFRecord framing of already serialized records, back to back.
 *
 *   scan_google(records: sequence of bytes) -> (codes, tokens, predictions, kept, counts)
 *     Parses Google create_pretraining_data records and checks each against the
 *     rules of tfpack.formats.validation.RULES (google_problems): codes int32 [B]
 *     (0 valid, else the first rule broken, -1 for a record left to TensorFlow's
 *     parser: malformed, unknown fields, unpacked or repeated values, a feature of
 *     another kind),
 *     tokens and predictions int64 [B]; kept, when every record is valid, the
 *     values the scan keeps as bytes: input_ids, segment_ids (int32, `tokens`
 *     each), masked_lm_positions, masked_lm_ids (int32), masked_lm_weights
 *     (float32, `predictions` each), next_sentence_labels (int32, one each), and
 *     counts, how many values of each (the bytes may hold more: ignore them); else
 *     None, None.
 *
 *   split_records(data, final) -> (records, used, problem)
 *     The records of TFRecord-framed bytes, each one's length and data CRC-32C
 *     checked: `records` (bytes), `used` (bytes of data they took: the rest
 *     is a record cut by the end of `data`, to be completed), `problem` (None,
 *     or what is wrong: a corrupted record, or with `final` a truncated one).
 *
 *   crc32c(data, software=False) -> int
 *     CRC-32C (SSE 4.2's instruction where the CPU has it, else tables).
 *
 *   write_interleaved(fd, sources, runs) -> int
 *     Appends 4-byte items to the file `fd`, record-major, with writev (no
 *     copy in between): for each record i, for each source f in order,
 *     runs[f][i] items of sources[f] (1 item where runs[f] is None), taken
 *     from the front of each source in turn. `sources` and `runs` are lists of
 *     one length; each source must hold exactly its runs' items (ValueError).
 *     Returns the bytes written; OSError (ENOSPC, ...) for a failed write.
 *
 *   read_runs(fd, itemsize, starts, runs, out) -> int
 *     Positioned reads (pread) of the file `fd`, an array of `itemsize`-byte
 *     items: run m is items [starts[m], starts[m] + runs[m]) (one item without
 *     `runs`: None), written to `out` (a writable buffer) back to back, run after
 *     run; runs that continue each other in the file are read in one call.
 *     Returns the bytes read: fewer than the runs hold when the file ends
 *     before them. OSError for a failed read, ValueError for a negative start
 *     or run, a run ending past 2**63 - 1 bytes, or runs that do not fit `out`. Nothing is mapped: the process keeps no page of the file.
 *
 * The GIL is released while bytes are computed, so callers may encode in
 * several threads at once.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <stdint.h>
#include <math.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>
#include <sys/uio.h>

/* ---------------------------------------------------------------- CRC-32C */

static uint32_t crc_table[8][256];

static void crc_init(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = crc_table[0][n];
        for (int t = 1; t < 8; t++) {
            c = crc_table[0][c & 0xff] ^ (c >> 8);
            crc_table[t][n] = c;
        }
    }
}

/* Slicing-by-8 CRC-32C (Castagnoli), as TFRecord uses it. */
static uint32_t crc32c(const uint8_t *data, size_t size) {
    uint32_t crc = 0xFFFFFFFFu;
    while (size && ((uintptr_t)data & 7)) {
        crc = crc_table[0][(crc ^ *data++) & 0xff] ^ (crc >> 8);
        size--;
    }
    while (size >= 8) {
        uint64_t word;
        memcpy(&word, data, 8);
        word ^= crc; /* little-endian hosts (x86-64, aarch64) */
        crc = crc_table[7][word & 0xff] ^ crc_table[6][(word >> 8) & 0xff] ^
              crc_table[5][(word >> 16) & 0xff] ^ crc_table[4][(word >> 24) & 0xff] ^
              crc_table[3][(word >> 32) & 0xff] ^ crc_table[2][(word >> 40) & 0xff] ^
              crc_table[1][(word >> 48) & 0xff] ^ crc_table[0][word >> 56];
        data += 8;
        size -= 8;
    }
    while (size--) crc = crc_table[0][(crc ^ *data++) & 0xff] ^ (crc >> 8);
    return crc ^ 0xFFFFFFFFu;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define HAVE_HW_CRC 1
/* The same CRC with SSE 4.2's crc32 instruction (chosen at run time). */
__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(const uint8_t *data, size_t size) {
    uint64_t crc = 0xFFFFFFFFu;
    while (size && ((uintptr_t)data & 7)) {
        crc = _mm_crc32_u8((uint32_t)crc, *data++);
        size--;
    }
    while (size >= 8) {
        uint64_t word;
        memcpy(&word, data, 8);
        crc = _mm_crc32_u64(crc, word);
        data += 8;
        size -= 8;
    }
    while (size--) crc = _mm_crc32_u8((uint32_t)crc, *data++);
    return (uint32_t)crc ^ 0xFFFFFFFFu;
}
#endif

static int hw_crc = 0;

static uint32_t masked_crc(const uint8_t *data, size_t size) {
#ifdef HAVE_HW_CRC
    uint32_t crc = hw_crc ? crc32c_hw(data, size) : crc32c(data, size);
#else
    uint32_t crc = crc32c(data, size);
#endif
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

static void put_u32(uint8_t *out, uint32_t v) {
    for (int k = 0; k < 4; k++) out[k] = (uint8_t)(v >> (8 * k));
}

static void put_u64(uint8_t *out, uint64_t v) {
    for (int k = 0; k < 8; k++) out[k] = (uint8_t)(v >> (8 * k));
}

/* Frame the record whose data already sits at out + 12: header before, CRC after. */
static void frame_in_place(uint8_t *out, size_t size) {
    put_u64(out, (uint64_t)size);
    put_u32(out + 8, masked_crc(out, 8));
    put_u32(out + 12 + size, masked_crc(out + 12, size));
}

/* ---------------------------------------------------------------- varints */

static inline size_t varint_size(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* Varint of v; for v < 2^28 without branches on its length, writing 4 bytes of which
   it keeps its own (callers leave 10 bytes of room a value). */
static inline uint8_t *put_varint_fast(uint8_t *out, uint64_t v);

static inline uint8_t *put_varint(uint8_t *out, uint64_t v) {
    while (v >= 0x80) {
        *out++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *out++ = (uint8_t)v;
    return out;
}

static const uint8_t varint_bytes[65] = {
    1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3,
    4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7,
    7, 7, 7, 7, 7, 7, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 10};

static inline uint8_t *put_varint_fast(uint8_t *out, uint64_t v) {
    if (v >= (1u << 28)) return put_varint(out, v);
    uint32_t x = (uint32_t)(v & 0x7f) | (uint32_t)((v & 0x3f80) << 1) |
                 (uint32_t)((v & 0x1fc000) << 2) | (uint32_t)((v & 0xfe00000) << 3);
    unsigned n = varint_bytes[64 - __builtin_clzll(v | 1)];
    x |= 0x808080u & ((1u << (8 * (n - 1))) - 1); /* continuation bits but on the last */
    uint8_t le[4] = {(uint8_t)x, (uint8_t)(x >> 8), (uint8_t)(x >> 16), (uint8_t)(x >> 24)};
    memcpy(out, le, 4);
    return out + n;
}

/* ---------------------------------------------------------------- features */

typedef struct {
    const char *key;
    Py_ssize_t key_size;
    int is_float;
    int64_t width;
    double pad;
    const void *values; /* NULL: none */
    char kind;          /* 'i', 'q', 'f' */
    Py_ssize_t values_count;
    const int64_t *starts, *runs, *base;
    int ramp;
    double constant;
    Py_buffer views[4]; /* values, starts, runs, base (obj NULL when unused) */
} Feature;

static inline int64_t run_of(const Feature *f, int64_t m) { return f->runs ? f->runs[m] : 1; }

/* Bytes of row p's packed values at most (ints: 10 bytes a value). */
static size_t row_bound(const Feature *f) { return (size_t)f->width * (f->is_float ? 4 : 10); }

/* Write the packed values of row p of f (padding included) at out; return their end, or
   NULL when the row's members hold more than `width` values. */
static uint8_t *write_row(const Feature *f, const int64_t *splits, int64_t p, uint8_t *out) {
    int64_t used = 0;
    for (int64_t m = splits[p]; m < splits[p + 1]; m++) {
        int64_t run = run_of(f, m);
        if (run < 0 || run > f->width - used) return NULL;
        int64_t start = f->starts ? f->starts[m] : 0;
        if (f->is_float) {
            if (f->values) {
                memcpy(out, (const float *)f->values + start, 4 * (size_t)run);
            } else {
                float c = (float)f->constant;
                for (int64_t i = 0; i < run; i++) memcpy(out + 4 * i, &c, 4);
            }
            out += 4 * run;
        } else {
            uint64_t b = f->base ? (uint64_t)f->base[m] : 0, r = f->ramp ? 1 : 0;
            if (!f->values) {
                for (int64_t i = 0; i < run; i++) out = put_varint_fast(out, b + r * (uint64_t)i);
            } else if (f->kind == 'i') {
                const int32_t *src = (const int32_t *)f->values + start;
                for (int64_t i = 0; i < run; i++)
                    out = put_varint_fast(out, (uint64_t)(int64_t)src[i] + b + r * (uint64_t)i);
            } else {
                const int64_t *src = (const int64_t *)f->values + start;
                for (int64_t i = 0; i < run; i++)
                    out = put_varint_fast(out, (uint64_t)src[i] + b + r * (uint64_t)i);
            }
        }
        used += run;
    }
    if (f->is_float) {
        float pad = (float)f->pad;
        for (int64_t i = used; i < f->width; i++) {
            memcpy(out, &pad, 4);
            out += 4;
        }
    } else {
        uint8_t pad[10];
        size_t n = (size_t)(put_varint(pad, (uint64_t)(int64_t)f->pad) - pad);
        if (n == 1) {
            memset(out, pad[0], (size_t)(f->width - used));
            out += f->width - used;
        } else {
            for (int64_t i = used; i < f->width; i++) {
                memcpy(out, pad, n);
                out += n;
            }
        }
    }
    return out;
}

/* Header sizes of one feature entry around a payload of `payload` bytes. */
typedef struct {
    size_t listed, feature, entry;
} Sizes;

static Sizes entry_sizes(const Feature *f, size_t payload) {
    Sizes s;
    s.listed = f->width ? 1 + varint_size(payload) + payload : 0;
    s.feature = 1 + varint_size(s.listed) + s.listed;
    s.entry = 1 + varint_size((uint64_t)f->key_size) + (size_t)f->key_size + 1 +
              varint_size(s.feature) + s.feature;
    return s;
}

static void release(Feature *features, Py_ssize_t count) {
    for (Py_ssize_t k = 0; k < count; k++)
        for (int b = 0; b < 4; b++)
            if (features[k].views[b].obj) PyBuffer_Release(&features[k].views[b]);
}

/* An int64 buffer of at least `need` items (or NULL for None); 0 on success. */
/* Whether a buffer (got with PyBUF_FORMAT) holds 8-byte integers: a float64 array has the
 * same itemsize, and its bits would be read as offsets and counts. */
static int is_int64(const Py_buffer *view) {
    const char *f = view->format;
    if (view->itemsize != 8) return 0;
    if (!f) return 1; /* plain bytes of a producer that names no format */
    if (*f == '@' || *f == '=' || *f == '<') f++;
    return f[0] && strchr("qlQLnN", f[0]) && f[1] == '\0';
}

static int int64_view(PyObject *obj, Py_buffer *view, const int64_t **out, Py_ssize_t need,
                      const char *what) {
    *out = NULL;
    view->obj = NULL;
    if (obj == Py_None) return 0;
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    if (view->len / 8 < need || !is_int64(view)) {
        PyErr_Format(PyExc_ValueError, "%s must hold %zd int64 values", what, need);
        return -1;
    }
    *out = (const int64_t *)view->buf;
    return 0;
}

static PyObject *encode(PyObject *self, PyObject *args) {
    PyObject *splits_obj, *list;
    int framed;
    if (!PyArg_ParseTuple(args, "OO!p", &splits_obj, &PyList_Type, &list, &framed)) return NULL;
    Py_buffer splits_view;
    const int64_t *splits;
    if (PyObject_GetBuffer(splits_obj, &splits_view, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (splits_view.itemsize != 8 || splits_view.len < 8) {
        PyBuffer_Release(&splits_view);
        PyErr_SetString(PyExc_ValueError, "splits must be int64 [P + 1]");
        return NULL;
    }
    splits = (const int64_t *)splits_view.buf;
    Py_ssize_t P = splits_view.len / 8 - 1;
    int64_t members = splits[P];
    for (Py_ssize_t p = 0; p < P; p++) {
        if (splits[p] < 0 || splits[p] > splits[p + 1]) {
            PyBuffer_Release(&splits_view);
            PyErr_SetString(PyExc_ValueError, "splits must be non-decreasing from 0");
            return NULL;
        }
    }
    Py_ssize_t F = PyList_GET_SIZE(list);
    Feature *features = PyMem_Calloc(F ? F : 1, sizeof(Feature));
    size_t *payloads = NULL;
    int64_t *sizes = NULL;
    PyObject *result = NULL, *data = NULL, *sizes_bytes = NULL;
    if (!features) {
        PyBuffer_Release(&splits_view);
        return PyErr_NoMemory();
    }
    Py_ssize_t parsed = 0;
    for (; parsed < F; parsed++) {
        Feature *f = &features[parsed];
        PyObject *values, *starts, *runs, *base;
        const char *kind;
        Py_ssize_t kind_size;
        long long width;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(list, parsed), "y#pLdOs#OOOpd", &f->key,
                              &f->key_size, &f->is_float, &width, &f->pad, &values, &kind,
                              &kind_size, &starts, &runs, &base, &f->ramp, &f->constant))
            goto done;
        f->width = width;
        f->kind = kind_size == 1 ? kind[0] : '?';
        if (width < 0 || (f->kind != 'i' && f->kind != 'q' && f->kind != 'f') ||
            (f->is_float != (f->kind == 'f') && values != Py_None)) {
            PyErr_Format(PyExc_ValueError, "feature %zd: bad width or kind", parsed);
            goto done;
        }
        if (int64_view(starts, &f->views[1], &f->starts, members, "starts") < 0 ||
            int64_view(runs, &f->views[2], &f->runs, members, "runs") < 0 ||
            int64_view(base, &f->views[3], &f->base, members, "base") < 0)
            goto done;
        if (values != Py_None) {
            if (PyObject_GetBuffer(values, &f->views[0], PyBUF_C_CONTIGUOUS) < 0) goto done;
            Py_ssize_t item = f->kind == 'q' ? 8 : 4;
            if (f->views[0].itemsize != item) {
                PyErr_Format(PyExc_ValueError, "feature %zd: values of %zd bytes, kind %c",
                             parsed, f->views[0].itemsize, f->kind);
                goto done;
            }
            f->values = f->views[0].buf;
            f->values_count = f->views[0].len / item;
        }
    }
    /* Every value read must lie inside its buffer. */
    for (Py_ssize_t k = 0; k < F; k++) {
        const Feature *f = &features[k];
        if (!f->values) continue;
        for (int64_t m = 0; m < members; m++) {
            int64_t start = f->starts ? f->starts[m] : 0, run = run_of(f, m);
            if (start < 0 || run < 0 || start + run > f->values_count) {
                PyErr_Format(PyExc_ValueError, "feature %zd reads outside its values", k);
                goto done;
            }
        }
    }

    /* One pass: each record's rows go to scratch space (so their sizes are known),
       then its headers and rows to the output, which grows as needed. */
    size_t scratch_size = 0;
    for (Py_ssize_t k = 0; k < F; k++) scratch_size += row_bound(&features[k]);
    payloads = PyMem_Malloc(sizeof(size_t) * (size_t)(F + 1));
    sizes = PyMem_Malloc(sizeof(int64_t) * (size_t)(P + 1));
    uint8_t *scratch = PyMem_Malloc(scratch_size + 1);
    size_t capacity = 1 << 16, total = 0;
    uint8_t *buffer = PyMem_RawMalloc(capacity); /* grown without the GIL */
    int overflow = -1, no_memory = 0;
    if (!payloads || !sizes || !scratch || !buffer) {
        PyMem_Free(scratch);
        PyMem_RawFree(buffer);
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t p = 0; p < P; p++) {
        size_t features_size = 0, offset = 0;
        for (Py_ssize_t k = 0; k < F; k++) {
            uint8_t *end = write_row(&features[k], splits, p, scratch + offset);
            if (!end) {
                overflow = (int)k;
                break;
            }
            payloads[k] = (size_t)(end - (scratch + offset));
            offset += row_bound(&features[k]);
            Sizes s = entry_sizes(&features[k], payloads[k]);
            features_size += 1 + varint_size(s.entry) + s.entry;
        }
        if (overflow >= 0) break;
        size_t record = 1 + varint_size(features_size) + features_size;
        sizes[p] = (int64_t)record;
        size_t need = total + record + (framed ? 16 : 0);
        if (need > capacity) {
            while (capacity < need) capacity *= 2;
            uint8_t *grown = PyMem_RawRealloc(buffer, capacity);
            if (!grown) {
                no_memory = 1;
                break;
            }
            buffer = grown;
        }
        uint8_t *start = buffer + total + (framed ? 12 : 0), *at = start;
        *at++ = 0x0a;
        at = put_varint(at, features_size);
        offset = 0;
        for (Py_ssize_t k = 0; k < F; k++) {
            const Feature *f = &features[k];
            Sizes s = entry_sizes(f, payloads[k]);
            *at++ = 0x0a;
            at = put_varint(at, s.entry);
            *at++ = 0x0a;
            at = put_varint(at, (uint64_t)f->key_size);
            memcpy(at, f->key, (size_t)f->key_size);
            at += f->key_size;
            *at++ = 0x12;
            at = put_varint(at, s.feature);
            *at++ = f->is_float ? 0x12 : 0x1a;
            at = put_varint(at, s.listed);
            if (f->width) {
                *at++ = 0x0a;
                at = put_varint(at, payloads[k]);
                memcpy(at, scratch + offset, payloads[k]);
                at += payloads[k];
            }
            offset += row_bound(f);
        }
        if (framed) frame_in_place(buffer + total, record);
        total = need;
    }
    Py_END_ALLOW_THREADS
    PyMem_Free(scratch);
    if (overflow >= 0 || no_memory) {
        PyMem_RawFree(buffer);
        if (no_memory) PyErr_NoMemory();
        else PyErr_Format(PyExc_ValueError,
                          "feature %s: a record holds more values than its width",
                          features[overflow].key);
        goto done;
    }
    data = PyBytes_FromStringAndSize((const char *)buffer, (Py_ssize_t)total);
    PyMem_RawFree(buffer);
    if (!data) goto done;
    sizes_bytes = PyBytes_FromStringAndSize((const char *)sizes, (Py_ssize_t)(8 * P));
    if (!sizes_bytes) goto done;
    result = PyTuple_Pack(2, data, sizes_bytes);

done:
    release(features, F); /* calloc'd: unused views have no obj */
    PyMem_Free(features);
    PyMem_Free(payloads);
    PyMem_Free(sizes);
    Py_XDECREF(data);
    Py_XDECREF(sizes_bytes);
    PyBuffer_Release(&splits_view);
    return result;
}

static PyObject *frame(PyObject *self, PyObject *args) {
    PyObject *list;
    if (!PyArg_ParseTuple(args, "O!", &PyList_Type, &list)) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(list);
    size_t total = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *record = PyList_GET_ITEM(list, k);
        if (!PyBytes_Check(record)) {
            PyErr_SetString(PyExc_TypeError, "records must be bytes");
            return NULL;
        }
        total += (size_t)PyBytes_GET_SIZE(record) + 16;
    }
    PyObject *data = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (!data) return NULL;
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(data);
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *record = PyList_GET_ITEM(list, k);
        size_t size = (size_t)PyBytes_GET_SIZE(record);
        memcpy(out + 12, PyBytes_AS_STRING(record), size);
        frame_in_place(out, size);
        out += size + 16;
    }
    return data;
}

/* ------------------------------------------------------- Google records: scan */

/* The seven features of Google's create_pretraining_data records, in this order. */
enum { F_IDS, F_MASK, F_SEG, F_POS, F_MIDS, F_W, F_NSP, NF };
static const char *google_names[NF] = {"input_ids", "input_mask", "segment_ids",
                                       "masked_lm_positions", "masked_lm_ids",
                                       "masked_lm_weights", "next_sentence_labels"};
#define INT32_MAX_VALUE 2147483647LL
#define UNDECIDED (-1) /* a record this scanner leaves to TensorFlow's parser */

typedef struct {
    const uint8_t *data; /* the packed values */
    size_t size;
    int64_t count;
    int present;
} Span;

static int read_varint(const uint8_t **at, const uint8_t *end, uint64_t *value) {
    uint64_t v = 0;
    const uint8_t *p = *at;
    for (int shift = 0; shift < 70; shift += 7) {
        if (p >= end) return -1;
        uint8_t byte = *p++;
        if (shift == 63 && byte > 1) return -1;
        v |= (uint64_t)(byte & 0x7f) << shift;
        if (!(byte & 0x80)) {
            *at = p;
            *value = v;
            return 0;
        }
    }
    return -1;
}

/* A length-delimited field's bounds; -1 when it overruns. */
static int read_bytes(const uint8_t **at, const uint8_t *end, const uint8_t **start,
                      size_t *size) {
    uint64_t v;
    if (read_varint(at, end, &v) < 0 || v > (uint64_t)(end - *at)) return -1;
    *start = *at;
    *size = (size_t)v;
    *at += v;
    return 0;
}

/* One Feature of kind int64_list (field 3) or float_list (field 2), values packed once. */
static int parse_feature(const uint8_t *p, const uint8_t *end, int is_float, Span *span) {
    int kinds = 0;
    while (p < end) {
        uint64_t tag;
        if (read_varint(&p, end, &tag) < 0 || (tag >> 3) == 0) return -1;
        int field = (int)(tag >> 3), type = (int)(tag & 7);
        if (field >= 1 && field <= 3) {
            const uint8_t *list, *list_end;
            size_t size;
            if (type != 2 || ++kinds > 1 || field != (is_float ? 2 : 3)) return -1;
            if (read_bytes(&p, end, &list, &size) < 0) return -1;
            list_end = list + size;
            int chunks = 0;
            while (list < list_end) {
                uint64_t inner;
                if (read_varint(&list, list_end, &inner) < 0 || (inner >> 3) == 0) return -1;
                if ((inner >> 3) == 1) {
                    if ((inner & 7) != 2 || ++chunks > 1) return -1; /* unpacked: TF decides */
                    if (read_bytes(&list, list_end, &span->data, &span->size) < 0) return -1;
                } else {
                    return -1; /* an unknown field: TF decides */
                }
            }
        } else {
            return -1;
        }
    }
    if (kinds != 1) return -1; /* no kind set: TF decides */
    if (is_float) {
        if (span->size % 4) return -1;
        span->count = (int64_t)(span->size / 4);
    } else {
        int64_t count = 0;
        int run = 0; /* bytes of the varint so far */
        for (size_t i = 0; i < span->size; i++) {
            uint8_t byte = span->data[i];
            if (++run == 10 && byte > 1) return -1; /* beyond 64 bits */
            if (byte < 0x80) {
                count++;
                run = 0;
            }
        }
        if (run) return -1; /* a varint cut short */
        span->count = count;
    }
    span->present = 1;
    return 0;
}

static int parse_google(const uint8_t *p, const uint8_t *end, Span spans[NF]) {
    memset(spans, 0, sizeof(Span) * NF);
    while (p < end) {
        uint64_t tag;
        if (read_varint(&p, end, &tag) < 0 || (tag >> 3) == 0) return -1;
        if (tag != ((1 << 3) | 2)) return -1; /* unknown fields: TF decides (it refuses some) */
        const uint8_t *features, *features_end;
        size_t size;
        if (read_bytes(&p, end, &features, &size) < 0) return -1;
        features_end = features + size;
        while (features < features_end) {
            if (read_varint(&features, features_end, &tag) < 0 || (tag >> 3) == 0) return -1;
            if (tag != ((1 << 3) | 2)) return -1;
            const uint8_t *entry, *entry_end, *key = NULL, *value = NULL;
            size_t key_size = 0, value_size = 0;
            if (read_bytes(&features, features_end, &entry, &size) < 0) return -1;
            entry_end = entry + size;
            while (entry < entry_end) {
                if (read_varint(&entry, entry_end, &tag) < 0 || (tag >> 3) == 0) return -1;
                if (tag == ((1 << 3) | 2)) {
                    if (read_bytes(&entry, entry_end, &key, &key_size) < 0) return -1;
                } else if (tag == ((2 << 3) | 2)) {
                    if (read_bytes(&entry, entry_end, &value, &value_size) < 0) return -1;
                } else {
                    return -1;
                }
            }
            if (!key) return -1;
            for (int f = 0; f < NF; f++) {
                if (strlen(google_names[f]) != key_size ||
                    memcmp(google_names[f], key, key_size))
                    continue;
                if (spans[f].present || !value) return -1; /* a repeated key: TF decides */
                if (parse_feature(value, value + value_size, f == F_W, &spans[f]) < 0)
                    return -1;
            }
        }
    }
    return 0;
}

/* The next value of a span checked by parse_feature (complete varints of <= 10 bytes). */
static inline const uint8_t *next_value(const uint8_t *p, uint64_t *value) {
    uint8_t byte = *p++;
    if (byte < 0x80) {
        *value = byte;
        return p;
    }
    uint64_t v = byte & 0x7f;
    int shift = 7;
    do {
        byte = *p++;
        v |= (uint64_t)(byte & 0x7f) << shift;
        shift += 7;
    } while (byte & 0x80);
    *value = v;
    return p;
}

/* The first `count` values of an int span into out (as int32), 1 when they all lie in
   [low, high] (as int64). */
static int take_ints(const Span *s, int64_t count, int32_t *out, int64_t low, int64_t high) {
    const uint8_t *p = s->data;
    int inside = 1;
    for (int64_t i = 0; i < count; i++) {
        uint64_t v;
        p = next_value(p, &v);
        out[i] = (int32_t)(int64_t)v;
        inside &= (int64_t)v >= low && (int64_t)v <= high;
    }
    return inside;
}

/* Where one record's kept values go: every array large enough for all its values. */
typedef struct {
    int32_t *ids, *segments, *positions, *masked_ids, *labels;
    float *weights;
} Kept;

/* The rule code of one parsed record (the first rule of validation.RULES it breaks,
   rules by number as there), its tokens and real predictions; its values into `kept`. */
static int google_code(const Span s[NF], int64_t *tokens, int64_t *predictions, Kept *kept) {
    int64_t n_ids = s[F_IDS].count, ones = 0;
    int binary = 1, prefix = 1, seen_zero = 0;
    const uint8_t *p = s[F_MASK].data;
    for (int64_t i = 0; i < s[F_MASK].count; i++) {
        uint64_t v;
        p = next_value(p, &v);
        if (v > 1) binary = 0;
        if (v == 1) {
            ones++;
            prefix &= !seen_zero;
        } else {
            seen_zero = 1;
        }
    }
    *tokens = ones;
    int64_t real = 0;
    int weights_valid = 1, real_first = 1;
    for (int64_t i = 0; i < s[F_W].count; i++) {
        float w;
        memcpy(&w, s[F_W].data + 4 * i, 4);
        if (!(w >= 0) || w == INFINITY) weights_valid = 0;
        /* TensorFlow's CPU kernels flush subnormal floats to zero: a weight below
           FLT_MIN is not a real prediction there, so not here either. */
        if (w >= FLT_MIN) {
            real_first &= real == i;
            real++;
        }
    }
    *predictions = real;
    memcpy(kept->weights, s[F_W].data, 4 * (size_t)(real < s[F_W].count ? real : s[F_W].count));
    int ids_inside = take_ints(&s[F_IDS], n_ids, kept->ids, 0, INT32_MAX_VALUE);
    int segments_inside =
        take_ints(&s[F_SEG], s[F_SEG].count, kept->segments, 0, INT32_MAX_VALUE);
    int64_t n_masked = real < s[F_MIDS].count ? real : s[F_MIDS].count;
    int masked_inside = take_ints(&s[F_MIDS], n_masked, kept->masked_ids, 0, INT32_MAX_VALUE);
    int64_t n_positions = real < s[F_POS].count ? real : s[F_POS].count;
    int positions_inside = take_ints(&s[F_POS], n_positions, kept->positions, 0, ones - 1);
    int label_inside = s[F_NSP].count == 1 &&
                       take_ints(&s[F_NSP], 1, kept->labels, -INT32_MAX_VALUE - 1,
                                 INT32_MAX_VALUE);
    if (n_ids <= 0) return 1;
    if (s[F_MASK].count != n_ids) return 2;
    if (s[F_SEG].count != n_ids) return 3;
    if (!binary) return 4;
    if (!prefix || ones == 0) return 5;
    if (!ids_inside) return 6;
    if (!segments_inside) return 7;
    if (s[F_POS].count != s[F_MIDS].count || s[F_MIDS].count != s[F_W].count) return 8;
    if (!weights_valid) return 9;
    if (!real_first) return 10;
    if (!masked_inside) return 11;
    if (!label_inside) return 12;
    if (!positions_inside) return 13;
    return 0;
}

/* scan_google(records): see the top. */
static PyObject *scan_google(PyObject *self, PyObject *args) {
    PyObject *sequence;
    if (!PyArg_ParseTuple(args, "O", &sequence)) return NULL;
    PyObject *fast = PySequence_Fast(sequence, "records must be a sequence of bytes");
    if (!fast) return NULL;
    Py_ssize_t B = PySequence_Fast_GET_SIZE(fast);
    PyObject **items = PySequence_Fast_ITEMS(fast);
    for (Py_ssize_t b = 0; b < B; b++) {
        if (!PyBytes_Check(items[b])) {
            Py_DECREF(fast);
            PyErr_SetString(PyExc_TypeError, "records must be bytes");
            return NULL;
        }
    }
    PyObject *codes = PyBytes_FromStringAndSize(NULL, 4 * B);
    PyObject *tokens = PyBytes_FromStringAndSize(NULL, 8 * B);
    PyObject *predictions = PyBytes_FromStringAndSize(NULL, 8 * B);
    Span *spans = PyMem_Malloc(sizeof(Span) * NF * (size_t)(B ? B : 1));
    PyObject *kept[6] = {NULL}, *result = NULL;
    if (!codes || !tokens || !predictions || !spans) {
        PyErr_NoMemory();
        goto done;
    }
    int32_t *code = (int32_t *)PyBytes_AS_STRING(codes);
    int64_t *token = (int64_t *)PyBytes_AS_STRING(tokens);
    int64_t *prediction = (int64_t *)PyBytes_AS_STRING(predictions);
    int64_t room[NF] = {0}; /* values of each feature in all records: the kept arrays' room */
    int undecided = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t b = 0; b < B; b++) {
        const uint8_t *data = (const uint8_t *)PyBytes_AS_STRING(items[b]);
        Span *s = spans + NF * b;
        if (parse_google(data, data + PyBytes_GET_SIZE(items[b]), s) < 0) {
            undecided = 1;
            break;
        }
        for (int f = 0; f < NF; f++) room[f] += s[f].count;
    }
    Py_END_ALLOW_THREADS
    if (undecided) { /* TensorFlow's parser decides the whole batch */
        memset(code, 0xff, 4 * (size_t)B);
        memset(token, 0, 8 * (size_t)B);
        memset(prediction, 0, 8 * (size_t)B);
        result = Py_BuildValue("(OOOOO)", codes, tokens, predictions, Py_None, Py_None);
        goto done;
    }
    int feature_of[6] = {F_IDS, F_SEG, F_POS, F_MIDS, F_W, F_NSP};
    for (int k = 0; k < 6; k++) {
        kept[k] = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(4 * room[feature_of[k]] + 4));
        if (!kept[k]) goto done;
    }
    Kept at = {(int32_t *)PyBytes_AS_STRING(kept[0]), (int32_t *)PyBytes_AS_STRING(kept[1]),
               (int32_t *)PyBytes_AS_STRING(kept[2]), (int32_t *)PyBytes_AS_STRING(kept[3]),
               (int32_t *)PyBytes_AS_STRING(kept[5]), (float *)PyBytes_AS_STRING(kept[4])};
    int64_t used[6] = {0};
    int all_valid = 1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t b = 0; b < B; b++) {
        code[b] = google_code(spans + NF * b, &token[b], &prediction[b], &at);
        all_valid &= code[b] == 0;
        /* Keep the first `tokens` / `predictions` values (the rest is overwritten); never
           past what the record holds, so an invalid record stays inside the room. */
        const Span *s = spans + NF * b;
        int64_t advance[6] = {token[b], token[b], prediction[b], prediction[b],
                              prediction[b], 1};
        for (int k = 0; k < 6; k++) {
            if (advance[k] > s[feature_of[k]].count) advance[k] = s[feature_of[k]].count;
            used[k] += advance[k];
        }
        at.ids += advance[0];
        at.segments += advance[1];
        at.positions += advance[2];
        at.masked_ids += advance[3];
        at.weights += advance[4];
        at.labels += advance[5];
    }
    Py_END_ALLOW_THREADS
    if (all_valid) {
        result = Py_BuildValue("(OOO(OOOOOO)(LLLLLL))", codes, tokens, predictions, kept[0],
                               kept[1], kept[2], kept[3], kept[4], kept[5],
                               (long long)used[0], (long long)used[1], (long long)used[2],
                               (long long)used[3], (long long)used[4], (long long)used[5]);
    } else {
        result = Py_BuildValue("(OOOOO)", codes, tokens, predictions, Py_None, Py_None);
    }

done:
    for (int k = 0; k < 6; k++) Py_XDECREF(kept[k]);
    Py_XDECREF(codes);
    Py_XDECREF(tokens);
    Py_XDECREF(predictions);
    PyMem_Free(spans);
    Py_DECREF(fast);
    return result;
}

/* split_records(data, final) -> (records, used, problem): see the top. */
static PyObject *split_records(PyObject *self, PyObject *args) {
    Py_buffer view;
    int final;
    if (!PyArg_ParseTuple(args, "y*p", &view, &final)) return NULL;
    const uint8_t *data = view.buf;
    size_t size = (size_t)view.len, at = 0;
    PyObject *records = PyList_New(0), *problem = Py_None;
    if (!records) {
        PyBuffer_Release(&view);
        return NULL;
    }
    Py_INCREF(problem);
    while (at < size) {
        if (size - at < 12) break;
        uint64_t length = 0;
        for (int k = 0; k < 8; k++) length |= (uint64_t)data[at + k] << (8 * k);
        uint32_t stored = 0;
        for (int k = 0; k < 4; k++) stored |= (uint32_t)data[at + 8 + k] << (8 * k);
        if (masked_crc(data + at, 8) != stored) {
            Py_DECREF(problem);
            problem = PyUnicode_FromFormat("corrupted record length at byte %zu", at);
            break;
        }
        if (length > size - at - 12 || size - at - 12 - length < 4) break;
        stored = 0;
        for (int k = 0; k < 4; k++) stored |= (uint32_t)data[at + 12 + length + k] << (8 * k);
        if (masked_crc(data + at + 12, (size_t)length) != stored) {
            Py_DECREF(problem);
            problem = PyUnicode_FromFormat("corrupted record at byte %zu", at);
            break;
        }
        PyObject *record = PyBytes_FromStringAndSize((const char *)data + at + 12,
                                                     (Py_ssize_t)length);
        if (!record || PyList_Append(records, record) < 0) {
            Py_XDECREF(record);
            Py_DECREF(records);
            Py_DECREF(problem);
            PyBuffer_Release(&view);
            return NULL;
        }
        Py_DECREF(record);
        at += 12 + (size_t)length + 4;
    }
    if (final && at < size && problem == Py_None) {
        Py_DECREF(problem);
        problem = PyUnicode_FromFormat("truncated record at byte %zu", at);
    }
    PyBuffer_Release(&view);
    if (!problem) {
        Py_DECREF(records);
        return NULL;
    }
    PyObject *result = Py_BuildValue("(NnN)", records, (Py_ssize_t)at, problem);
    return result;
}

/* Write the iovecs [0, n) whole to fd (writev, partial writes resumed); 0 or an errno. */
static int write_all(int fd, struct iovec *iov, int n) {
    while (n > 0) {
        ssize_t r = writev(fd, iov, n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return errno;
        while (n > 0 && (size_t)r >= iov->iov_len) {
            r -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (uint8_t *)iov->iov_base + r;
            iov->iov_len -= (size_t)r;
        }
    }
    return 0;
}

/* write_interleaved(fd, sources, runs) -> bytes written: see the top. */
static PyObject *write_interleaved(PyObject *self, PyObject *args) {
    int fd;
    PyObject *sources, *runs_list;
    if (!PyArg_ParseTuple(args, "iO!O!", &fd, &PyList_Type, &sources, &PyList_Type, &runs_list))
        return NULL;
    Py_ssize_t F = PyList_GET_SIZE(sources);
    Py_buffer *views = PyMem_Calloc(2 * (size_t)(F ? F : 1), sizeof(Py_buffer));
    const int64_t **runs = PyMem_Calloc((size_t)(F ? F : 1), sizeof(int64_t *));
    const uint8_t **from = PyMem_Calloc((size_t)(F ? F : 1), sizeof(uint8_t *));
    PyObject *result = NULL;
    Py_ssize_t B = -1; /* records */
    int64_t total = 0;
    if (!views || !runs || !from) {
        PyErr_NoMemory();
        goto done;
    }
    if (PyList_GET_SIZE(runs_list) != F) {
        PyErr_SetString(PyExc_ValueError, "write_interleaved: one runs entry per source");
        goto done;
    }
    for (Py_ssize_t f = 0; f < F; f++) {
        PyObject *source = PyList_GET_ITEM(sources, f), *r = PyList_GET_ITEM(runs_list, f);
        if (PyObject_GetBuffer(source, &views[2 * f], PyBUF_C_CONTIGUOUS) < 0) goto done;
        from[f] = views[2 * f].buf;
        int64_t items = views[2 * f].len / 4, sum = 0;
        if (r != Py_None) {
            if (PyObject_GetBuffer(r, &views[2 * f + 1], PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
                goto done;
            if (!is_int64(&views[2 * f + 1])) {
                PyErr_SetString(PyExc_ValueError, "write_interleaved: runs must be int64");
                goto done;
            }
            runs[f] = views[2 * f + 1].buf;
        }
        Py_ssize_t n = runs[f] ? views[2 * f + 1].len / 8 : (Py_ssize_t)items;
        if (B < 0) B = n;
        for (Py_ssize_t i = 0; runs[f] && i < n && sum >= 0; i++)
            sum = runs[f][i] < 0 || runs[f][i] > INT64_MAX - sum ? -1 : sum + runs[f][i];
        if (!runs[f]) sum = n;
        if (n != B || sum != items || views[2 * f].len % 4) {
            PyErr_Format(PyExc_ValueError, "write_interleaved: source %zd holds %lld items for "
                         "runs of %lld over %zd records (expected %zd records)", f,
                         (long long)items, (long long)sum, n, B);
            goto done;
        }
        total += items;
    }
    int error = 0;
    Py_BEGIN_ALLOW_THREADS
    struct iovec iov[1024]; /* IOV_MAX on Linux */
    int k = 0;
    for (Py_ssize_t i = 0; i < B && !error; i++) {
        for (Py_ssize_t f = 0; f < F && !error; f++) {
            size_t size = 4 * (size_t)(runs[f] ? runs[f][i] : 1);
            if (!size) continue;
            iov[k].iov_base = (void *)from[f];
            iov[k].iov_len = size;
            from[f] += size;
            if (++k == 1024) {
                error = write_all(fd, iov, k);
                k = 0;
            }
        }
    }
    if (!error && k) error = write_all(fd, iov, k);
    Py_END_ALLOW_THREADS
    if (error) {
        errno = error;
        PyErr_SetFromErrno(PyExc_OSError);
        goto done;
    }
    result = PyLong_FromLongLong(4 * total);
done:
    for (Py_ssize_t k = 0; views && k < 2 * F; k++) /* calloc'd: unused views have no obj */
        if (views[k].obj) PyBuffer_Release(&views[k]);
    PyMem_Free(views);
    PyMem_Free(runs);
    PyMem_Free(from);
    return result;
}

/* read_runs(fd, itemsize, starts, runs, out) -> bytes read: see the top. */
static PyObject *read_runs(PyObject *self, PyObject *args) {
    int fd;
    Py_ssize_t itemsize;
    PyObject *starts_obj, *runs_obj;
    Py_buffer out, starts_view, runs_view;
    if (!PyArg_ParseTuple(args, "inOOw*", &fd, &itemsize, &starts_obj, &runs_obj, &out))
        return NULL;
    const int64_t *starts, *runs;
    if (PyObject_GetBuffer(starts_obj, &starts_view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&out);
        return NULL;
    }
    Py_ssize_t n = starts_view.len / 8;
    starts = (const int64_t *)starts_view.buf;
    if (int64_view(runs_obj, &runs_view, &runs, n, "runs") < 0 || !is_int64(&starts_view) ||
        itemsize <= 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "starts must be int64, itemsize > 0");
        if (runs_view.obj) PyBuffer_Release(&runs_view);
        PyBuffer_Release(&starts_view);
        PyBuffer_Release(&out);
        return NULL;
    }
    /* Every run must be whole and fit `out`, checked before anything is read. */
    int64_t need = 0;
    for (Py_ssize_t m = 0; m < n; m++) {
        int64_t run = runs ? runs[m] : 1;
        /* ... and end within a file offset: (starts[m] + run) * itemsize would wrap otherwise,
         * a start past 2**63 / itemsize read from the file's front. */
        if (starts[m] < 0 || run < 0 || run > (INT64_MAX / itemsize - need) ||
            starts[m] > INT64_MAX / itemsize - run)
            need = -1;
        if (need < 0) break;
        need += run;
    }
    if (need < 0 || need * itemsize > out.len) {
        PyErr_SetString(PyExc_ValueError, "read_runs: a negative start or run, a run ending past a "
                        "file offset (2**63 - 1 bytes), or runs that do not fit out");
        if (runs_view.obj) PyBuffer_Release(&runs_view);
        PyBuffer_Release(&starts_view);
        PyBuffer_Release(&out);
        return NULL;
    }
    uint8_t *to = out.buf;
    int64_t done = 0; /* bytes read into out */
    int error = 0;
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t m = 0;
    while (m < n) {
        /* One pread for the runs that continue each other in the file. */
        int64_t first = starts[m], items = runs ? runs[m] : 1;
        for (m++; m < n && starts[m] == first + items; m++) items += runs ? runs[m] : 1;
        int64_t want = items * itemsize, got = 0;
        off_t at = (off_t)(first * itemsize);
        while (got < want) {
            ssize_t r = pread(fd, to + done + got, (size_t)(want - got), at + got);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) error = errno;
            if (r <= 0) break;
            got += r;
        }
        done += got;
        if (got < want) break;
    }
    Py_END_ALLOW_THREADS
    if (runs_view.obj) PyBuffer_Release(&runs_view);
    PyBuffer_Release(&starts_view);
    PyBuffer_Release(&out);
    if (error) {
        errno = error;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return PyLong_FromLongLong(done);
}

/* crc32c(data, software=False): the (unmasked) CRC-32C of data, for tests of both paths. */
static PyObject *crc(PyObject *self, PyObject *args) {
    Py_buffer data;
    int software = 0;
    if (!PyArg_ParseTuple(args, "y*|p", &data, &software)) return NULL;
    uint32_t value = crc32c((const uint8_t *)data.buf, (size_t)data.len);
#ifdef HAVE_HW_CRC
    if (hw_crc && !software) value = crc32c_hw((const uint8_t *)data.buf, (size_t)data.len);
#endif
    PyBuffer_Release(&data);
    return PyLong_FromUnsignedLong(value);
}

static PyMethodDef methods[] = {
    {"split_records", split_records, METH_VARARGS,
     "Records of TFRecord-framed bytes, CRCs checked (see the source)."},
    {"scan_google", scan_google, METH_VARARGS,
     "Parse and check Google records (the rules of tfpack.formats.validation)."},
    {"crc32c", crc, METH_VARARGS, "CRC-32C of bytes (software=True: the table-driven path)."},
    {"encode", encode, METH_VARARGS, "Serialize tf.train.Example records (see the source)."},
    {"frame", frame, METH_VARARGS, "TFRecord framing of serialized records."},
    {"read_runs", read_runs, METH_VARARGS, "Runs of items of a file by pread (see the source)."},
    {"write_interleaved", write_interleaved, METH_VARARGS,
     "Append 4-byte items to a file, record-major (see the source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_wire",
                                    "tf.train.Example records and TFRecord framing.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__wire(void) {
    crc_init();
#ifdef HAVE_HW_CRC
    __builtin_cpu_init();
    hw_crc = __builtin_cpu_supports("sse4.2");
#endif
    return PyModule_Create(&module);
}
