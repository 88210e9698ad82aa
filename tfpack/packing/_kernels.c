/* tfpack.packing._kernels: the `optimal` planner's pricing knapsack, compiled.
 *
 * Python API (see tfpack/packing/compiled.py; the only caller is
 * tfpack/packing/algorithms/_knapsack.py, which documents the algorithm):
 *
 *   price(lengths, usable, priced, skip, max_length, depth, single, threshold,
 *         max_candidates, expired[, vectors]) -> (corner, anchor_value, rows, counts, offsets)
 *         or None
 *     lengths: int64 [n] ascending; usable: int64 [n] copies of each that one pack
 *     holds; priced: float64 [n] values (already rounded up to float32 where
 *     `single`); skip: uint8 [n] lengths no best pack needs (still anchors);
 *     depth: sequences per pack, or -1 for no limit; single: the table is float32
 *     (else float64). The dynamic program over (sequences, tokens), lengths in
 *     ascending order, each split into 0/1 items of 1, 2, 4, ... copies; the table
 *     just before a length gives its anchor value (that length the longest in the
 *     pack); columns past `most * length` are filled only when a longer length
 *     reaches them. `expired` (a callable or None) is called every 32 lengths and
 *     every 32 packs backtracked, and when it returns true the result is None.
 *     corner: the table's value at (all sequences, all tokens) as a double;
 *     anchor_value: bytes of float64 [n] (-inf where a length is no anchor);
 *     the anchors worth more than `threshold`, best first (ties: shorter first),
 *     at most `max_candidates`, are backtracked into packs: pack j is rows
 *     rows[offsets[j]:offsets[j + 1]] (ascending) with counts[...] copies; rows,
 *     counts and offsets are bytes of int64. `vectors`: the table's vector loops,
 *     0 none, 1 SSE2, 2 AVX2, or -1 (the default) or more: the most this CPU runs;
 *     every level gives the same result (the tests compare them), only faster.
 *
 *   vectors() -> int
 *     The most `vectors` level this build runs on this CPU (price's default).
 *
 *   exact_fill(histogram, depth, most_tokens, most_lengths, expired)
 *       -> (too_much, width, records, rest) or None
 *     The greedy of tfpack/packing/algorithms/_exact_fill.py's module notes (its Python
 *     original: tests/packing/exact_fill_reference.py): histogram: int64 [L], histogram[i]
 *     sequences of length i + 1; depth: sequences a full pack holds at most (1-16). Every
 *     length, longest first, opens a group of packs, completed to exactly L tokens by one
 *     sequence, by pairs, or by the shortest joiner that leaves a completable space; what a
 *     group cannot complete is left. too_much: 1 where the left lengths passed most_tokens
 *     tokens or most_lengths lengths (it stops there). records: bytes of int64 [r, width], a
 *     group of identical full packs each: width - 1 (16) lengths (descending, 0-padded) and
 *     how many, in the order the greedy made them; rest: bytes of int64 [L], the sequences
 *     in none.
 *     `expired` (a callable or None) is asked every 64 lengths that open packs or joiner
 *     searches; when it returns true the result is None.
 *
 *   dominated(copies, values, k) -> bytes of uint8 [n]
 *     Length r is skipped when the k most valuable copies of shorter lengths
 *     (within `copies`) are each worth at least values[r].
 *
 *   best_fit_decreasing(histogram, max_length, depth_limit) -> (strategies, counts)
 *     Best fit decreasing on groups of identical packs: the algorithm, and the
 *     plans, of tfpack/packing/algorithms/_fit_decreasing.py's module notes.
 *     histogram: int64 [max_length]; strategies: a list of tuples of lengths
 *     (longest first), one per group of packs in the opening order of its first
 *     pack; counts: bytes of int64, the packs of each.
 *
 *   real_packs(strategies, counts, histogram, starts) -> dict
 *     The real lengths of `histogram` (int64 [max_length]) in the slots of a plan
 *     for its histogram rounded up within the groups that begin at `starts`
 *     (int64, ascending, starts[0] == 1): strategies, a list of tuples of
 *     lengths (each a group's longest), counts int64. The algorithm, and the
 *     packs, of tfpack/packing/algorithms/_groups.py's `real_packs` notes: packs
 *     (tuples, longest first) -> how many, in order of first appearance.
 *
 *   dot_fill(counts, max_input, max_target, depth, aimed) -> (pack, a, b, packs)
 *     The dot-product fill of tfpack/packing/pairs/_dot.py's module notes: packs one
 *     at a time, each first taking the pair of the largest share of a limit (ties: the
 *     larger e / Le + d / Ld, then the longer input), then, while it has a place, the
 *     pair that fits its room (re, rd) with the largest e * re * Ld^2 + d * rd * Le^2
 *     (ties: the longer input, then target); `aimed`: with s > 1 places left, that
 *     pair within the room (re / s, rd / s) (floored) first, where one fits. counts: int64 [max_input * max_target], pairs of input length
 *     i + 1 and target length j + 1 at i * max_target + j; depth: places a pack,
 *     or -1 for no limit. A pack whose picks the histogram can repeat r times
 *     (each cell picked m times holds r * m pairs or more) is repeated r times:
 *     the greedy would pick the same (a pair left fewer only loses its turn).
 *     pack, a, b: bytes of int64, one per pair, in the order placed.
 *
 *   settle(pack, a, b, packs, max_input, max_target, depth, dissolve, most_moves[, seconds[, by_column[, sample]]]) -> pack
 *     The pass of tfpack/packing/pairs/_settle.py's module notes on a plan (pack, a, b: bytes
 *     of int64, one per pair; pack ids 0..packs-1): the `dissolve` packs of least
 *     sum of e * Ld + d * Le emptied, and `sample` more (0 where not given; every pack
 *     where it reaches `packs`) spread evenly over the ids (pack floor((i + 1/2) packs /
 *     sample) for i < sample, where not among the first), their pairs (largest first) each
 *     put in the tightest place, a pack's room or a smaller pair's slot (that pair then
 *     re-placed), at most `most_moves` placements, and none after `seconds` of the calling
 *     thread's CPU time from the call (where given and positive); pack: bytes of int64, -1
 *     for a pair left out. The pairs of full packs are neither listed nor slotted (they
 *     cannot move). The tightest place is the least slot, then the least input room.
 *     `by_column` (false where not given): it is found column by column of an index by
 *     target room, where the target room takes few values (one length, its depth: 4-10x
 *     faster at L=16,384); false: row by row of input room.
 *
 *   pair_slots(strategies, counts, max_input, max_target, depth) -> (broken, slots)
 *     The check of tfpack/packing/pairs/checks.py's invariants 1-3 on every strategy of a
 *     two-length plan (a sequence of (input, target) pairs of exact ints, in 1..Le x
 *     1..Ld, largest first, inputs summing to at most Le and targets to at most Ld, at
 *     most `depth` of them, -1: no limit) and its slots counted: counts: int64 bytes, one
 *     per strategy; slots: bytes of int64 [max_input * max_target], the slots of input
 *     length i + 1 and target length j + 1 at i * max_target + j, each strategy's pairs
 *     times its count. broken: the index of the first strategy that breaks a rule (slots
 *     then None), or -1.
 *
 *   pair_strategies(codes, rows, depth, max_target) -> list
 *     Strategies of a two-length plan built from a table of pair codes (bytes of int64
 *     [rows, depth], code (a - 1) * max_target + b for the pair (a, b)): a list of rows
 *     tuples of depth (a, b) tuples, in the table's order (tfpack/packing/pairs/_packs.py,
 *     `strategies_of`). Equal pairs share one tuple, and the tuples are not tracked by the
 *     garbage collector (they hold ints only): 1e6 pairs' 2e5 strategies in 0.02 s, not 0.1.
 *
 *   template_assign(slot_pack, slot_length, counts, order, packs) -> (pack, a, b)
 *     The pairs of a two-length histogram put into the slots of a one-length plan
 *     (tfpack/packing/pairs/_templates.py, `_assign`): slot_pack (non-decreasing) and
 *     slot_length (1..rows), bytes of int64, one per slot; counts: int64 [rows, cols];
 *     order: int64 [rows], the row indices in the order their pairs are placed. Row i's
 *     targets, longest first, go rank by rank (a pack's first slot of length i + 1,
 *     its second, ...) to the packs of the least target load so far (ties: the lower
 *     pack id). pack, a, b: bytes of int64, one per pair placed, in the order placed.
 *
 *   template_fit(pack, b, max_target, packs) -> keep
 *     Which pairs stay where templates overflowed (`_templates._fitting`): a pack whose
 *     targets sum past max_target gives back its smallest target at least the excess
 *     (ties: the first pair), else its largest (ties: the last), and again until it
 *     fits. pack, b: bytes of int64, one per pair; keep: bytes of uint8, one per pair.
 *
 *   spread_fill(counts, max_length, depth, batch, scale, reopened, expired) -> rows or None
 *     One pass of the spread fill of tfpack/packing/algorithms/_spread_fill.py's module notes
 *     (`_fill`): counts: a writable int64 [max_length + 1], counts[n] sequences of length n
 *     (counts[0] 0), taken from it; reopened: bytes of int64 [r, depth], packs whose sequences
 *     are not in counts, each row descending, the rows by their sums descending. Packs open
 *     `batch` at a time (no more than the tokens or the sequences left need), the longest
 *     single sequences and reopened packs first; then each slot in turn, the open packs by
 *     their targets (free * scale // slots left, floored as numpy floors floats; the last
 *     slot: the free space), each target, largest first (ties: the later pack), takes the
 *     longest sequence left at most it (0: none). `expired` (a callable or None) is called
 *     before each batch; when it returns true the result is None. rows: bytes of int64
 *     [packs, depth], 0 an empty slot, in the order the packs opened.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__linux__)
#include <sys/mman.h> /* madvise (Python.h asked for the GNU extensions) */
#endif

/* malloc for a kernel's large work arrays, asking Linux for transparent huge pages where it
 * gives them on request (the "madvise" mode): else each 4 KiB page faults in at its first
 * touch. `settle` at L=16,384 (90 MB for 0.9 million sequences): its setup 0.055-0.070 ->
 * 0.020-0.029 s, a whole pass 0.01-0.06 s less (benchmarks/results/planners_long_context.md,
 * session 22). */
#define HUGE_PAGE ((uintptr_t)2 << 20)
static void *large(size_t bytes) {
    void *memory = malloc(bytes);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    uintptr_t first = ((uintptr_t)memory + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    uintptr_t end = ((uintptr_t)memory + bytes) & ~(HUGE_PAGE - 1);
    if (memory && end > first) madvise((void *)first, end - first, MADV_HUGEPAGE); /* advice only */
#endif
    return memory;
}

/* ------------------------------------------------------------------ pricing */

typedef struct {
    int64_t row, tokens, shift, filled, width; /* width: source columns (bits a mask row) */
    size_t mask; /* offset of its bit mask (height rows of `stride(width)` bytes) */
} Item;

static size_t stride_of(int64_t width) { return (size_t)((width + 7) / 8); }

/* A growing byte buffer for the items' masks and a growing array of items. */
typedef struct {
    uint8_t *bits;
    size_t used, size;
    Item *items;
    size_t count, capacity;
} Trace;

static int trace_reserve(Trace *trace, size_t bytes) {
    if (trace->used + bytes > trace->size) {
        size_t size = trace->size ? trace->size : 1 << 16;
        while (size < trace->used + bytes) size *= 2;
        uint8_t *bits = realloc(trace->bits, size);
        if (!bits) return -1;
        trace->bits = bits, trace->size = size;
    }
    if (trace->count == trace->capacity) {
        size_t capacity = trace->capacity ? 2 * trace->capacity : 256;
        Item *items = realloc(trace->items, capacity * sizeof(Item));
        if (!items) return -1;
        trace->items = items, trace->capacity = capacity;
    }
    return 0;
}

/* Vector loops over one row of an item, 8 cells (a byte of bits) a block, with the same sums
 * and comparisons as the scalar loop (max keeps dst unless src + gain > dst), so every level
 * gives the same table and bits. Levels (`vectors`): 0 none, 1 SSE2 (in every x86-64), 2 AVX2
 * (8 floats or 4 doubles a register; GCC and Clang build it for a CPU that has it, asked at
 * run time by `best_vectors`). `left_*` does the blocks from the left and returns the cells
 * done; `right_*` does the first `cells` (a multiple of 8) from the right and returns 0. */
#if defined(__SSE2__)
#include <immintrin.h>
#define HAVE_SSE2 1
static inline int block_float_sse2(const float *src, float *dst, __m128 g) {
    __m128 s0 = _mm_add_ps(_mm_loadu_ps(src), g), d0 = _mm_loadu_ps(dst);
    __m128 s1 = _mm_add_ps(_mm_loadu_ps(src + 4), g), d1 = _mm_loadu_ps(dst + 4);
    int low = _mm_movemask_ps(_mm_cmpgt_ps(s0, d0)), high = _mm_movemask_ps(_mm_cmpgt_ps(s1, d1));
    _mm_storeu_ps(dst, _mm_max_ps(s0, d0));
    _mm_storeu_ps(dst + 4, _mm_max_ps(s1, d1));
    return low | high << 4;
}
static inline int block_double_sse2(const double *src, double *dst, __m128d g) {
    int byte = 0;
    for (int j = 0; j < 8; j += 2) {
        __m128d v = _mm_add_pd(_mm_loadu_pd(src + j), g), d = _mm_loadu_pd(dst + j);
        byte |= _mm_movemask_pd(_mm_cmpgt_pd(v, d)) << j;
        _mm_storeu_pd(dst + j, _mm_max_pd(v, d));
    }
    return byte;
}
#if defined(__GNUC__)
#define HAVE_AVX2 1
#define AVX2 __attribute__((target("avx2")))
AVX2 static inline int block_float_avx2(const float *src, float *dst, __m256 g) {
    __m256 s = _mm256_add_ps(_mm256_loadu_ps(src), g), d = _mm256_loadu_ps(dst);
    _mm256_storeu_ps(dst, _mm256_max_ps(s, d));
    return _mm256_movemask_ps(_mm256_cmp_ps(s, d, _CMP_GT_OQ));
}
AVX2 static inline int block_double_avx2(const double *src, double *dst, __m256d g) {
    __m256d s0 = _mm256_add_pd(_mm256_loadu_pd(src), g), d0 = _mm256_loadu_pd(dst);
    __m256d s1 = _mm256_add_pd(_mm256_loadu_pd(src + 4), g), d1 = _mm256_loadu_pd(dst + 4);
    int low = _mm256_movemask_pd(_mm256_cmp_pd(s0, d0, _CMP_GT_OQ));
    int high = _mm256_movemask_pd(_mm256_cmp_pd(s1, d1, _CMP_GT_OQ));
    _mm256_storeu_pd(dst, _mm256_max_pd(s0, d0));
    _mm256_storeu_pd(dst + 4, _mm256_max_pd(s1, d1));
    return low | high << 4;
}
#endif
#endif

#define BLOCK_LOOPS(T, LEVEL, ATTR, V, SET)                                                   \
    ATTR static int64_t left_##T##_##LEVEL(const T *src, T *dst, int64_t width, T gain,       \
                                           uint8_t *bits) {                                   \
        V g = SET(gain);                                                                      \
        int64_t c0 = 0;                                                                       \
        for (; c0 + 8 <= width; c0 += 8)                                                      \
            bits[c0 >> 3] = (uint8_t)block_##T##_##LEVEL(src + c0, dst + c0, g);              \
        return c0;                                                                            \
    }                                                                                         \
    ATTR static int64_t right_##T##_##LEVEL(const T *src, T *dst, int64_t cells, T gain,      \
                                            uint8_t *bits) {                                  \
        V g = SET(gain);                                                                      \
        for (int64_t c0 = cells - 8; c0 >= 0; c0 -= 8)                                        \
            bits[c0 >> 3] = (uint8_t)block_##T##_##LEVEL(src + c0, dst + c0, g);              \
        return 0;                                                                             \
    }
#ifdef HAVE_SSE2
BLOCK_LOOPS(float, sse2, , __m128, _mm_set1_ps)
BLOCK_LOOPS(double, sse2, , __m128d, _mm_set1_pd)
#define ON_SSE2(call) case 1: return call;
#else
#define ON_SSE2(call)
#endif
#ifdef HAVE_AVX2
BLOCK_LOOPS(float, avx2, AVX2, __m256, _mm256_set1_ps)
BLOCK_LOOPS(double, avx2, AVX2, __m256d, _mm256_set1_pd)
#define ON_AVX2(call) case 2: return call;
#else
#define ON_AVX2(call)
#endif

/* The most vectors this build runs on this CPU (a level above). */
static int best_vectors(void) {
#ifdef HAVE_AVX2
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) return 2;
#endif
#ifdef HAVE_SSE2
    return 1;
#else
    return 0;
#endif
}

/* `left_*` and `right_*` at a level (`vectors`, at most `best_vectors()`); without vectors
 * `left` does no cell and `right` leaves all `cells` to the scalar loop. */
#define DISPATCH(T)                                                                           \
    static int64_t left_##T(const T *src, T *dst, int64_t width, T gain, uint8_t *bits,       \
                            int vectors) {                                                    \
        (void)src, (void)dst, (void)width, (void)gain, (void)bits;                            \
        switch (vectors) {                                                                    \
            ON_AVX2(left_##T##_avx2(src, dst, width, gain, bits))                             \
            ON_SSE2(left_##T##_sse2(src, dst, width, gain, bits))                             \
            default: return 0;                                                                \
        }                                                                                     \
    }                                                                                         \
    static int64_t right_##T(const T *src, T *dst, int64_t cells, T gain, uint8_t *bits,      \
                             int vectors) {                                                   \
        (void)src, (void)dst, (void)gain, (void)bits;                                         \
        switch (vectors) {                                                                    \
            ON_AVX2(right_##T##_avx2(src, dst, cells, gain, bits))                            \
            ON_SSE2(right_##T##_sse2(src, dst, cells, gain, bits))                            \
            default: return cells;                                                            \
        }                                                                                     \
    }
DISPATCH(float)
DISPATCH(double)

/* One 0/1 item into the table (in place), its improvements recorded bit by bit:
 * cell (k + shift, c + tokens) takes (k, c) + gain where that is larger. */
#define APPLY_ITEM(NAME, T)                                                                   \
    static void NAME(T *table, int64_t cols, int64_t height, int64_t shift, int64_t tokens,     \
                     int64_t width, T gain, uint8_t *mask, int vectors) {                       \
        size_t stride = stride_of(width);                                                     \
        for (int64_t k = height - 1; k >= 0; k--) {                                           \
            T *src = table + k * cols;                                                        \
            T *dst = table + (k + shift) * cols + tokens;                                     \
            uint8_t *bits = mask + (size_t)k * stride;                                        \
            if (shift == 0) { /* same row: from the right, so sources are read first */       \
                memset(bits, 0, stride);                                                      \
                /* An item of 8 tokens or more: a block of 8 reads no cell that it, or a      \
                 * block right of it, writes; the cells right of the blocks go one by one. */ \
                int64_t blocks = tokens >= 8 ? width & ~(int64_t)7 : 0;                       \
                for (int64_t c = width - 1; c >= 0; c--) {                                    \
                    if (c == blocks - 1 && (c = right_##T(src, dst, blocks, gain, bits,       \
                                                          vectors) - 1) < 0)                  \
                        break;                                                                \
                    T v = src[c] + gain;                                                      \
                    if (v > dst[c]) {                                                         \
                        dst[c] = v;                                                           \
                        bits[c >> 3] |= (uint8_t)(1u << (c & 7));                             \
                    }                                                                         \
                }                                                                             \
                continue;                                                                     \
            }                                                                                 \
            /* What the vector part left, 8 cells (the last block fewer) a byte of bits. */   \
            for (int64_t c0 = left_##T(src, dst, width, gain, bits, vectors); c0 < width;     \
                 c0 += 8) {                                                                   \
                int n = width - c0 < 8 ? (int)(width - c0) : 8;                               \
                unsigned byte = 0;                                                            \
                for (int j = 0; j < n; j++) {                                                 \
                    T v = src[c0 + j] + gain, d = dst[c0 + j];                                \
                    unsigned better = v > d;                                                  \
                    dst[c0 + j] = better ? v : d;                                             \
                    byte |= better << j;                                                      \
                }                                                                             \
                bits[c0 >> 3] = (uint8_t)byte;                                                \
            }                                                                                 \
        }                                                                                     \
    }
APPLY_ITEM(apply_f32, float)
APPLY_ITEM(apply_f64, double)

typedef struct {
    double value;
    int64_t row;
} Candidate;

static int by_value(const void *a, const void *b) {
    const Candidate *x = a, *y = b;
    if (x->value != y->value) return x->value > y->value ? -1 : 1; /* best first */
    return x->row < y->row ? -1 : (x->row > y->row); /* ties: the shorter (stable) */
}

/* 1 when `expired` (a callable, or None: never) says the budget has ended, 0 when
 * not, -1 with an exception set when it raised. */
static int budget_ended(PyObject *expired) {
    if (expired == Py_None) return 0;
    PyObject *out = PyObject_CallNoArgs(expired);
    int stop = out ? PyObject_IsTrue(out) : -1;
    Py_XDECREF(out);
    return stop;
}

/* The forward pass: fills `anchor_value`, `anchor_copies`, `anchor_item`; returns the
 * corner value, or NAN when `expired` said so (or -INFINITY with an exception set). */
#define FORWARD(NAME, T, APPLY)                                                               \
    static double NAME(const int64_t *lengths, const int64_t *usable, const double *priced,   \
                       const uint8_t *skip, int64_t n, int64_t max_length, int64_t depth,       \
                       int64_t most, PyObject *expired, Trace *trace, double *anchor_value,     \
                       int64_t *anchor_copies, int64_t *anchor_item, int vectors) {              \
        int64_t rows = depth < 0 ? 1 : depth + 1, cols = max_length + 1;                       \
        T *table = calloc((size_t)(rows * cols), sizeof(T));                                   \
        if (!table) {                                                                         \
            PyErr_NoMemory();                                                                 \
            return -INFINITY;                                                                 \
        }                                                                                     \
        int64_t filled = 1;                                                                   \
        for (int64_t r = 0; r < n; r++) {                                                     \
            anchor_value[r] = -INFINITY, anchor_copies[r] = 0, anchor_item[r] = 0;            \
            if (r % 32 == 31) {                                                               \
                int stop = budget_ended(expired);                                             \
                if (stop) {                                                                   \
                    free(table);                                                              \
                    return stop < 0 ? -INFINITY : NAN;                                        \
                }                                                                             \
            }                                                                                 \
            int64_t length = lengths[r], copies = usable[r];                                  \
            double value = priced[r];                                                         \
            if (value <= 0.0 || copies <= 0) continue;                                        \
            int64_t reach = most * length + 1 < cols ? most * length + 1 : cols;              \
            if (reach > filled) {                                                             \
                for (int64_t k = 0; k < rows; k++) {                                          \
                    T *row = table + k * cols;                                                \
                    for (int64_t c = filled; c < reach; c++) row[c] = row[filled - 1];        \
                }                                                                             \
                filled = reach;                                                               \
            }                                                                                 \
            double best = -INFINITY;                                                          \
            int64_t best_m = 0;                                                               \
            for (int64_t m = 1; m <= copies; m++) {                                           \
                int64_t k = depth < 0 ? 0 : depth - m, c = max_length - m * length;           \
                if (c > filled - 1) c = filled - 1;                                           \
                double total = (double)m * value + (double)table[k * cols + c];               \
                if (total > best) best = total, best_m = m;                                   \
            }                                                                                 \
            anchor_value[r] = best, anchor_copies[r] = best_m;                                \
            anchor_item[r] = (int64_t)trace->count;                                           \
            if (skip[r]) continue;                                                            \
            for (int64_t part_power = 1, left = copies; left > 0; part_power *= 2) {          \
                int64_t part = left < part_power ? left : part_power;                         \
                left -= part;                                                                 \
                int64_t tokens = part * length, shift = depth < 0 ? 0 : part;                 \
                double exact = (double)part * value;                                          \
                T gain = (T)exact;                                                            \
                if ((double)gain < exact)                                                     \
                    gain = (T)(sizeof(T) == 4 ? (double)nextafterf((float)gain, INFINITY)     \
                                              : nextafter((double)gain, INFINITY));           \
                int64_t height = rows - shift, width = filled - tokens;                       \
                size_t bytes = (size_t)(height > 0 ? height : 0) * stride_of(width);          \
                if (trace_reserve(trace, bytes) < 0) {                                        \
                    free(table);                                                              \
                    PyErr_NoMemory();                                                         \
                    return -INFINITY;                                                         \
                }                                                                             \
                Item *item = &trace->items[trace->count++];                                   \
                item->row = r, item->tokens = tokens, item->shift = shift;                    \
                item->filled = filled, item->width = width, item->mask = trace->used;         \
                if (height > 0 && width > 0)                                                  \
                    APPLY(table, cols, height, shift, tokens, width, gain,                    \
                          trace->bits + trace->used, vectors);                                \
                trace->used += bytes;                                                         \
            }                                                                                 \
        }                                                                                     \
        int64_t corner_col = max_length < filled - 1 ? max_length : filled - 1;               \
        double corner = (double)table[(rows - 1) * cols + corner_col];                        \
        free(table);                                                                          \
        return corner;                                                                        \
    }
FORWARD(forward_f32, float, apply_f32)
FORWARD(forward_f64, double, apply_f64)

static int bit(const Trace *trace, const Item *item, int64_t k, int64_t c) {
    const uint8_t *bits = trace->bits + item->mask + (size_t)k * stride_of(item->width);
    return (bits[c >> 3] >> (c & 7)) & 1;
}

static PyObject *as_bytes(const void *data, size_t bytes) {
    return PyBytes_FromStringAndSize((const char *)data, (Py_ssize_t)bytes);
}

static int check_buffer(Py_buffer *view, Py_ssize_t n, Py_ssize_t itemsize, const char *name) {
    if (view->len != n * itemsize) {
        PyErr_Format(PyExc_ValueError, "%s must hold %zd items of %zd bytes", name, n, itemsize);
        return -1;
    }
    return 0;
}

static PyObject *price(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer lengths_view, usable_view, priced_view, skip_view;
    long long max_length, depth, max_candidates;
    int single;
    double threshold;
    PyObject *expired;
    int vectors = -1;
    if (!PyArg_ParseTuple(args, "y*y*y*y*LLpdLO|i", &lengths_view, &usable_view, &priced_view,
                          &skip_view, &max_length, &depth, &single, &threshold,
                          &max_candidates, &expired, &vectors))
        return NULL;
    int best = best_vectors();
    if (vectors < 0 || vectors > best) vectors = best;
    PyObject *result = NULL;
    Trace trace = {0};
    Py_ssize_t n = lengths_view.len / 8;
    double *anchor_value = NULL;
    int64_t *anchor_copies = NULL, *anchor_item = NULL, *out_rows = NULL, *out_counts = NULL,
            *offsets = NULL;
    Candidate *candidates = NULL;
    if (check_buffer(&lengths_view, n, 8, "lengths") || check_buffer(&usable_view, n, 8, "usable") ||
        check_buffer(&priced_view, n, 8, "priced") || check_buffer(&skip_view, n, 1, "skip"))
        goto done;
    if (n < 1 || max_length < 1) {
        PyErr_SetString(PyExc_ValueError, "price needs lengths and max_length >= 1");
        goto done;
    }
    const int64_t *lengths = lengths_view.buf, *usable = usable_view.buf;
    int64_t most = depth < 0 ? max_length / lengths[0] : depth;
    anchor_value = malloc((size_t)n * sizeof(double));
    anchor_copies = malloc((size_t)n * sizeof(int64_t));
    anchor_item = malloc((size_t)n * sizeof(int64_t));
    candidates = malloc((size_t)n * sizeof(Candidate));
    if (!anchor_value || !anchor_copies || !anchor_item || !candidates) {
        PyErr_NoMemory();
        goto done;
    }
    double corner = (single ? forward_f32 : forward_f64)(
        lengths, usable, priced_view.buf, skip_view.buf, n, max_length, depth, most, expired,
        &trace, anchor_value, anchor_copies, anchor_item, vectors);
    if (isnan(corner)) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    if (corner == -INFINITY && PyErr_Occurred()) goto done;

    Py_ssize_t chosen = 0;
    for (Py_ssize_t r = 0; r < n; r++)
        if (anchor_value[r] > threshold) candidates[chosen].value = anchor_value[r],
                                         candidates[chosen++].row = r;
    qsort(candidates, (size_t)chosen, sizeof(Candidate), by_value);
    if (chosen > max_candidates) chosen = max_candidates < 0 ? 0 : (Py_ssize_t)max_candidates;
    /* Backtracking: each pack holds at most `most` sequences, so at most `most + 1` entries. */
    size_t per = (size_t)(most < (int64_t)n ? most : (int64_t)n) + 1;
    out_rows = malloc(((size_t)chosen * per + 1) * sizeof(int64_t));
    out_counts = malloc(((size_t)chosen * per + 1) * sizeof(int64_t));
    offsets = malloc(((size_t)chosen + 1) * sizeof(int64_t));
    if (!out_rows || !out_counts || !offsets) {
        PyErr_NoMemory();
        goto done;
    }
    size_t used = 0;
    offsets[0] = 0;
    for (Py_ssize_t j = 0; j < chosen; j++) {
        /* Each pack walks back over the items (up to ~10**5 with 30,000 lengths), so the
         * budget is asked every 32 packs here too. */
        if (j % 32 == 31) {
            int stop = budget_ended(expired);
            if (stop < 0) goto done;
            if (stop) {
                result = Py_NewRef(Py_None);
                goto done;
            }
        }
        int64_t anchor = candidates[j].row, copies = anchor_copies[anchor];
        int64_t k = depth < 0 ? 0 : depth - copies, c = max_length - copies * lengths[anchor];
        size_t start = used;
        out_rows[used] = anchor, out_counts[used++] = copies; /* rows descend from here */
        for (int64_t t = anchor_item[anchor] - 1; t >= 0; t--) {
            const Item *item = &trace.items[t];
            if (c > item->filled - 1) c = item->filled - 1;
            if (c >= item->tokens && k >= item->shift &&
                bit(&trace, item, k - item->shift, c - item->tokens)) {
                int64_t part = item->tokens / lengths[item->row];
                if (out_rows[used - 1] == item->row)
                    out_counts[used - 1] += part; /* binary parts of one length add up */
                else
                    out_rows[used] = item->row, out_counts[used++] = part;
                c -= item->tokens, k -= item->shift;
            }
        }
        for (size_t a = start, b = used - 1; a < b; a++, b--) { /* rows ascending */
            int64_t row = out_rows[a], count = out_counts[a];
            out_rows[a] = out_rows[b], out_counts[a] = out_counts[b];
            out_rows[b] = row, out_counts[b] = count;
        }
        offsets[j + 1] = (int64_t)used;
    }
    result = Py_BuildValue("(dNNNN)", corner, as_bytes(anchor_value, (size_t)n * sizeof(double)),
                           as_bytes(out_rows, used * sizeof(int64_t)),
                           as_bytes(out_counts, used * sizeof(int64_t)),
                           as_bytes(offsets, ((size_t)chosen + 1) * sizeof(int64_t)));
done:
    free(trace.bits), free(trace.items), free(anchor_value), free(anchor_copies);
    free(anchor_item), free(candidates), free(out_rows), free(out_counts), free(offsets);
    PyBuffer_Release(&lengths_view), PyBuffer_Release(&usable_view);
    PyBuffer_Release(&priced_view), PyBuffer_Release(&skip_view);
    return result;
}

/* A binary min-heap of doubles (the k most valuable copies so far). */
static void sift_down(double *heap, int64_t size, int64_t i) {
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < size && heap[l] < heap[m]) m = l;
        if (r < size && heap[r] < heap[m]) m = r;
        if (m == i) return;
        double t = heap[i];
        heap[i] = heap[m], heap[m] = t, i = m;
    }
}

static void sift_up(double *heap, int64_t i) {
    while (i > 0 && heap[(i - 1) / 2] > heap[i]) {
        double t = heap[i];
        heap[i] = heap[(i - 1) / 2], heap[(i - 1) / 2] = t, i = (i - 1) / 2;
    }
}

static PyObject *dominated(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer copies_view, values_view;
    long long k;
    if (!PyArg_ParseTuple(args, "y*y*L", &copies_view, &values_view, &k)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = copies_view.len / 8;
    uint8_t *skip = NULL;
    double *heap = NULL;
    if (check_buffer(&copies_view, n, 8, "copies") || check_buffer(&values_view, n, 8, "values"))
        goto done;
    skip = calloc((size_t)n + 1, 1);
    heap = malloc(((size_t)(k > 0 ? k : 0) + 1) * sizeof(double));
    if (!skip || !heap) {
        PyErr_NoMemory();
        goto done;
    }
    const int64_t *copies = copies_view.buf;
    const double *values = values_view.buf;
    int64_t size = 0;
    for (Py_ssize_t r = 0; r < n; r++) {
        double value = values[r];
        skip[r] = size == k && size > 0 && heap[0] >= value;
        for (int64_t i = 0; i < copies[r]; i++) {
            if (size < k) {
                heap[size] = value;
                sift_up(heap, size++);
            } else if (size > 0 && value > heap[0]) {
                heap[0] = value;
                sift_down(heap, size, 0);
            } else {
                break;
            }
        }
    }
    result = as_bytes(skip, (size_t)n);
done:
    free(skip), free(heap);
    PyBuffer_Release(&copies_view), PyBuffer_Release(&values_view);
    return result;
}

/* ------------------------------------------------------- best fit decreasing */

typedef struct {
    int64_t key;   /* the index of its first pack among all packs opened */
    int64_t count; /* identical packs */
    int64_t space, depth;
    int64_t node; /* its contents: the last node of a chain (-1: empty) */
} Group;

typedef struct {
    int64_t parent, length, copies;
} Node;

typedef struct {
    int64_t *ids; /* group ids; in the zone sorted by key, descending (earliest last) */
    int64_t size, capacity;
} Bucket;

typedef struct {
    Group *groups;
    int64_t n_groups, groups_capacity;
    Node *nodes;
    int64_t n_nodes, nodes_capacity;
    Bucket *buckets; /* by free space, 0..max_length */
    int64_t *zone;   /* spaces of the zone's non-empty buckets, descending (least last) */
    int64_t zone_size;
    int64_t active, depth_limit;
} Fit;

static int grow(void **array, int64_t *capacity, int64_t need, size_t item) {
    if (need <= *capacity) return 0;
    int64_t capacity2 = *capacity ? *capacity : 64;
    while (capacity2 < need) capacity2 *= 2;
    void *bigger = realloc(*array, (size_t)capacity2 * item);
    if (!bigger) return -1;
    *array = bigger, *capacity = capacity2;
    return 0;
}

static int64_t new_node(Fit *fit, int64_t parent, int64_t length, int64_t copies) {
    if (copies == 0) return parent;
    if (grow((void **)&fit->nodes, &fit->nodes_capacity, fit->n_nodes + 1, sizeof(Node)) < 0)
        return -2;
    fit->nodes[fit->n_nodes] = (Node){parent, length, copies};
    return fit->n_nodes++;
}

static int bucket_push(Bucket *bucket, int64_t id) {
    if (grow((void **)&bucket->ids, &bucket->capacity, bucket->size + 1, sizeof(int64_t)) < 0)
        return -1;
    bucket->ids[bucket->size++] = id;
    return 0;
}

/* Into its sorted place: keys descending, so the earliest opened is last. */
static int bucket_insort(Fit *fit, Bucket *bucket, int64_t id) {
    if (bucket_push(bucket, id) < 0) return -1;
    int64_t key = fit->groups[id].key, lo = 0, hi = bucket->size - 1;
    while (lo < hi) { /* the first position whose key is below `key` */
        int64_t mid = (lo + hi) / 2;
        if (fit->groups[bucket->ids[mid]].key < key) hi = mid;
        else lo = mid + 1;
    }
    memmove(bucket->ids + lo + 1, bucket->ids + lo,
            (size_t)(bucket->size - 1 - lo) * sizeof(int64_t));
    bucket->ids[lo] = id;
    return 0;
}

static Fit *sort_fit; /* qsort has no context argument; set around each call */
static int by_key_descending(const void *a, const void *b) {
    int64_t x = sort_fit->groups[*(const int64_t *)a].key;
    int64_t y = sort_fit->groups[*(const int64_t *)b].key;
    return x > y ? -1 : (x < y);
}

/* Record group `id` (in its bucket if it can take more): `place` of the Python notes. */
static int place(Fit *fit, int64_t id) {
    Group *group = &fit->groups[id];
    if (group->space <= 0 || group->depth >= fit->depth_limit) return 0;
    Bucket *bucket = &fit->buckets[group->space];
    if (group->space < fit->active) return bucket_push(bucket, id); /* sorted later */
    if (bucket->size == 0) { /* a new non-empty bucket in the zone: keep spaces descending */
        int64_t space = group->space, lo = 0, hi = fit->zone_size;
        while (lo < hi) {
            int64_t mid = (lo + hi) / 2;
            if (fit->zone[mid] < space) hi = mid;
            else lo = mid + 1;
        }
        memmove(fit->zone + lo + 1, fit->zone + lo, (size_t)(fit->zone_size - lo) * sizeof(int64_t));
        fit->zone[lo] = space, fit->zone_size++;
    }
    return bucket_insort(fit, bucket, id);
}

static int64_t add_group(Fit *fit, int64_t key, int64_t count, int64_t space, int64_t depth,
                         int64_t node) {
    if (grow((void **)&fit->groups, &fit->groups_capacity, fit->n_groups + 1, sizeof(Group)) < 0)
        return -1;
    fit->groups[fit->n_groups] = (Group){key, count, space, depth, node};
    return fit->n_groups++;
}

static PyObject *best_fit_decreasing(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    long long max_length, depth_limit;
    if (!PyArg_ParseTuple(args, "y*LL", &view, &max_length, &depth_limit)) return NULL;
    PyObject *result = NULL, *strategies = NULL;
    Fit fit = {0};
    int64_t *order = NULL, *counts = NULL, *chain = NULL;
    if (max_length < 1 || depth_limit < 1 || check_buffer(&view, (Py_ssize_t)max_length, 8,
                                                          "histogram"))
        goto invalid;
    const int64_t *histogram = view.buf;
    fit.buckets = calloc((size_t)max_length + 1, sizeof(Bucket));
    fit.zone = malloc(((size_t)max_length + 1) * sizeof(int64_t));
    if (!fit.buckets || !fit.zone) goto memory;
    fit.active = max_length + 1, fit.depth_limit = depth_limit;
    int64_t opened = 0;
    for (int64_t length = max_length; length >= 1; length--) {
        int64_t left = histogram[length - 1];
        if (left == 0) continue;
        if (left < 0) {
            PyErr_SetString(PyExc_ValueError, "histogram counts must be >= 0");
            goto invalid;
        }
        for (int64_t space = fit.active - 1; space >= length; space--) { /* the zone grows */
            Bucket *bucket = &fit.buckets[space];
            if (bucket->size) {
                sort_fit = &fit;
                qsort(bucket->ids, (size_t)bucket->size, sizeof(int64_t), by_key_descending);
                fit.zone[fit.zone_size++] = space;
            }
        }
        fit.active = length;
        while (left && fit.zone_size) {
            int64_t space = fit.zone[fit.zone_size - 1]; /* the tightest fit */
            Bucket *bucket = &fit.buckets[space];
            int64_t id = bucket->ids[--bucket->size]; /* and in it the earliest opened */
            if (!bucket->size) fit.zone_size--;
            Group group = fit.groups[id];
            int64_t k = space / length;
            if (depth_limit - group.depth < k) k = depth_limit - group.depth;
            if (group.count <= left / k) { /* every pack takes k (no int64 overflow) */
                left -= group.count * k;
                int64_t node = new_node(&fit, group.node, length, k);
                if (node == -2) goto memory;
                Group *g = &fit.groups[id];
                g->space = space - k * length, g->depth = group.depth + k, g->node = node;
                if (place(&fit, id) < 0) goto memory;
                continue;
            }
            int64_t packs = left / k, rest = left % k; /* split: full / partial / untouched */
            int64_t numbers[3] = {packs, rest > 0, group.count - packs - (rest > 0)};
            int64_t taken[3] = {k, rest, 0};
            int64_t key = group.key, reuse = id;
            for (int piece = 0; piece < 3; piece++) {
                if (!numbers[piece]) continue;
                int64_t node = new_node(&fit, group.node, length, taken[piece]);
                if (node == -2) goto memory;
                int64_t space2 = space - taken[piece] * length, depth2 = group.depth + taken[piece];
                int64_t at = reuse;
                if (at >= 0) {
                    fit.groups[at] = (Group){key, numbers[piece], space2, depth2, node};
                    reuse = -1;
                } else if ((at = add_group(&fit, key, numbers[piece], space2, depth2, node)) < 0) {
                    goto memory;
                }
                if (place(&fit, at) < 0) goto memory;
                key += numbers[piece];
            }
            left = 0;
        }
        if (left) { /* fits nowhere: new packs, each with as many copies as fit */
            int64_t k = max_length / length < depth_limit ? max_length / length : depth_limit;
            int64_t numbers[2] = {left / k, left % k > 0}, taken[2] = {k, left % k};
            for (int piece = 0; piece < 2; piece++) {
                if (!numbers[piece]) continue;
                int64_t node = new_node(&fit, -1, length, taken[piece]);
                if (node == -2) goto memory;
                int64_t at = add_group(&fit, opened, numbers[piece],
                                       max_length - taken[piece] * length, taken[piece], node);
                if (at < 0 || place(&fit, at) < 0) goto memory;
                opened += numbers[piece];
            }
        }
    }
    /* Groups in opening order of their first pack; contents from their chains. */
    order = malloc(((size_t)fit.n_groups + 1) * sizeof(int64_t));
    counts = malloc(((size_t)fit.n_groups + 1) * sizeof(int64_t));
    /* A chain has a node per length in its packs: at most min(depth, max_length) nodes. */
    chain = malloc(((size_t)(depth_limit < max_length ? depth_limit : max_length) + 1) *
                   sizeof(int64_t));
    if (!order || !counts || !chain) goto memory;
    for (int64_t i = 0; i < fit.n_groups; i++) order[i] = i;
    sort_fit = &fit;
    qsort(order, (size_t)fit.n_groups, sizeof(int64_t), by_key_descending);
    strategies = PyList_New((Py_ssize_t)fit.n_groups);
    if (!strategies) goto done;
    for (int64_t i = 0; i < fit.n_groups; i++) {
        const Group *group = &fit.groups[order[fit.n_groups - 1 - i]]; /* keys ascending */
        counts[i] = group->count;
        int64_t links = 0, size = 0;
        for (int64_t node = group->node; node >= 0; node = fit.nodes[node].parent)
            chain[links++] = node, size += fit.nodes[node].copies;
        PyObject *strategy = PyTuple_New((Py_ssize_t)size);
        if (!strategy) goto done;
        PyList_SET_ITEM(strategies, (Py_ssize_t)i, strategy);
        Py_ssize_t at = 0;
        for (int64_t link = links - 1; link >= 0; link--) { /* the first lengths first */
            const Node *node = &fit.nodes[chain[link]];
            PyObject *length = PyLong_FromLongLong(node->length);
            if (!length) goto done;
            for (int64_t c = 0; c < node->copies; c++) {
                Py_INCREF(length);
                PyTuple_SET_ITEM(strategy, at++, length);
            }
            Py_DECREF(length);
        }
    }
    result = Py_BuildValue("(ON)", strategies, as_bytes(counts, (size_t)fit.n_groups * 8));
    goto done;
memory:
    PyErr_NoMemory();
    goto done;
invalid:
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "best_fit_decreasing: bad input");
done:
    Py_XDECREF(strategies);
    if (fit.buckets)
        for (int64_t s = 0; s <= max_length; s++) free(fit.buckets[s].ids);
    free(fit.buckets), free(fit.zone), free(fit.groups), free(fit.nodes);
    free(order), free(counts), free(chain);
    PyBuffer_Release(&view);
    return result;
}

/* ---------------------------------------------------------------- real packs */

/* The first index in sorted `values[0:n]` whose value is > `x` (bisect_right). */
static int64_t after(const int64_t *values, int64_t n, int64_t x) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (values[mid] <= x) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static int descending(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x > y ? -1 : (x < y);
}

static int ascending(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : (x > y);
}

static PyObject *real_packs(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *strategies, *packs = NULL, *result = NULL;
    Py_buffer counts_view, histogram_view, starts_view;
    if (!PyArg_ParseTuple(args, "O!y*y*y*", &PyList_Type, &strategies, &counts_view,
                          &histogram_view, &starts_view))
        return NULL;
    Py_ssize_t n_strategies = PyList_GET_SIZE(strategies);
    int64_t max_length = histogram_view.len / 8, groups = starts_view.len / 8;
    const int64_t *counts = counts_view.buf, *histogram = histogram_view.buf;
    const int64_t *starts = starts_view.buf;
    int64_t *group_of = NULL, *run_start = NULL, *run_length = NULL, *cum = NULL, *position = NULL;
    int64_t *run = NULL, *slot_group = NULL, *slot_count = NULL, *slot_of = NULL, *cuts = NULL;
    int64_t *pack = NULL;
    int64_t cuts_capacity = 0;
    if (check_buffer(&counts_view, n_strategies, 8, "counts")) goto done;
    if (groups < 1 || starts[0] != 1 || max_length < 1) {
        PyErr_SetString(PyExc_ValueError, "real_packs needs starts[0] == 1 and a histogram");
        goto done;
    }
    for (int64_t g = 1; g < groups; g++)
        if (starts[g] <= starts[g - 1] || starts[g] > max_length) {
            PyErr_SetString(PyExc_ValueError, "starts must ascend within 1..max_length");
            goto done;
        }
    group_of = malloc((size_t)max_length * sizeof(int64_t));
    run_start = malloc(((size_t)groups + 1) * sizeof(int64_t));
    run_length = malloc(((size_t)max_length + (size_t)groups) * sizeof(int64_t));
    cum = malloc(((size_t)max_length + 1) * sizeof(int64_t));
    position = calloc((size_t)groups, sizeof(int64_t));
    run = calloc((size_t)groups, sizeof(int64_t));
    slot_group = malloc((size_t)max_length * sizeof(int64_t));
    slot_count = malloc((size_t)max_length * sizeof(int64_t));
    slot_of = malloc((size_t)groups * sizeof(int64_t));
    pack = malloc((size_t)max_length * sizeof(int64_t));
    if (!group_of || !run_start || !run_length || !cum || !position || !run || !slot_group ||
        !slot_count || !slot_of || !pack)
        goto memory;
    /* Each group's stream: its lengths longest first (a run each, `cum` where each ends),
     * then 0s (slots nobody needs): group g's runs are [run_start[g], run_start[g + 1]),
     * and run_length holds one more entry a group, its 0. */
    int64_t runs = 0;
    for (int64_t g = 0; g < groups; g++) {
        int64_t first = starts[g], last = g + 1 < groups ? starts[g + 1] - 1 : max_length;
        run_start[g] = runs;
        int64_t total = 0;
        for (int64_t length = last; length >= first; length--) {
            group_of[length - 1] = g;
            if (histogram[length - 1] > 0) {
                total += histogram[length - 1];
                run_length[runs + g] = length, cum[runs++] = total;
            }
        }
        run_length[runs + g] = 0;
        slot_of[g] = -1;
    }
    run_start[groups] = runs;
    packs = PyDict_New();
    if (!packs) goto done;
    for (Py_ssize_t j = 0; j < n_strategies; j++) {
        PyObject *strategy = PyList_GET_ITEM(strategies, j);
        if (!PyTuple_Check(strategy)) {
            PyErr_SetString(PyExc_TypeError, "strategies must be tuples");
            goto done;
        }
        int64_t count = counts[j], n_slots = 0, size = PyTuple_GET_SIZE(strategy);
        if (size > max_length) {
            PyErr_SetString(PyExc_ValueError, "a strategy holds more slots than max_length");
            goto done;
        }
        for (int64_t i = 0; i < size; i++) { /* slots by group, in order of appearance */
            long long length = PyLong_AsLongLong(PyTuple_GET_ITEM(strategy, i));
            if (length == -1 && PyErr_Occurred()) goto done;
            if (length < 1 || length > max_length) {
                PyErr_SetString(PyExc_ValueError, "a strategy length is outside 1..max_length");
                goto done;
            }
            int64_t g = group_of[length - 1];
            if (slot_of[g] < 0) slot_of[g] = n_slots, slot_group[n_slots] = g,
                                slot_count[n_slots++] = 0;
            slot_count[slot_of[g]]++;
        }
        for (int64_t k = 0; k < n_slots; k++) slot_of[slot_group[k]] = -1;
        /* Cuts: where some stream changes run inside this strategy's part of it. */
        int64_t n_cuts = 0;
        if (grow((void **)&cuts, &cuts_capacity, 2, sizeof(int64_t)) < 0) goto memory;
        cuts[n_cuts++] = 0, cuts[n_cuts++] = count;
        for (int64_t k = 0; k < n_slots; k++) {
            int64_t g = slot_group[k], m = slot_count[k], begin = position[g], end;
            if (__builtin_mul_overflow(count, m, &end) || __builtin_add_overflow(end, begin, &end)) {
                PyErr_SetString(PyExc_OverflowError, "slots past int64");
                goto done;
            }
            const int64_t *c = cum + run_start[g];
            int64_t n_runs = run_start[g + 1] - run_start[g];
            for (int64_t r = after(c, n_runs, begin); r < n_runs && c[r] < end; r++) {
                if (grow((void **)&cuts, &cuts_capacity, n_cuts + 2, sizeof(int64_t)) < 0)
                    goto memory;
                int64_t q = (c[r] - begin) / m;
                cuts[n_cuts++] = q, cuts[n_cuts++] = q + 1;
            }
        }
        qsort(cuts, (size_t)n_cuts, sizeof(int64_t), ascending);
        int64_t kept = 0;
        for (int64_t i = 0; i < n_cuts; i++)
            if (cuts[i] <= count && (kept == 0 || cuts[i] != cuts[kept - 1])) cuts[kept++] = cuts[i];
        for (int64_t i = 0; i + 1 < kept; i++) {
            int64_t a = cuts[i], b = cuts[i + 1], size2 = 0;
            for (int64_t k = 0; k < n_slots; k++) {
                int64_t g = slot_group[k], m = slot_count[k], at = position[g] + a * m;
                const int64_t *c = cum + run_start[g], *lengths = run_length + run_start[g] + g;
                int64_t n_runs = run_start[g + 1] - run_start[g], first = run[g];
                while (first < n_runs && c[first] <= at) first++; /* `at` only grows */
                run[g] = first;
                if (m == 1 || first == n_runs || c[first] > at + m - 1) {
                    for (int64_t x = 0; x < m; x++) pack[size2++] = lengths[first];
                } else {
                    for (int64_t x = 0; x < m; x++) pack[size2++] = lengths[after(c, n_runs, at + x)];
                }
            }
            qsort(pack, (size_t)size2, sizeof(int64_t), descending);
            while (size2 && !pack[size2 - 1]) size2--; /* slots nobody needs */
            if (!size2) continue;
            PyObject *key = PyTuple_New((Py_ssize_t)size2);
            if (!key) goto done;
            for (int64_t x = 0; x < size2; x++) {
                PyObject *length = PyLong_FromLongLong(pack[x]);
                if (!length) {
                    Py_DECREF(key);
                    goto done;
                }
                PyTuple_SET_ITEM(key, (Py_ssize_t)x, length);
            }
            PyObject *old = PyDict_GetItemWithError(packs, key);
            long long before = 0;
            if (old) before = PyLong_AsLongLong(old);
            if ((old == NULL && PyErr_Occurred()) || (before == -1 && PyErr_Occurred())) {
                Py_DECREF(key);
                goto done;
            }
            PyObject *value = PyLong_FromLongLong(before + (b - a));
            int failed = !value || PyDict_SetItem(packs, key, value) < 0;
            Py_XDECREF(value);
            Py_DECREF(key);
            if (failed) goto done;
        }
        for (int64_t k = 0; k < n_slots; k++) position[slot_group[k]] += count * slot_count[k];
    }
    for (int64_t g = 0; g < groups; g++) {
        int64_t need = run_start[g + 1] > run_start[g] ? cum[run_start[g + 1] - 1] : 0;
        if (position[g] < need) {
            PyErr_SetString(PyExc_AssertionError,
                            "a plan for the rounded-up histogram misses sequences");
            goto done;
        }
    }
    result = Py_NewRef(packs);
    goto done;
memory:
    PyErr_NoMemory();
done:
    Py_XDECREF(packs);
    free(group_of), free(run_start), free(run_length), free(cum), free(position), free(run);
    free(slot_group), free(slot_count), free(slot_of), free(cuts), free(pack);
    PyBuffer_Release(&counts_view), PyBuffer_Release(&histogram_view);
    PyBuffer_Release(&starts_view);
    return result;
}

/* ------------------------------------------------------------ dot-product fill */

/* The pairs left, two ways: longest[r * (Le + 1) + e] names a target d <= r, widest[r *
 * (Ld + 1) + d] an input e <= r, where cell (e, d) had pairs (0: none); a cell emptied since
 * stays named until a lookup passes it (`longest_left`, `widest_left`) and sets the entry to
 * the next cell with pairs (deletions only: the entries are union-find parents). One room's
 * entries lie side by side, for the scans. */
typedef struct {
    int64_t max_input, max_target;
    const uint8_t *any; /* whether (e, d) has pairs left, at e * (Ld + 1) + d */
    int32_t *longest, *widest;
} Left;

/* The longest target d <= r with pairs (e, d) left (0: none). */
static int64_t longest_left(const Left *t, int64_t e, int64_t r) {
    int64_t se = t->max_input + 1, sd = t->max_target + 1, d = t->longest[r * se + e];
    while (d && !t->any[e * sd + d]) d = t->longest[(d - 1) * se + e];
    for (int64_t at = r, next; (next = t->longest[at * se + e]) != d; at = next - 1)
        t->longest[at * se + e] = (int32_t)d; /* compress the path walked */
    return d;
}

/* The longest input e <= r with pairs (e, d) left (0: none). */
static int64_t widest_left(const Left *t, int64_t d, int64_t r) {
    int64_t sd = t->max_target + 1, e = t->widest[r * sd + d];
    while (e && !t->any[e * sd + d]) e = t->widest[(e - 1) * sd + d];
    for (int64_t at = r, next; (next = t->widest[at * sd + d]) != e; at = next - 1)
        t->widest[at * sd + d] = (int32_t)e;
    return e;
}

/* The pair of most dot product with the room (re, rd) in `*e`, `*d` (ties: the longer
 * input, then the longer target); 0 when none fits. Rows of inputs x from re down and
 * columns of targets y from rd down, each row's (column's) best pair: past them every pair
 * left has e <= x and d <= y, so the scan ends where x * wa + y * wb cannot beat the best,
 * or a side runs out. Each step lowers the side that, alone, would end it in fewer steps. */
static int best_pair(const Left *t, int64_t re, int64_t rd, int64_t *e, int64_t *d) {
    /* Doubles: the products pass int64 past limits of 2^16 (exact below 2^53). */
    double wa = (double)re * (double)t->max_target * (double)t->max_target;
    double wb = (double)rd * (double)t->max_input * (double)t->max_input, best = -1.0;
    int64_t be = 0, bd = 0, x = re, y = rd;
    while (x >= 1 && y >= 1) {
        double reach = (double)x * wa + (double)y * wb;
        if (reach < best || (reach == best && x <= be)) break;
        int64_t fx = x, fy = y;
        /* Steps each side needs, alone, to end the scan: to beat the best, or to run out. */
        double gap = reach - (best > 0.0 ? best : 0.0), need_x = gap / wa, need_y = gap / wb;
        if ((need_x < (double)x ? need_x : (double)x) <= (need_y < (double)y ? need_y : (double)y))
            fy = longest_left(t, x--, y);
        else fx = widest_left(t, y--, x);
        double score = (double)fx * wa + (double)fy * wb;
        if (fx && fy && (score > best || (score == best && (fx > be || (fx == be && fy > bd)))))
            best = score, be = fx, bd = fy;
    }
    *e = be, *d = bd;
    return be > 0;
}

/* A pack's first pick, where every pair fits: the largest share of a limit first (as first fit
 * decreasing orders: 1e6 balanced pairs at 512/128, K=16: 246,915 packs; by the dot product
 * with the full room, e / Le + d / Ld, 248,056), then the larger sum, then the longer input. */
typedef struct {
    int64_t most, sum, e, d; /* max(e * Ld, d * Le), e * Ld + d * Le */
} First;

static int largest_share(const void *p, const void *q) {
    const First *x = p, *y = q;
    if (x->most != y->most) return x->most > y->most ? -1 : 1;
    if (x->sum != y->sum) return x->sum > y->sum ? -1 : 1;
    return x->e > y->e ? -1 : (x->e < y->e);
}

static PyObject *dot_fill(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer counts_view;
    long long max_input, max_target, depth;
    int aimed;
    if (!PyArg_ParseTuple(args, "y*LLLp", &counts_view, &max_input, &max_target, &depth, &aimed)) return NULL;
    PyObject *result = NULL;
    int64_t *left = NULL, *pack = NULL, *pa = NULL, *pb = NULL, *picks = NULL;
    First *first = NULL;
    Left t = {max_input, max_target, NULL, NULL, NULL};
    uint8_t *any = NULL;
    int64_t width = max_target + 1, total = 0, places = depth < 0 ? max_input : depth;
    if (max_input < 1 || max_target < 1 || places < 1 ||
        check_buffer(&counts_view, (Py_ssize_t)(max_input * max_target), 8, "counts"))
        goto done;
    const int64_t *counts = counts_view.buf;
    left = malloc((size_t)((max_input + 1) * width) * sizeof(int64_t));
    t.longest = malloc((size_t)((max_input + 1) * width) * sizeof(int32_t));
    t.widest = calloc((size_t)((max_input + 1) * width), sizeof(int32_t));
    picks = malloc((size_t)places * 2 * sizeof(int64_t));
    any = malloc((size_t)((max_input + 1) * width));
    if (!left || !t.longest || !t.widest || !picks || !any) goto memory;
    t.any = any;
    for (int64_t x = 0; x <= max_input; x++) {
        int32_t longest = 0;
        for (int64_t y = 0; y <= max_target; y++) {
            int64_t c = x && y ? counts[(x - 1) * max_target + y - 1] : 0;
            if (c < 0) {
                PyErr_SetString(PyExc_ValueError, "counts must not be negative");
                goto done;
            }
            left[x * width + y] = c, any[x * width + y] = c > 0, total += c;
            if (c) longest = (int32_t)y;
            t.longest[y * (max_input + 1) + x] = longest;
            t.widest[x * width + y] = c ? (int32_t)x : x ? t.widest[(x - 1) * width + y] : 0;
        }
    }
    /* A pack's first pick: the next cell with pairs left in `first` (`First`). */
    int64_t cells = 0, at = 0;
    for (int64_t c = 0; c < max_input * max_target; c++) cells += counts[c] > 0;
    first = malloc((size_t)(cells ? cells : 1) * sizeof(First));
    if (!first) goto memory;
    for (int64_t x = 1; x <= max_input; x++)
        for (int64_t y = 1; y <= max_target; y++)
            if (any[x * width + y]) {
                int64_t a = x * max_target, b = y * max_input;
                first[at++] = (First){a > b ? a : b, a + b, x, y};
            }
    qsort(first, (size_t)cells, sizeof(First), largest_share);
    at = 0;
    pack = malloc((size_t)(total ? total : 1) * sizeof(int64_t));
    pa = malloc((size_t)(total ? total : 1) * sizeof(int64_t));
    pb = malloc((size_t)(total ? total : 1) * sizeof(int64_t));
    if (!pack || !pa || !pb) goto memory;
    int64_t packs = 0, placed = 0;
    while (placed < total) {
        int64_t re = max_input, rd = max_target, k = 0, e = 0, d = 0;
        while (!any[first[at].e * width + first[at].d]) at++;
        e = first[at].e, d = first[at].d;
        for (int64_t s = places; k < places; s--) {
            if (k && !(aimed && s > 1 && best_pair(&t, re / s, rd / s, &e, &d)) && !best_pair(&t, re, rd, &e, &d))
                break;
            picks[2 * k] = e, picks[2 * k + 1] = d, k++, re -= e, rd -= d;
            if (--left[e * width + d] == 0) any[e * width + d] = 0;
        }
        /* Repeats: each cell picked m times must hold m more pairs a repeat. */
        int64_t repeats = INT64_MAX;
        for (int64_t j = 0; j < k; j++) {
            int64_t m = 0, cell = picks[2 * j] * width + picks[2 * j + 1];
            for (int64_t i = 0; i < k; i++) m += picks[2 * i] * width + picks[2 * i + 1] == cell;
            if (left[cell] / m < repeats) repeats = left[cell] / m;
        }
        repeats += 1;
        for (int64_t j = 0; j < k; j++) {
            int64_t cell = picks[2 * j] * width + picks[2 * j + 1];
            if ((left[cell] -= repeats - 1) == 0) any[cell] = 0;
        }
        for (int64_t r = 0; r < repeats; r++, packs++)
            for (int64_t j = 0; j < k; j++, placed++)
                pack[placed] = packs, pa[placed] = picks[2 * j], pb[placed] = picks[2 * j + 1];
    }
    result = Py_BuildValue("(NNNL)", as_bytes(pack, (size_t)total * 8), as_bytes(pa, (size_t)total * 8),
                           as_bytes(pb, (size_t)total * 8), (long long)packs);
    goto done;
memory:
    PyErr_NoMemory();
done:
    free(left), free(any), free(first), free(t.longest), free(t.widest), free(picks), free(pack), free(pa), free(pb);
    PyBuffer_Release(&counts_view);
    return result;
}

/* ------------------------------------------------------------------ settle */

/* Pairs' slots for `settle`: entry r < n is pair r, its slot its pack's room with r taken out;
 * entry n + j is pack j's own room (a place left). Each cell (re, rd) of the table holds a
 * doubly linked list of entries; each row a bit set of its cells that hold any. */
typedef struct {
    int64_t width, words, n, *head, *next, *prev, *cell, leaves, *tree; /* tree: rows' longest cells */
    uint64_t *bits;
    int64_t below; /* only pairs of size under this take slots (INT64_MAX: all) */
    const int64_t *size;
    /* The index by column (`by_column`), in place of `bits` and `tree`: column y's rows that hold
     * entries at y, a bit each in `column[y * rows + x / 64]`, and its words that hold any, a bit
     * each in `top[y * tops + x / 4096]`. NULL: the rows' index. */
    uint64_t *column, *top;
    int64_t rows, tops;
} Slots;

/* Row x's longest cell with entries (-1: none) into the tree of maxima over rows. */
static void row_changed(Slots *s, int64_t x) {
    int64_t longest = -1;
    for (int64_t w = s->words - 1; w >= 0 && longest < 0; w--)
        if (s->bits[x * s->words + w]) longest = w * 64 + 63 - __builtin_clzll(s->bits[x * s->words + w]);
    int64_t i = x + s->leaves;
    for (s->tree[i] = longest, i /= 2; i; i /= 2)
        s->tree[i] = s->tree[2 * i] > s->tree[2 * i + 1] ? s->tree[2 * i] : s->tree[2 * i + 1];
}

/* The first row from x on with an entry at a cell of d or more, or -1. */
static int64_t next_row(const Slots *s, int64_t x, int64_t d) {
    int64_t i = x + s->leaves;
    if (x >= s->leaves) return -1;
    if (s->tree[i] >= d) return x;
    for (; i > 1; i /= 2)
        if (!(i & 1) && s->tree[i + 1] >= d) {
            for (i++; i < s->leaves;) i = s->tree[2 * i] >= d ? 2 * i : 2 * i + 1;
            return i - s->leaves;
        }
    return -1;
}

static void slot_out(Slots *s, int64_t x) {
    int64_t c = s->cell[x];
    if (c < 0) return;
    if (s->prev[x] >= 0) s->next[s->prev[x]] = s->next[x];
    else s->head[c] = s->next[x];
    if (s->next[x] >= 0) s->prev[s->next[x]] = s->prev[x];
    if (s->head[c] < 0) {
        int64_t re = c / s->width, rd = c % s->width;
        if (s->column) {
            uint64_t *word = s->column + rd * s->rows + re / 64;
            if (!(*word &= ~(1ULL << (re % 64)))) s->top[rd * s->tops + re / 4096] &= ~(1ULL << (re / 64 % 64));
        } else {
            s->bits[re * s->words + rd / 64] &= ~(1ULL << (rd % 64));
            if (s->tree[re + s->leaves] == rd) row_changed(s, re);
        }
    }
    s->cell[x] = -1;
}

static void slot_in(Slots *s, int64_t x, int64_t re, int64_t rd) {
    int64_t c = re * s->width + rd;
    s->prev[x] = -1, s->next[x] = s->head[c], s->cell[x] = c;
    if (s->head[c] >= 0) s->prev[s->head[c]] = x;
    s->head[c] = x;
    if (s->column) {
        s->column[rd * s->rows + re / 64] |= 1ULL << (re % 64);
        s->top[rd * s->tops + re / 4096] |= 1ULL << (re / 64 % 64);
        return;
    }
    s->bits[re * s->words + rd / 64] |= 1ULL << (rd % 64);
    if (s->tree[re + s->leaves] < rd) row_changed(s, re);
}

/* The first row from x on (x <= rows * 64) with an entry at column y, or -1 (the index by column). */
static int64_t next_in_column(const Slots *s, int64_t y, int64_t x) {
    const uint64_t *column = s->column + y * s->rows, *top = s->top + y * s->tops;
    int64_t w = x / 64;
    if (w < s->rows) {
        uint64_t word = column[w] & (~0ULL << (x % 64));
        if (word) return w * 64 + __builtin_ctzll(word);
        w++;
    }
    for (int64_t t = w / 64; t < s->tops; t++) {
        uint64_t word = top[t] & (t == w / 64 ? ~0ULL << (w % 64) : ~0ULL);
        if (word) {
            w = t * 64 + __builtin_ctzll(word);
            return w * 64 + __builtin_ctzll(column[w]);
        }
    }
    return -1;
}

typedef struct {
    int64_t le, ld, places, *a, *b, *pack, *re, *rd, *k, *mhead, *mnext, *mprev;
} Packs;

/* Pack j's entries again after its room changed. */
static void reslot(Slots *s, Packs *p, int64_t j) {
    /* A full pack's pairs fill their slots: none is smaller than a pair that fits there. */
    int full = p->re[j] == 0 && p->rd[j] == 0;
    for (int64_t r = p->mhead[j]; r >= 0; r = p->mnext[r]) {
        slot_out(s, r);
        if (!full && s->size[r] < s->below) slot_in(s, r, p->re[j] + p->a[r], p->rd[j] + p->b[r]);
    }
    slot_out(s, s->n + j);
    if (p->k[j] < p->places && p->re[j] > 0 && p->rd[j] > 0) slot_in(s, s->n + j, p->re[j], p->rd[j]);
}

static void member_in(Packs *p, int64_t r, int64_t j) {
    p->pack[r] = j, p->mprev[r] = -1, p->mnext[r] = p->mhead[j];
    if (p->mhead[j] >= 0) p->mprev[p->mhead[j]] = r;
    p->mhead[j] = r, p->re[j] -= p->a[r], p->rd[j] -= p->b[r], p->k[j]++;
}

static void member_out(Packs *p, int64_t r) {
    int64_t j = p->pack[r];
    if (p->mprev[r] >= 0) p->mnext[p->mprev[r]] = p->mnext[r];
    else p->mhead[j] = p->mnext[r];
    if (p->mnext[r] >= 0) p->mprev[p->mnext[r]] = p->mprev[r];
    p->pack[r] = -1, p->re[j] += p->a[r], p->rd[j] += p->b[r], p->k[j]--;
}

/* Pack j dissolved: marked dead, its room whole again (its pairs go to the heap). */
static void dissolved(Packs *p, int64_t *dead, int64_t j) {
    dead[j] = 1, p->re[j] = p->le, p->rd[j] = p->ld, p->k[j] = 0;
}

/* Cell c's first entry that a pair of `size` can take: a pack's own room, or the slot of a smaller
 * pair; -1 where none (the cell is empty then). The slots before it are dropped: the sizes placed
 * never grow (a pair pushed out is smaller than the one placed), so a slot whose pair is not
 * smaller than this one is of no use again. */
static int64_t first_usable(Slots *s, int64_t c, int64_t size) {
    int64_t q = s->head[c];
    while (q >= 0 && q < s->n && s->size[q] >= size) {
        int64_t after = s->next[q];
        slot_out(s, q);
        q = after;
    }
    return q;
}

/* The entry of least slot (re' * Ld + rd' * Le) with re' >= e, rd' >= d whose pair is smaller
 * than `size` (a pack's own room always qualifies), or -1. Slots of pairs not smaller that it
 * passes are dropped from the table (`first_usable`). */
#ifndef LOOKED
/* Cells looked at a query (1e6 balanced pairs at 512/128, one pass at 5%: 256 cells 646 packs
 * saved in 0.09 s, as many as 4096; before the slots of larger pairs were dropped when passed,
 * 256 cells 427 packs in 0.16 s, 512 601 in 0.25 s, 1024 623 in 0.65 s). */
#define LOOKED 256
#endif
static int64_t tightest(Slots *s, Packs *p, int64_t e, int64_t d, int64_t size) {
    int64_t best = INT64_MAX, found = -1, looked = 0;
    for (int64_t x = next_row(s, e, d); x >= 0 && x * p->ld + d * p->le < best; x = next_row(s, x + 1, d)) {
        const uint64_t *row = s->bits + x * s->words;
        for (int64_t w = d / 64; w < s->words; w++) {
            uint64_t word = row[w] & (w == d / 64 ? ~0ULL << (d % 64) : ~0ULL);
            while (word) {
                int64_t y = w * 64 + __builtin_ctzll(word);
                word &= word - 1;
                if (x * p->ld + y * p->le >= best) goto next_row;
                if (++looked > LOOKED) return found;
                int64_t q = first_usable(s, x * s->width + y, size);
                if (q >= 0) {
                    best = x * p->ld + y * p->le, found = q;
                    goto next_row;
                }
                looked--; /* the cell is empty now: not counted */
            }
        }
    next_row:;
    }
    return found;
}

/* `tightest` on the index by column, without caps: the entry of least (slot, re') among all
 * (`model_pass` of tests/packing/test_pair_settle.py). Column by column from d, each from its first
 * row at e or more, while the column can still hold a tighter slot. `tightest` finds the same
 * where the target room takes up to 256 values: it counts only the cells that improve on the
 * best so far, each in a lower column than the last. */
static int64_t tightest_by_column(Slots *s, Packs *p, int64_t e, int64_t d, int64_t size) {
    int64_t best = INT64_MAX, row = INT64_MAX, found = -1;
    for (int64_t y = d; y < s->width && (e * p->ld + y * p->le < best ||
                                         (e * p->ld + y * p->le == best && e < row)); y++) {
        for (int64_t x = next_in_column(s, y, e); x >= 0; x = next_in_column(s, y, x + 1)) {
            int64_t slot = x * p->ld + y * p->le;
            if (slot > best || (slot == best && x >= row)) break;
            int64_t q = first_usable(s, x * s->width + y, size);
            if (q >= 0) {
                best = slot, row = x, found = q;
                break;
            }
        }
    }
    return found;
}

/* Reorders the n distinct keys so that the m least come first, in any order (quickselect). */
static void least_first(int64_t *keys, int64_t n, int64_t m) {
    int64_t lo = 0, hi = n - 1;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2, a = keys[lo], b = keys[mid], c = keys[hi];
        int64_t pivot = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (keys[i] < pivot) i++;
            while (keys[j] > pivot) j--;
            if (i <= j) {
                int64_t t = keys[i]; keys[i] = keys[j], keys[j] = t, i++, j--;
            }
        }
        if (m - 1 <= j) hi = j;
        else if (m - 1 >= i) lo = i;
        else break;
    }
}

/* The calling thread's CPU seconds (the clock of tfpack/packing/algorithms/_budget.py). */
static double thread_seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

/* settle(pack, a, b, packs, max_input, max_target, depth, dissolve, most_moves[, seconds[, by_column[, sample]]]) -> pack
 *   The pass of tfpack/packing/pairs/_settle.py's module notes: the `dissolve` packs of least
 *   e * Ld + d * Le empty, and `sample` more spread evenly over the ids (where the least
 *   filled hold no short pairs, the sample's bring them); their pairs, largest first, go where
 *   they fit tightest, into a pack's room or in place of a smaller pair (which joins them).
 *   pack: bytes of int64, -1 where a pair found no place. */
static PyObject *settle(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer pv, av, bv;
    long long packs, le, ld, depth, dissolve, most_moves, sample = 0;
    double seconds = 0.0;
    int by_column = 0;
    if (!PyArg_ParseTuple(args, "y*y*y*LLLLLL|dpL", &pv, &av, &bv, &packs, &le, &ld, &depth, &dissolve, &most_moves,
                          &seconds, &by_column, &sample))
        return NULL;
    double deadline = seconds > 0 ? thread_seconds() + seconds : INFINITY;
    PyObject *result = NULL;
    Py_ssize_t n = pv.len / 8;
    int64_t *mem = NULL, *heap = NULL, *order = NULL;
    uint64_t *bits = NULL, *column = NULL;
    Slots s = {ld + 1, (ld + 1 + 63) / 64, (int64_t)n, NULL, NULL, NULL, NULL, 1, NULL, NULL, INT64_MAX, NULL,
               NULL, NULL, (le + 1 + 63) / 64, (le + 1 + 4095) / 4096};
    while (s.leaves < le + 1) s.leaves *= 2;
    if (le < 1 || ld < 1 || packs < 0 || check_buffer(&pv, n, 8, "pack") || check_buffer(&av, n, 8, "a") ||
        check_buffer(&bv, n, 8, "b"))
        goto done;
    int64_t cells = (le + 1) * (ld + 1), entries = n + packs;
    mem = large((size_t)(cells + 4 * entries + 7 * n + 5 * packs + 2 * s.leaves + 1) * sizeof(int64_t));
    if (by_column) { /* one index or the other */
        column = calloc((size_t)(s.width * (s.rows + s.tops)), sizeof(uint64_t));
        s.column = column, s.top = column ? column + s.width * s.rows : NULL;
    } else {
        bits = calloc((size_t)((le + 1) * s.words), sizeof(uint64_t));
    }
    heap = large((size_t)(n + 1) * sizeof(int64_t));
    order = malloc((size_t)(packs + 1) * sizeof(int64_t));
    if (!mem || !(by_column ? column : bits) || !heap || !order) {
        PyErr_NoMemory();
        goto done;
    }
    s.bits = bits, s.head = mem, s.next = mem + cells, s.prev = s.next + entries, s.cell = s.prev + entries;
    Packs p = {le, ld, depth < 0 ? INT64_MAX : depth, s.cell + entries, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    p.b = p.a + n, p.pack = p.b + n, p.mnext = p.pack + n, p.mprev = p.mnext + n;
    int64_t *use = p.mprev + n, *size = use + n;
    s.size = size;
    p.re = size + n, p.rd = p.re + packs, p.k = p.rd + packs, p.mhead = p.k + packs;
    int64_t *dead = p.mhead + packs;
    s.tree = dead + packs;
    for (int64_t i = 0; i < 2 * s.leaves; i++) s.tree[i] = -1;
    memcpy(p.a, av.buf, (size_t)n * 8), memcpy(p.b, bv.buf, (size_t)n * 8);
    const int64_t *given = pv.buf;
    for (int64_t c = 0; c < cells; c++) s.head[c] = -1;
    for (int64_t x = 0; x < entries; x++) s.cell[x] = -1;
    for (int64_t j = 0; j < packs; j++) p.re[j] = le, p.rd[j] = ld, p.k[j] = 0, p.mhead[j] = -1, dead[j] = 0, use[j] = 0;
    for (Py_ssize_t r = 0; r < n; r++) {
        if (given[r] < 0 || given[r] >= packs || p.a[r] < 1 || p.b[r] < 1 || p.a[r] > le || p.b[r] > ld) {
            PyErr_SetString(PyExc_ValueError, "settle: a pair out of range");
            goto done;
        }
        int64_t j = given[r];
        size[r] = p.a[r] * ld + p.b[r] * le, use[j] += size[r], p.re[j] -= p.a[r], p.rd[j] -= p.b[r], p.k[j]++;
    }
    /* The `dissolve` packs of least use (ties: the first), keyed use * packs + id, in any order
     * (the heap orders their pairs). */
    for (int64_t j = 0; j < packs; j++) order[j] = use[j] * packs + j;
    if (dissolve < packs) least_first(order, packs, dissolve);
    for (int64_t i = 0; i < dissolve && i < packs; i++) dissolved(&p, dead, order[i] % packs);
    if (sample > packs) sample = packs; /* (all of them) */
    for (int64_t i = 0; i < sample; i++) /* (2i + 1) packs / (2 sample): distinct ids */
        dissolved(&p, dead, (2 * i + 1) * (int64_t)packs / (2 * (int64_t)sample));
    /* Members listed only where a pack can change: a full pack takes no pair and gives none
     * (its pairs fill their slots), so its pairs keep their pack unlisted. */
    int64_t count = 0;
    for (Py_ssize_t r = 0; r < n; r++) {
        int64_t j = given[r];
        p.pack[r] = j;
        if (dead[j]) {
            /* push r on the max-heap by (size, -id) */
            int64_t at = count++;
            p.pack[r] = -1, heap[at] = r;
            while (at && (size[heap[(at - 1) / 2]] < size[heap[at]] ||
                          (size[heap[(at - 1) / 2]] == size[heap[at]] && heap[(at - 1) / 2] > heap[at]))) {
                int64_t t = heap[at]; heap[at] = heap[(at - 1) / 2], heap[(at - 1) / 2] = t, at = (at - 1) / 2;
            }
        } else if (p.re[j] || p.rd[j]) {
            p.mprev[r] = -1, p.mnext[r] = p.mhead[j];
            if (p.mhead[j] >= 0) p.mprev[p.mhead[j]] = r;
            p.mhead[j] = r;
        }
    }
    for (int64_t j = 0; j < packs; j++)
        if (!dead[j] && (p.re[j] || p.rd[j])) reslot(&s, &p, j);
    for (int64_t moves = 0; count && moves < most_moves; moves++) {
        if (!(moves & 1023) && deadline < INFINITY && thread_seconds() > deadline) break;
        int64_t r = heap[0], at = 0;
        heap[0] = heap[--count];
        for (;;) { /* sift down */
            int64_t l = 2 * at + 1, m = at;
            for (int64_t c = l; c <= l + 1 && c < count; c++)
                if (size[heap[c]] > size[heap[m]] || (size[heap[c]] == size[heap[m]] && heap[c] < heap[m])) m = c;
            if (m == at) break;
            int64_t t = heap[at]; heap[at] = heap[m], heap[m] = t, at = m;
        }
        s.below = size[r]; /* pairs placed from here on are no larger: smaller pairs' slots only */
        int64_t x = by_column ? tightest_by_column(&s, &p, p.a[r], p.b[r], size[r])
                              : tightest(&s, &p, p.a[r], p.b[r], size[r]);
        if (x < 0) continue; /* stays out: pack -1 */
        int64_t j = x >= s.n ? x - s.n : p.pack[x];
        if (x < s.n) {
            member_out(&p, x);
            slot_out(&s, x);
            at = count++;
            heap[at] = x;
            while (at && (size[heap[(at - 1) / 2]] < size[heap[at]] ||
                          (size[heap[(at - 1) / 2]] == size[heap[at]] && heap[(at - 1) / 2] > heap[at]))) {
                int64_t t = heap[at]; heap[at] = heap[(at - 1) / 2], heap[(at - 1) / 2] = t, at = (at - 1) / 2;
            }
        }
        member_in(&p, r, j);
        reslot(&s, &p, j);
    }
    result = as_bytes(p.pack, (size_t)n * 8);
done:
    free(mem), free(bits), free(column), free(heap), free(order);
    PyBuffer_Release(&pv), PyBuffer_Release(&av), PyBuffer_Release(&bv);
    return result;
}

/* ------------------------------------------------------------ pair plan check */

/* 0 where `pair` is a tuple of two exact ints in 1..le x 1..ld (stored in *a, *b), else -1. */
static int pair_of(PyObject *pair, long long le, long long ld, long long *a, long long *b) {
    if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) return -1;
    PyObject *x = PyTuple_GET_ITEM(pair, 0), *y = PyTuple_GET_ITEM(pair, 1);
    if (!PyLong_CheckExact(x) || !PyLong_CheckExact(y)) return -1;
    int over_a = 0, over_b = 0;
    *a = PyLong_AsLongLongAndOverflow(x, &over_a), *b = PyLong_AsLongLongAndOverflow(y, &over_b);
    if (over_a || over_b || *a < 1 || *a > le || *b < 1 || *b > ld) return -1;
    return 0;
}

/* 0 where strategy `s` keeps invariants 1-3 (its slots added to `slots`, `count` each), else -1. */
static int strategy_slots(PyObject *s, long long le, long long ld, long long depth, int64_t count,
                          int64_t *slots) {
    PyObject *fast = PySequence_Fast(s, "");
    if (!fast) {
        PyErr_Clear();
        return -1;
    }
    Py_ssize_t size = PySequence_Fast_GET_SIZE(fast);
    PyObject **pairs = PySequence_Fast_ITEMS(fast);
    long long sum_a = 0, sum_b = 0, a = 0, b = 0, last_a = 0, last_b = 0;
    int broken = size < 1 || (depth >= 0 && size > depth);
    for (Py_ssize_t k = 0; k < size && !broken; k++) {
        if (pair_of(pairs[k], le, ld, &a, &b) || (k && (a > last_a || (a == last_a && b > last_b)))) broken = 1;
        sum_a += a, sum_b += b, last_a = a, last_b = b;
    }
    broken = broken || sum_a > le || sum_b > ld;
    for (Py_ssize_t k = 0; k < size && !broken; k++) {
        pair_of(pairs[k], le, ld, &a, &b);
        slots[(a - 1) * ld + (b - 1)] += count;
    }
    Py_DECREF(fast);
    return broken ? -1 : 0;
}

static PyObject *pair_slots(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *strategies;
    Py_buffer cv;
    long long le, ld, depth;
    if (!PyArg_ParseTuple(args, "Oy*LLL", &strategies, &cv, &le, &ld, &depth)) return NULL;
    PyObject *result = NULL, *fast = PySequence_Fast(strategies, "pair_slots: strategies must be a sequence");
    int64_t *slots = NULL;
    if (!fast) goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    if (le < 1 || ld < 1 || check_buffer(&cv, n, 8, "counts")) goto done;
    slots = calloc((size_t)(le * ld), sizeof(int64_t));
    if (!slots) {
        PyErr_NoMemory();
        goto done;
    }
    const int64_t *counts = cv.buf;
    for (Py_ssize_t i = 0; i < n; i++)
        if (strategy_slots(PySequence_Fast_GET_ITEM(fast, i), le, ld, depth, counts[i], slots)) {
            result = Py_BuildValue("nO", i, Py_None);
            goto done;
        }
    PyObject *bytes = as_bytes(slots, (size_t)(le * ld) * sizeof(int64_t));
    if (bytes) result = Py_BuildValue("nN", (Py_ssize_t)-1, bytes);
done:
    free(slots);
    Py_XDECREF(fast);
    PyBuffer_Release(&cv);
    return result;
}

/* The tuple (a, b) of `code` (see pair_strategies), one per code, kept in `cache`: new reference. */
static PyObject *pair_tuple(PyObject **cache, int64_t code, long long ld) {
    if (!cache[code]) {
        PyObject *pair = PyTuple_New(2), *a = PyLong_FromLongLong((code - 1) / ld + 1);
        PyObject *b = PyLong_FromLongLong((code - 1) % ld + 1);
        if (!pair || !a || !b) {
            Py_XDECREF(pair), Py_XDECREF(a), Py_XDECREF(b);
            return NULL;
        }
        PyTuple_SET_ITEM(pair, 0, a), PyTuple_SET_ITEM(pair, 1, b);
        PyObject_GC_UnTrack(pair); /* two ints: no cycle (CPython untracks such tuples lazily) */
        cache[code] = pair;
    }
    Py_INCREF(cache[code]);
    return cache[code];
}

static PyObject *pair_strategies(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer cv;
    Py_ssize_t rows, depth;
    long long ld;
    if (!PyArg_ParseTuple(args, "y*nnL", &cv, &rows, &depth, &ld)) return NULL;
    PyObject *list = NULL, **cache = NULL;
    int64_t most = 0;
    if (rows < 0 || depth < 1 || ld < 1 || check_buffer(&cv, rows * depth, 8, "codes")) goto done;
    const int64_t *codes = cv.buf;
    for (Py_ssize_t x = 0; x < rows * depth; x++) {
        if (codes[x] < 1) {
            PyErr_SetString(PyExc_ValueError, "pair_strategies: codes must be positive");
            goto done;
        }
        most = codes[x] > most ? codes[x] : most;
    }
    cache = calloc((size_t)most + 1, sizeof(PyObject *));
    list = cache ? PyList_New(rows) : PyErr_NoMemory();
    for (Py_ssize_t i = 0; list && i < rows; i++) {
        PyObject *strategy = PyTuple_New(depth);
        if (!strategy) goto fail;
        PyList_SET_ITEM(list, i, strategy);
        for (Py_ssize_t k = 0; k < depth; k++) {
            PyObject *pair = pair_tuple(cache, codes[i * depth + k], ld);
            if (!pair) goto fail;
            PyTuple_SET_ITEM(strategy, k, pair);
        }
        PyObject_GC_UnTrack(strategy); /* untracked tuples only: no cycle */
    }
    goto done;
fail:
    Py_CLEAR(list);
done:
    if (cache)
        for (int64_t c = 0; c <= most; c++) Py_XDECREF(cache[c]);
    free(cache);
    PyBuffer_Release(&cv);
    return list;
}

/* Distinct keys ascending: quicksort (median of three, the smaller side first), insertion below 16. */
static void sort_keys(uint64_t *x, int64_t n) {
    while (n > 16) {
        uint64_t a = x[0], b = x[n / 2], c = x[n - 1];
        uint64_t pivot = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        int64_t i = 0, j = n - 1;
        while (i <= j) {
            while (x[i] < pivot) i++;
            while (x[j] > pivot) j--;
            if (i <= j) {
                uint64_t t = x[i]; x[i] = x[j], x[j] = t, i++, j--;
            }
        }
        if (j + 1 < n - i) sort_keys(x, j + 1), x += i, n -= i;
        else sort_keys(x + i, n - i), n = j + 1;
    }
    for (int64_t i = 1; i < n; i++) {
        uint64_t v = x[i];
        int64_t j = i;
        for (; j > 0 && x[j - 1] > v; j--) x[j] = x[j - 1];
        x[j] = v;
    }
}

/* Row `row`'s pairs (input `length`, targets longest first) into its slots sorted[lo:hi] (their
 * packs, ascending), rank by rank, each rank's packs by load (ties: the lower id, as a key
 * load * 2^shift + position); appended at out[*placed]. */
/* keys[0..m) := the positions pos[0..m) (ascending) ordered by load[pack[pos]] (ties: position):
 * a counting sort where the loads span at most 2m + 256 values (`bucket` holds that many + 1),
 * else a sort of keys load * 2^shift + position. */
static void by_load(const int64_t *pos, int64_t m, const int64_t *pack, const int64_t *load, int shift,
                    uint64_t *keys, int64_t *bucket) {
    int64_t least = INT64_MAX, most = INT64_MIN;
    for (int64_t y = 0; y < m; y++) {
        int64_t l = load[pack[pos[y]]];
        least = l < least ? l : least, most = l > most ? l : most;
    }
    if (m && most - least <= 2 * m + 256) {
        memset(bucket, 0, (size_t)(most - least + 2) * sizeof(int64_t));
        for (int64_t y = 0; y < m; y++) bucket[load[pack[pos[y]]] - least + 1]++;
        for (int64_t v = 0; v <= most - least; v++) bucket[v + 1] += bucket[v];
        for (int64_t y = 0; y < m; y++) keys[bucket[load[pack[pos[y]]] - least]++] = (uint64_t)pos[y];
        return;
    }
    for (int64_t y = 0; y < m; y++) keys[y] = ((uint64_t)load[pack[pos[y]]] << shift) | (uint64_t)pos[y];
    sort_keys(keys, m);
    for (int64_t y = 0; y < m; y++) keys[y] &= ((uint64_t)1 << shift) - 1;
}

static void assign_row(const int64_t *row, int64_t cols, int64_t length, const int64_t *sorted, const int64_t *rank,
                       int64_t lo, int64_t hi, int64_t *load, uint64_t *keys, int64_t *by_rank, int64_t *ends,
                       int64_t *bucket, int shift, int64_t *out[3], int64_t *placed) {
    int64_t total = 0, most = -1, done = 0, col = cols - 1;
    for (int64_t j = 0; j < cols; j++) total += row[j];
    for (int64_t x = lo; x < hi; x++) most = rank[x] > most ? rank[x] : most;
    /* The row's slots by rank (stable: packs ascending within one): rank r at ends[r - 1]..ends[r]. */
    for (int64_t r = 0; r <= most + 1; r++) ends[r] = 0;
    for (int64_t x = lo; x < hi; x++) ends[rank[x] + 1]++;
    for (int64_t r = 0; r <= most; r++) ends[r + 1] += ends[r];
    for (int64_t x = lo; x < hi; x++) by_rank[ends[rank[x]]++] = x - lo;
    int64_t left = total ? row[col] : 0;
    for (int64_t r = 0; r <= most && done < total; r++) {
        int64_t first = r ? ends[r - 1] : 0, m = ends[r] - first;
        by_load(by_rank + first, m, sorted + lo, load, shift, keys, bucket);
        if (m > total - done) m = total - done;
        for (int64_t i = 0; i < m; i++, done++, (*placed)++) {
            while (!left) left = row[--col];
            left--;
            int64_t pack = sorted[lo + (int64_t)keys[i]];
            load[pack] += col + 1;
            out[0][*placed] = pack, out[1][*placed] = length, out[2][*placed] = col + 1;
        }
    }
}

static PyObject *template_assign(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer pv, lv, cv, ov;
    long long packs;
    if (!PyArg_ParseTuple(args, "y*y*y*y*L", &pv, &lv, &cv, &ov, &packs)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t slots = pv.len / 8, rows = ov.len / 8, cols = rows ? cv.len / 8 / rows : 0;
    const int64_t *slot_pack = pv.buf, *slot_length = lv.buf, *counts = cv.buf, *order = ov.buf;
    int64_t *mem = NULL, *out[3] = {NULL, NULL, NULL}, n = 0, placed = 0;
    uint64_t *buf = NULL;
    if (packs < 0 || check_buffer(&lv, slots, 8, "slot_length") || check_buffer(&cv, rows * cols, 8, "counts"))
        goto done;
    for (Py_ssize_t x = 0; x < rows * cols; x++) n += counts[x];
    mem = malloc((size_t)(4 * slots + 2 * (rows + 2) + packs + 2) * sizeof(int64_t));
    buf = malloc((size_t)(3 * slots + 259) * sizeof(uint64_t)); /* keys, then by_load's buckets */
    for (int k = 0; k < 3; k++) out[k] = malloc((size_t)(n + 1) * sizeof(int64_t));
    if (!mem || !buf || !out[0] || !out[1] || !out[2]) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t *sorted = mem, *rank = sorted + slots, *start = rank + slots, *next = start + rows + 2;
    int64_t *load = next + rows + 2, *by_rank = load + packs, *ends = by_rank + slots; /* ends: ranks + 2 */
    memset(start, 0, (size_t)(rows + 2) * sizeof(int64_t)), memset(load, 0, (size_t)packs * sizeof(int64_t));
    for (Py_ssize_t x = 0; x < slots; x++) {
        if (slot_length[x] < 1 || slot_length[x] > rows || slot_pack[x] < 0 || slot_pack[x] >= packs ||
            (x && slot_pack[x] < slot_pack[x - 1])) {
            PyErr_SetString(PyExc_ValueError, "template_assign: slots out of range or packs not in order");
            goto done;
        }
        start[slot_length[x]]++; /* then summed: row i's slots at start[i]..start[i + 1] */
    }
    for (Py_ssize_t i = 0; i < rows; i++) start[i + 1] += start[i];
    /* Slots by length (stable: packs ascending within one), each's rank among its pack's slots of it. */
    memcpy(next, start, (size_t)(rows + 1) * sizeof(int64_t));
    for (Py_ssize_t x = 0; x < slots; x++) sorted[next[slot_length[x] - 1]++] = slot_pack[x];
    /* Keys of load * 2^shift + position: shift bits for the most slots of a length, the rest for
     * loads, at most cols times the most slots of a pack (under Le * Ld <= 2^24 in a plan). */
    int shift = 1, run = 1, longest = 1;
    for (Py_ssize_t i = 0; i < rows; i++) {
        while (((int64_t)1 << shift) < start[i + 1] - start[i]) shift++;
        for (int64_t x = start[i]; x < start[i + 1]; x++)
            rank[x] = x > start[i] && sorted[x] == sorted[x - 1] ? rank[x - 1] + 1 : 0;
    }
    for (Py_ssize_t x = 1; x < slots; x++) {
        run = slot_pack[x] == slot_pack[x - 1] ? run + 1 : 1;
        longest = run > longest ? run : longest;
    }
    if (shift > 40 || (double)cols * (double)longest >= ldexp(1.0, 63 - shift)) {
        PyErr_SetString(PyExc_ValueError, "template_assign: too many slots for 64-bit keys");
        goto done;
    }
    for (Py_ssize_t k = 0; k < rows; k++) {
        int64_t i = order[k];
        if (i < 0 || i >= rows) {
            PyErr_SetString(PyExc_ValueError, "template_assign: order out of range");
            goto done;
        }
        assign_row(counts + i * cols, cols, i + 1, sorted, rank, start[i], start[i + 1], load, buf, by_rank, ends,
                   (int64_t *)(buf + slots + 1), shift, out, &placed);
    }
    result = Py_BuildValue("NNN", as_bytes(out[0], (size_t)placed * 8), as_bytes(out[1], (size_t)placed * 8),
                           as_bytes(out[2], (size_t)placed * 8));
done:
    free(mem), free(buf), free(out[0]), free(out[1]), free(out[2]);
    PyBuffer_Release(&pv), PyBuffer_Release(&lv), PyBuffer_Release(&cv), PyBuffer_Release(&ov);
    return result;
}

static PyObject *template_fit(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer pv, bv;
    long long max_target, packs;
    if (!PyArg_ParseTuple(args, "y*y*LL", &pv, &bv, &max_target, &packs)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = pv.len / 8;
    const int64_t *pack = pv.buf, *b = bv.buf;
    int64_t *start = NULL, *rows = NULL, *load = NULL;
    uint64_t *keys = NULL;
    uint8_t *keep = NULL;
    if (packs < 0 || check_buffer(&bv, n, 8, "b")) goto done;
    keys = malloc((size_t)(n + 1) * sizeof(uint64_t));
    start = calloc((size_t)packs + 2, sizeof(int64_t)), load = calloc((size_t)packs + 1, sizeof(int64_t));
    rows = malloc((size_t)(n + 1) * sizeof(int64_t)), keep = malloc((size_t)n + 1);
    if (!start || !rows || !load || !keep || !keys) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t r = 0; r < n; r++) {
        if (pack[r] < 0 || pack[r] >= packs || b[r] < 0 || b[r] >= ((int64_t)1 << 24) || r >= ((int64_t)1 << 39)) {
            PyErr_SetString(PyExc_ValueError, "template_fit: a pack or target out of range");
            goto done;
        }
        start[pack[r] + 2]++, load[pack[r]] += b[r], keep[r] = 1;
    }
    for (int64_t j = 0; j < packs; j++) start[j + 2] += start[j + 1];
    for (Py_ssize_t r = 0; r < n; r++) rows[start[pack[r] + 1]++] = r; /* start[j]..start[j + 1]: pack j's rows */
    for (int64_t j = 0; j < packs; j++) {
        int64_t lo = start[j], hi = start[j + 1];
        if (load[j] <= max_target) continue;
        /* By target, then row: keys b * 2^39 + row (targets under 2^24, rows under 2^39). */
        for (int64_t x = lo; x < hi; x++) keys[x - lo] = ((uint64_t)b[rows[x]] << 39) | (uint64_t)rows[x];
        sort_keys(keys, hi - lo);
        for (int64_t x = lo; x < hi; x++) rows[x] = (int64_t)(keys[x - lo] & (((uint64_t)1 << 39) - 1));
        while (load[j] > max_target) {
            int64_t excess = load[j] - max_target, given = -1;
            for (int64_t x = lo; x < hi && given < 0; x++)
                if (keep[rows[x]] && b[rows[x]] >= excess) given = rows[x];
            for (int64_t x = hi - 1; x >= lo && given < 0; x--)
                if (keep[rows[x]]) given = rows[x];
            keep[given] = 0, load[j] -= b[given];
        }
    }
    result = as_bytes(keep, (size_t)n);
done:
    free(start), free(rows), free(load), free(keep), free(keys);
    PyBuffer_Release(&pv), PyBuffer_Release(&bv);
    return result;
}

/* ------------------------------------------------------------- the spread fill */

/* The largest length y <= x with counts[y] > 0, or 0 (counts[0] is never taken): `link`
 * points each emptied length below it, halved as it is followed. */
static int64_t fill_find(int64_t *link, const int64_t *counts, int64_t x) {
    while (x > 0 && counts[x] == 0) {
        int64_t below = link[x];
        link[x] = below > 0 ? link[below] : 0;
        x = below;
    }
    return x;
}

static void fill_take(int64_t *link, int64_t *counts, int64_t x) {
    if (--counts[x] == 0) link[x] = x - 1;
}

/* numpy's float floor division (npy_divmod) for a >= 0, b > 0: the slot targets. */
static int64_t floor_divide(double a, double b) {
    double mod = fmod(a, b), div = (a - mod) / b, floordiv;
    if (div == 0.0) return 0;
    floordiv = floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
    return (int64_t)floordiv;
}

static PyObject *spread_fill(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer cv, rv;
    long long max_length, depth, batch;
    double scale;
    PyObject *expired;
    if (!PyArg_ParseTuple(args, "w*LLLdy*O", &cv, &max_length, &depth, &batch, &scale, &rv, &expired))
        return NULL;
    PyObject *result = NULL;
    int64_t *counts = cv.buf, *link = NULL, *rows = NULL, *opener = NULL, *used = NULL, *free_ = NULL;
    const int64_t *reopened = rv.buf;
    uint64_t *keys = NULL;
    int64_t capacity = 0, n_rows = 0;
    int64_t n_reopened = depth > 0 ? (int64_t)(rv.len / 8) / depth : 0;
    if (max_length < 1 || depth < 1 || batch < 1 || cv.len != (max_length + 1) * 8 ||
        rv.len != n_reopened * depth * 8) {
        PyErr_SetString(PyExc_ValueError, "spread_fill: counts must be int64 [max_length + 1], "
                                          "reopened int64 [rows, depth], depth and batch positive");
        goto done;
    }
    link = malloc((size_t)(max_length + 1) * sizeof(int64_t));
    opener = malloc((size_t)batch * sizeof(int64_t));
    used = malloc((size_t)batch * sizeof(int64_t)), free_ = malloc((size_t)batch * sizeof(int64_t));
    keys = malloc((size_t)batch * sizeof(uint64_t));
    if (!link || !opener || !used || !free_ || !keys) {
        PyErr_NoMemory();
        goto done;
    }
    /* The reopened packs (rows descending, packs by tokens descending, stable) arrive so from
     * the caller; their totals and sizes summed from the back for the packs still to place. */
    int64_t tokens = 0, left = 0, rest_tokens = 0, rest_sizes = 0;
    for (int64_t x = 0; x <= max_length; x++) {
        if (counts[x] < 0) {
            PyErr_SetString(PyExc_ValueError, "spread_fill: a negative count");
            goto done;
        }
        link[x] = x > 0 && counts[x] == 0 ? x - 1 : x;
        tokens += x * counts[x], left += counts[x];
    }
    for (int64_t r = 0; r < n_reopened * depth; r++) {
        rest_tokens += reopened[r], rest_sizes += reopened[r] > 0;
    }
    int64_t done_ = 0;
    while (left > 0 || done_ < n_reopened) {
        int ended = budget_ended(expired);
        if (ended) {
            if (ended > 0) result = Py_NewRef(Py_None);
            goto done;
        }
        int64_t by_tokens = (tokens + rest_tokens + max_length - 1) / max_length;
        int64_t by_depth = (left + rest_sizes + depth - 1) / depth;
        int64_t opened = by_tokens > by_depth ? by_tokens : by_depth;
        opened = opened < batch ? opened : batch;
        int64_t singles = opened < left ? opened : left, m = n_reopened - done_;
        m = m < opened ? m : opened;
        /* The longest `singles` sequences, longest first (not taken yet). */
        int64_t x = fill_find(link, counts, max_length), have = 0;
        while (have < singles) {
            int64_t copies = counts[x] < singles - have ? counts[x] : singles - have;
            for (int64_t c = 0; c < copies; c++) opener[have++] = x;
            x = fill_find(link, counts, x - 1);
        }
        /* The `opened` longest of them and of the next reopened packs (ties: the single). */
        int64_t k = 0, again = 0;
        while (k + again < opened && (k < singles || again < m)) {
            const int64_t *next = reopened + (done_ + again) * depth;
            int64_t total = 0;
            if (again < m)
                for (int64_t s = 0; s < depth; s++) total += next[s];
            if (again >= m || (k < singles && opener[k] >= total)) k++;
            else again++;
        }
        int64_t packs = k + again;
        if (n_rows + packs > capacity) {
            int64_t grown = capacity ? 2 * capacity : 1024;
            while (grown < n_rows + packs) grown *= 2;
            int64_t *more = realloc(rows, (size_t)(grown * depth) * sizeof(int64_t));
            if (!more) {
                PyErr_NoMemory();
                goto done;
            }
            rows = more, capacity = grown;
        }
        int64_t *pack = rows + n_rows * depth;
        memset(pack, 0, (size_t)(packs * depth) * sizeof(int64_t));
        for (int64_t t = 0; t < k; t++) { /* the singles ascending, as numpy's order left them */
            int64_t length = opener[k - 1 - t];
            pack[t * depth] = length, used[t] = 1, free_[t] = max_length - length;
            fill_take(link, counts, length), tokens -= length, left--;
        }
        for (int64_t t = k; t < packs; t++) {
            const int64_t *from = reopened + (done_ + t - k) * depth;
            used[t] = 0, free_[t] = max_length;
            for (int64_t s = 0; s < depth; s++) {
                pack[t * depth + s] = from[s], free_[t] -= from[s], used[t] += from[s] > 0;
                rest_tokens -= from[s], rest_sizes -= from[s] > 0;
            }
        }
        done_ += again;
        int shift = 1;
        while (((int64_t)1 << shift) <= packs) shift++;
        for (int64_t round = 1; round < depth; round++) {
            int64_t open = 0;
            for (int64_t t = 0; t < packs; t++) {
                if (used[t] >= depth) continue;
                int64_t slots = depth - used[t];
                int64_t target = slots > 1 ? floor_divide((double)free_[t] * scale, (double)slots) : free_[t];
                target = target < 0 ? 0 : (target > max_length ? max_length : target);
                keys[open++] = ((uint64_t)target << shift) | (uint64_t)t;
            }
            sort_keys(keys, open);
            /* Each target, the largest first (ties: the later pack), takes the longest left at
             * most it: what `_longest_at_most` gives the ascending targets at once. */
            for (int64_t j = open - 1; j >= 0; j--) {
                int64_t t = (int64_t)(keys[j] & (((uint64_t)1 << shift) - 1));
                int64_t target = (int64_t)(keys[j] >> shift);
                int64_t taken = fill_find(link, counts, target);
                if (taken > 0) fill_take(link, counts, taken), tokens -= taken, left--;
                pack[t * depth + used[t]] = taken, free_[t] -= taken, used[t]++;
            }
        }
        n_rows += packs;
    }
    result = as_bytes(rows ? (const void *)rows : (const void *)"", (size_t)(n_rows * depth) * sizeof(int64_t));
done:
    free(link), free(rows), free(opener), free(used), free(free_), free(keys);
    PyBuffer_Release(&cv), PyBuffer_Release(&rv);
    return result;
}

/* ------------------------------------------------------------- exact fill */

#define FILL_MOST 16 /* sequences a full pack holds at most here (the caller's depth is 8) */

typedef struct {
    int64_t *count; /* count[n]: sequences of length n left, n in 0..L + 1 */
    int64_t length, shortest, longest, asked;
    PyObject *expired;
    int64_t *records; /* FILL_MOST lengths (descending, 0-padded) and a count, per record */
    int64_t used, capacity;
    int stop; /* 1: the budget ended, -1: an exception is set */
} Exact;

/* The budget asked every 64 checks (the Python greedy asked at every one). */
static int exact_check(Exact *f) {
    if (f->stop) return 1;
    if (++f->asked % 64 == 0) {
        int stop = budget_ended(f->expired);
        if (stop) f->stop = stop < 0 ? -1 : 1;
    }
    return f->stop != 0;
}

static void exact_take(Exact *f, int64_t length, int64_t number) { f->count[length] -= number; }

static void exact_put_back(Exact *f, int64_t length, int64_t number) {
    f->count[length] += number;
    if (length < f->shortest) f->shortest = length;
    if (length > f->longest) f->longest = length;
}

static void exact_record(Exact *f, const int64_t *pack, int size, int64_t number) {
    if (f->stop) return;
    if (f->used == f->capacity &&
        grow((void **)&f->records, &f->capacity, f->used + 1, (FILL_MOST + 1) * sizeof(int64_t))) {
        f->stop = -1;
        PyErr_NoMemory();
        return;
    }
    int64_t *row = f->records + f->used++ * (FILL_MOST + 1);
    memset(row, 0, (FILL_MOST + 1) * sizeof(int64_t));
    memcpy(row, pack, (size_t)size * sizeof(int64_t));
    qsort(row, (size_t)size, sizeof(int64_t), descending);
    row[FILL_MOST] = number;
}

static int64_t exact_lowest(Exact *f) {
    int64_t b = f->shortest;
    while (b <= f->length && !f->count[b]) b++;
    return f->shortest = b;
}

static int64_t exact_highest(Exact *f) {
    int64_t b = f->longest;
    while (b > 0 && !f->count[b]) b--;
    return f->longest = b;
}

/* The shortest available length below `space` leaving a space `slots` sequences between the
 * shortest and longest could fill (0 if none; 0 too when the budget ended). */
static int64_t exact_joiner(Exact *f, int64_t space, int64_t slots) {
    if (exact_check(f)) return 0;
    int64_t longest = exact_highest(f), lowest = exact_lowest(f);
    if (!longest) return 0;
    int64_t b = space - slots * longest;
    for (b = b > lowest ? b : lowest; b < space; b++) {
        int64_t left = space - b;
        if (f->count[b] && (left + longest - 1) / longest * lowest <= left) return b;
    }
    return 0;
}

static int64_t exact_pairs(Exact *f, int64_t *pack, int size, int64_t space, int64_t number) {
    int64_t lowest = exact_lowest(f), half = space / 2 - lowest + 1;
    for (int64_t b = lowest; b < lowest + half && number; b++) {
        int64_t other = space - b, *count = f->count;
        if (!count[b] || !count[other]) continue;
        int64_t can = b == other ? count[b] / 2 : (count[b] < count[other] ? count[b] : count[other]);
        int64_t done = number < can ? number : can;
        if (!done) continue;
        exact_take(f, b, done), exact_take(f, other, done);
        pack[size] = b, pack[size + 1] = other;
        exact_record(f, pack, size + 2, done);
        number -= done;
    }
    return number;
}

/* Fill `number` copies of pack[0:size] to exactly `space` more tokens with at most `slots`
 * sequences; returns the copies not completed (their sequences past the pack back). */
static int64_t exact_complete(Exact *f, int64_t *pack, int size, int64_t space, int64_t slots,
                             int64_t number) {
    if (!space) {
        exact_record(f, pack, size, number);
        return 0;
    }
    if (!slots) return number;
    int64_t *count = f->count;
    if (space <= f->length && count[space]) { /* one sequence fills it */
        int64_t done = number < count[space] ? number : count[space];
        exact_take(f, space, done);
        pack[size] = space;
        exact_record(f, pack, size + 1, done);
        number -= done;
    }
    if (!number || slots == 1) return number;
    if (slots == 2) return exact_pairs(f, pack, size, space, number);
    while (number) {
        int64_t b = exact_joiner(f, space, slots - 1);
        if (!b) break;
        int64_t joined = number < count[b] ? number : count[b];
        exact_take(f, b, joined);
        pack[size] = b;
        int64_t failed = exact_complete(f, pack, size + 1, space - b, slots - 1, joined);
        exact_put_back(f, b, failed);
        number -= joined - failed;
        if (failed || f->stop) break; /* the next lengths would fail the same way, mostly */
    }
    return number;
}

static PyObject *exact_fill(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    long long depth, most_tokens, most_lengths;
    PyObject *expired, *result = NULL;
    if (!PyArg_ParseTuple(args, "y*LLLO", &view, &depth, &most_tokens, &most_lengths, &expired))
        return NULL;
    int64_t length = (int64_t)(view.len / 8);
    Exact f = {0};
    int64_t *rest = calloc((size_t)length + 1, sizeof(int64_t));
    f.count = calloc((size_t)length + 2, sizeof(int64_t));
    if (!rest || !f.count) {
        PyErr_NoMemory();
        goto done;
    }
    if (depth < 1 || depth > FILL_MOST || length < 1) {
        PyErr_Format(PyExc_ValueError, "exact_fill needs 1 <= depth <= %d and lengths", FILL_MOST);
        goto done;
    }
    memcpy(f.count + 1, view.buf, (size_t)length * sizeof(int64_t));
    f.length = length, f.shortest = 1, f.longest = length, f.expired = expired;
    int64_t pack[FILL_MOST + 2], tokens_left = 0, lengths_left = 0;
    int too_much = 0;
    for (int64_t opener = length; opener >= 1 && !too_much; opener--) {
        int64_t number = f.count[opener];
        if (!number) continue;
        if (exact_check(&f)) break;
        exact_take(&f, opener, number);
        pack[0] = opener;
        int64_t left = exact_complete(&f, pack, 1, length - opener, depth - 1, number);
        if (f.stop) break;
        if (left) {
            rest[opener] += left;
            tokens_left += left * opener, lengths_left += 1;
            too_much = tokens_left > most_tokens || lengths_left > most_lengths;
        }
    }
    if (f.stop < 0) goto done;
    if (f.stop) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    for (int64_t n = 1; n <= length; n++) rest[n] += f.count[n];
    result = Py_BuildValue("(iiNN)", too_much, FILL_MOST + 1,
                           as_bytes(f.records, (size_t)f.used * (FILL_MOST + 1) * sizeof(int64_t)),
                           as_bytes(rest + 1, (size_t)length * sizeof(int64_t)));
done:
    free(rest), free(f.count), free(f.records);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *vectors(PyObject *self, PyObject *args) {
    (void)self, (void)args;
    return PyLong_FromLong(best_vectors());
}

static PyMethodDef methods[] = {
    {"price", price, METH_VARARGS, "The pricing knapsack of `optimal` (see the source)."},
    {"vectors", vectors, METH_NOARGS, "The pricing table's vector loops here: 0 none, 1 SSE2, 2 AVX2."},
    {"exact_fill", exact_fill, METH_VARARGS, "Full packs by the exact fill's greedy (see the source)."},
    {"dominated", dominated, METH_VARARGS, "Lengths no best pack needs (see the source)."},
    {"real_packs", real_packs, METH_VARARGS,
     "Real lengths in the slots of a plan on groups rounded up (see the source)."},
    {"best_fit_decreasing", best_fit_decreasing, METH_VARARGS,
     "Best fit decreasing on groups of packs (see the source)."},
    {"dot_fill", dot_fill, METH_VARARGS, "The dot-product fill of two-length pairs (see the source)."},
    {"settle", settle, METH_VARARGS, "Packs dissolved and their pairs placed in the others' room (see the source)."},
    {"pair_strategies", pair_strategies, METH_VARARGS, "Strategies of pairs built from their codes (see the source)."},
    {"template_assign", template_assign, METH_VARARGS, "Pairs into the slots of a one-length plan (see the source)."},
    {"template_fit", template_fit, METH_VARARGS, "Which pairs stay where templates overflowed (see the source)."},
    {"spread_fill", spread_fill, METH_VARARGS, "One pass of the spread fill (see the source)."},
    {"pair_slots", pair_slots, METH_VARARGS, "A two-length plan's strategies checked, their slots counted (see the source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kernels",
                                    "The `optimal` planner's compiled kernels.", -1, methods};

PyMODINIT_FUNC PyInit__kernels(void) { return PyModule_Create(&module); }
