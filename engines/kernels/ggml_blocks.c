/* Skinny products over GGUF tensors as the file stores them (engines/kernels/ggml_blocks.py):
 *
 *   y[m, n] = sum_k x[m, k] * ŵ[n, k]        x fp32 [M, K], y fp32 [M, N]
 *
 * W is a GGUF tensor's raw bytes: N rows, each K / QK blocks of BYTES bytes in ggml's layout
 * (llama.cpp's ggml-common.h; `gguf.quants` in Python is the reference the tests hold us to).
 * ŵ is the block's weights dequantized to fp32 (d · q, d · q + m, or the K-quants' two-level
 * scales; in registers, or a 4 KB buffer in L1) and multiplied by the fp32 activations: x is
 * never quantized, so y is `gguf.quants.dequantize(W) @ x.T` up to fp32 rounding (the opt-in
 * path at the end of this file, il_ggml_matmul_q8, quantizes x as llama.cpp does). The decoded
 * weights equal gguf's bit for bit: d · s · u is exact in fp32 (at most 22 significant bits;
 * Q6_K rounds (d · s) · q once, as gguf does), so only the one addition of m rounds.
 *
 *   type  ggml id  QK   BYTES  a block
 *   Q4_0     2     32    18    d fp16, 16 bytes of nibbles           ŵ = d (u - 8)
 *   Q4_1     3     32    20    d, m fp16, 16 bytes of nibbles        ŵ = d u + m
 *   Q5_0     6     32    22    d fp16, 32 high bits, nibbles         ŵ = d (u - 16)
 *   Q5_1     7     32    24    d, m fp16, 32 high bits, nibbles      ŵ = d u + m
 *   Q8_0     8     32    34    d fp16, 32 int8                       ŵ = d q
 *   Q4_K    12    256   144    d, dmin fp16, 12 bytes of 6-bit scales and mins for 8
 *                              sub-blocks of 32, 128 bytes of nibbles ŵ = d s_j u - dmin m_j
 *   Q5_K    13    256   176    Q4_K plus 32 bytes of fifth bits
 *   Q6_K    14    256   210    128 bytes low nibbles, 64 bytes high 2-bit pairs, 16 int8
 *                              scales (one per 16 weights), d fp16  ŵ = d s_j (q - 32)
 *
 * In the 32-weight blocks, byte j holds weight j (low nibble) and weight j + 16 (high), and the
 * fifth bit of weight j is bit j of the little-endian uint32. In Q4_K / Q5_K, 32 bytes hold
 * sub-blocks 2c (low nibbles) and 2c + 1 (high); the fifth bit of sub-block s is bit s of
 * qh[l]. Q6_K's 256 weights are two halves of 128, each four runs of 32 (see dec_q6_K).
 *
 * How the work goes: output rows are taken GB_NR at a time (a tile, one OpenMP task).
 *
 *   up to GB_REG_ROWS (4) input rows, the decode shapes: each 32 weights of a tile row are
 *     decoded straight into registers (reg_*: on AVX-512 a 4- or 5-bit code indexes a table of
 *     its 16 or 32 decoded values, one vpermps per 16 weights; a K-quant block's sub-block
 *     scales are formed once per block, 16 at once) and multiplied by the 1-4 rows of x;
 *   more rows: a tile's rows are decoded GB_CHUNK weights at a time into a small fp32 buffer
 *     in L1, and that chunk is multiplied by every input row (IL_MR rows of accumulators in
 *     registers at a time) before the next chunk is decoded, so each block is decoded once
 *     per call for up to GB_MAX_ROWS input rows. More rows run in groups of GB_MAX_ROWS, each
 *     decoding again (the Python side sends large batches to dequantize-then-matmul instead).
 *
 * Both ways multiply the same decoded weights in the same order (one accumulator per input
 * row and weight row, lanes in k order, the same lane sums), so their results are equal bit
 * for bit: a row's output does not depend on the batch it came in. Both prefetch the tile
 * GB_PF_TILES ahead into L2, every cache line of it: the codes then cross the memory bus once,
 * while the decoding runs (measured on Gemma 3's 178 MB Q8_0 lm_head, 1 thread: ~30 ms with
 * one line per block prefetched into L1, ~14 ms with every line into L2; a Q6_K block's 4
 * lines were mostly waited for before).
 *
 * Why registers for few rows and a buffer for more: decoding is what a call costs here (fp32
 * activations make every weight a widening, a conversion and a multiply-add, or a table
 * lookup), so few rows want nothing between decoding and the multiply-add, and many rows want
 * each weight decoded once for all of them. Measured (AVX-512 EPYC, 1 thread, 64 × 2048
 * weights in L2, ns per weight, buffer -> registers): M = 1: Q5_0 0.121 -> 0.077, Q8_0
 * 0.077 -> 0.055, Q4_K 0.100 -> 0.070, Q6_K 0.143 -> 0.108; M = 4: 0.163 -> 0.121,
 * 0.124 -> 0.091, 0.143 -> 0.144, 0.183 -> 0.150. (An earlier register decoder was slower
 * for the K-quants from 2 rows on: it unpacked their scales again per input row.)
 *
 * Each block type has three decoders: two vector ones (GCC vector extensions of IL_VLEN
 * floats, built for AVX-512, AVX2 or plain C like the other kernels: dec_* writes a block,
 * reg_* returns 32 weights in registers) and a scalar reference written weight by weight from
 * the format's definition; il_ggml_matmul_ref runs the reference, and the tests compare them
 * with each other and with `gguf.quants.dequantize`.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vector_sums.h"

#define GB_NR 4          /* weight rows per tile */
#define GB_CHUNK 256     /* weights of a row decoded at a time: one K-quant super-block */
#define GB_MAX_ROWS 16   /* input rows one decoded chunk serves (accumulators kept in L1) */
#ifndef IL_MR
#define IL_MR 2          /* input rows per register tile */
#endif
#ifndef GB_PF_TILES
#define GB_PF_TILES 4    /* software prefetch distance, in tiles of GB_NR weight rows */
#endif
#ifndef GB_PF_HINT
#define GB_PF_HINT 2     /* prefetcht1 (into L2; measured: prefetcht0 into L1 is 2x slower) */
#endif

typedef int32_t gb_vi __attribute__((vector_size(IL_VLEN * 4)));
typedef uint32_t gb_vu __attribute__((vector_size(IL_VLEN * 4)));
typedef uint8_t gb_vb __attribute__((vector_size(IL_VLEN), aligned(1)));

/* ---- loads shared by the decoders ------------------------------------------------------- */

/* IL_VLEN bytes zero-extended to int32 lanes (GCC scalarizes a vector uint8 -> int32
 * conversion, so the widening load is named where the ISA has one). */
static inline gb_vi load_u8(const uint8_t* p) {
#if IL_VLEN == 16 && defined(__AVX512F__)
  return (gb_vi)_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)p));
#elif IL_VLEN == 8 && defined(__AVX2__)
  return (gb_vi)_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)p));
#else
  return __builtin_convertvector(*(const gb_vb*)p, gb_vi);
#endif
}

static inline vf to_f32(gb_vi v) { return __builtin_convertvector(v, vf); }
static inline void store(float* p, vf v) { *(vfu*)p = v; }

/* An IEEE half (the blocks' d, m, dmin), read unaligned: F16C where the build has it, else by
 * moving the exponent and mantissa (subnormal halves are m · 2^-24, exact in fp32). */
static inline float fp16(const uint8_t* p) {
  uint16_t h;
  memcpy(&h, p, 2);
#if defined(__F16C__)
  return _cvtsh_ss(h);
#else
  const uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 31, m = h & 0x3FF;
  uint32_t bits;
  if (e == 0) {
    const float f = (float)m * 0x1p-24f;
    return sign ? -f : f;
  }
  bits = e == 31 ? sign | 0x7F800000u | (m << 13) : sign | ((e + 112) << 23) | (m << 13);
  float f;
  memcpy(&f, &bits, 4);
  return f;
#endif
}

static inline uint32_t u32(const uint8_t* p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

/* The cache lines of p .. p + n - 1 asked for (into L2), ahead of their use. */
static inline void prefetch_span(const uint8_t* p, int64_t n) {
  for (int64_t o = 0; o < n; o += 64) __builtin_prefetch(p + o, 0, GB_PF_HINT);
}

/* The fifth bits of weights j .. j + IL_VLEN - 1 from a block's 32-bit qh, moved to bit 4. */
static inline gb_vi fifth_bits(uint32_t qh, int j) {
  gb_vu lane;
  for (int i = 0; i < IL_VLEN; ++i) lane[i] = (uint32_t)(j + i);
  return (gb_vi)((((gb_vu){0} + qh) >> lane) & 1u) << 4;
}

/* Sub-block j's 6-bit scale and min of a Q4_K / Q5_K block's 12 bytes: sub-blocks 0-3 have
 * theirs in the low 6 bits of bytes j and j + 4; sub-blocks 4-7 their low 4 bits in byte
 * j + 4 (scale: low nibble, min: high) and their top 2 bits in the spare top bits of bytes
 * j - 4 (scale) and j (min). */
static inline void k_scale_min(const uint8_t* q, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

/* ---- vector decoders: one block -> QK floats -------------------------------------------- */

static inline void dec_q4_0(const uint8_t* b, float* out) {
  const float d = fp16(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; j += IL_VLEN) {
    const gb_vi u = load_u8(qs + j);
    store(out + j, to_f32((u & 15) - 8) * d); /* d (u - 8), rounded once as gguf does */
    store(out + j + 16, to_f32((u >> 4) - 8) * d);
  }
}

static inline void dec_q4_1(const uint8_t* b, float* out) {
  const float d = fp16(b), m = fp16(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; j += IL_VLEN) {
    const gb_vi u = load_u8(qs + j);
    store(out + j, to_f32(u & 15) * d + m);
    store(out + j + 16, to_f32(u >> 4) * d + m);
  }
}

static inline void dec_q5_0(const uint8_t* b, float* out) {
  const float d = fp16(b);
  const uint32_t qh = u32(b + 2);
  const uint8_t* qs = b + 6;
  for (int j = 0; j < 16; j += IL_VLEN) {
    const gb_vi u = load_u8(qs + j);
    store(out + j, to_f32(((u & 15) | fifth_bits(qh, j)) - 16) * d);
    store(out + j + 16, to_f32(((u >> 4) | fifth_bits(qh, j + 16)) - 16) * d);
  }
}

static inline void dec_q5_1(const uint8_t* b, float* out) {
  const float d = fp16(b), m = fp16(b + 2);
  const uint32_t qh = u32(b + 4);
  const uint8_t* qs = b + 8;
  for (int j = 0; j < 16; j += IL_VLEN) {
    const gb_vi u = load_u8(qs + j);
    store(out + j, to_f32((u & 15) | fifth_bits(qh, j)) * d + m);
    store(out + j + 16, to_f32((u >> 4) | fifth_bits(qh, j + 16)) * d + m);
  }
}

static inline void dec_q8_0(const uint8_t* b, float* out) {
  const float d = fp16(b);
  for (int j = 0; j < 32; j += IL_VLEN) store(out + j, il_load_i8((const int8_t*)b + 2 + j) * d);
}

/* Q4_K: per 32 bytes of nibbles, sub-block 2c from the low nibbles and 2c + 1 from the high;
 * each sub-block's d · scale and dmin · min are formed once (scalars), then one multiply-add
 * per weight. */
static inline void dec_q4_K(const uint8_t* b, float* out) {
  const float d = fp16(b), dmin = fp16(b + 2);
  const uint8_t *sc = b + 4, *qs = b + 16;
  for (int c = 0; c < 4; ++c) {
    int s0, m0, s1, m1;
    k_scale_min(sc, 2 * c, &s0, &m0);
    k_scale_min(sc, 2 * c + 1, &s1, &m1);
    const float d0 = d * s0, n0 = -(dmin * m0), d1 = d * s1, n1 = -(dmin * m1);
    for (int l = 0; l < 32; l += IL_VLEN) {
      const gb_vi u = load_u8(qs + 32 * c + l);
      store(out + 64 * c + l, to_f32(u & 15) * d0 + n0);
      store(out + 64 * c + 32 + l, to_f32(u >> 4) * d1 + n1);
    }
  }
}

/* Q5_K: Q4_K's nibbles and scales, plus bit s of qh[l] as the fifth bit of sub-block s. */
static inline void dec_q5_K(const uint8_t* b, float* out) {
  const float d = fp16(b), dmin = fp16(b + 2);
  const uint8_t *sc = b + 4, *qh = b + 16, *qs = b + 48;
  for (int c = 0; c < 4; ++c) {
    int s0, m0, s1, m1;
    k_scale_min(sc, 2 * c, &s0, &m0);
    k_scale_min(sc, 2 * c + 1, &s1, &m1);
    const float d0 = d * s0, n0 = -(dmin * m0), d1 = d * s1, n1 = -(dmin * m1);
    for (int l = 0; l < 32; l += IL_VLEN) {
      const gb_vi u = load_u8(qs + 32 * c + l), h = load_u8(qh + l);
      const gb_vi lo = (u & 15) | (((h >> (2 * c)) & 1) << 4);
      const gb_vi hi = (u >> 4) | (((h >> (2 * c + 1)) & 1) << 4);
      store(out + 64 * c + l, to_f32(lo) * d0 + n0);
      store(out + 64 * c + 32 + l, to_f32(hi) * d1 + n1);
    }
  }
}

/* Q6_K: each half of 128 weights reads 64 bytes of ql, 32 of qh and 8 scales; weight
 * 32 r + l of the half (run r = 0..3, l = 0..31) is the low (r = 0, 1) or high (r = 2, 3)
 * nibble of ql[l + 32 (r & 1)] with bits 2r, 2r + 1 of qh[l] on top, minus 32, times
 * d · scale[2r + l / 16]. */
static inline void dec_q6_K(const uint8_t* b, float* out) {
  const float d = fp16(b + 208);
  for (int h = 0; h < 2; ++h) {
    const uint8_t *ql = b + 64 * h, *qh = b + 128 + 32 * h;
    const int8_t* sc = (const int8_t*)(b + 192 + 8 * h);
    float* o = out + 128 * h;
    for (int l = 0; l < 32; l += IL_VLEN) {
      const gb_vi a = load_u8(ql + l), c = load_u8(ql + 32 + l), hb = load_u8(qh + l);
      const int s = l / 16;
      store(o + l, to_f32(((a & 15) | ((hb & 3) << 4)) - 32) * (d * sc[s]));
      store(o + 32 + l, to_f32(((c & 15) | (((hb >> 2) & 3) << 4)) - 32) * (d * sc[s + 2]));
      store(o + 64 + l, to_f32(((a >> 4) | (((hb >> 4) & 3) << 4)) - 32) * (d * sc[s + 4]));
      store(o + 96 + l, to_f32(((c >> 4) | (((hb >> 6) & 3) << 4)) - 32) * (d * sc[s + 6]));
    }
  }
}

/* ---- scalar reference decoders: the same formats, weight by weight ---------------------- */

static void ref_q4_0(const uint8_t* b, float* out) {
  const float d = fp16(b);
  for (int j = 0; j < 32; ++j) {
    const int u = j < 16 ? b[2 + j] & 15 : b[2 + j - 16] >> 4;
    out[j] = (float)(u - 8) * d;
  }
}

static void ref_q4_1(const uint8_t* b, float* out) {
  const float d = fp16(b), m = fp16(b + 2);
  for (int j = 0; j < 32; ++j) {
    const int u = j < 16 ? b[4 + j] & 15 : b[4 + j - 16] >> 4;
    out[j] = (float)u * d + m;
  }
}

static void ref_q5_0(const uint8_t* b, float* out) {
  const float d = fp16(b);
  const uint32_t qh = u32(b + 2);
  for (int j = 0; j < 32; ++j) {
    const int u = (j < 16 ? b[6 + j] & 15 : b[6 + j - 16] >> 4) | (int)((qh >> j) & 1) << 4;
    out[j] = (float)(u - 16) * d;
  }
}

static void ref_q5_1(const uint8_t* b, float* out) {
  const float d = fp16(b), m = fp16(b + 2);
  const uint32_t qh = u32(b + 4);
  for (int j = 0; j < 32; ++j) {
    const int u = (j < 16 ? b[8 + j] & 15 : b[8 + j - 16] >> 4) | (int)((qh >> j) & 1) << 4;
    out[j] = (float)u * d + m;
  }
}

static void ref_q8_0(const uint8_t* b, float* out) {
  const float d = fp16(b);
  for (int j = 0; j < 32; ++j) out[j] = (float)(int8_t)b[2 + j] * d;
}

static void ref_q4_K(const uint8_t* b, float* out) {
  const float d = fp16(b), dmin = fp16(b + 2);
  for (int k = 0; k < 256; ++k) {
    const int s = k / 32, l = k % 32; /* sub-block s: nibble s & 1 of byte 32 (s / 2) + l */
    int scale, min;
    k_scale_min(b + 4, s, &scale, &min);
    const uint8_t byte = b[16 + 32 * (s / 2) + l];
    const int u = s & 1 ? byte >> 4 : byte & 15;
    out[k] = (d * scale) * (float)u - dmin * min;
  }
}

static void ref_q5_K(const uint8_t* b, float* out) {
  const float d = fp16(b), dmin = fp16(b + 2);
  for (int k = 0; k < 256; ++k) {
    const int s = k / 32, l = k % 32;
    int scale, min;
    k_scale_min(b + 4, s, &scale, &min);
    const uint8_t byte = b[48 + 32 * (s / 2) + l];
    const int u = (s & 1 ? byte >> 4 : byte & 15) | ((b[16 + l] >> s) & 1) << 4;
    out[k] = (d * scale) * (float)u - dmin * min;
  }
}

static void ref_q6_K(const uint8_t* b, float* out) {
  const float d = fp16(b + 208);
  for (int k = 0; k < 256; ++k) {
    const int h = k / 128, r = k % 128 / 32, l = k % 32;
    const uint8_t lo = b[64 * h + l + 32 * (r & 1)];
    const int low = r < 2 ? lo & 15 : lo >> 4;
    const int high = (b[128 + 32 * h + l] >> (2 * r)) & 3;
    const int8_t scale = (int8_t)b[192 + k / 16];
    out[k] = (d * scale) * (float)((low | high << 4) - 32);
  }
}

/* ---- register decoders: 32 weights of a row straight into registers (decode rows) ------ */

/* A step is 32 weights of one row (a Q*_0 / Q*_1 block, or one sub-block of a K-quant
 * super-block) decoded into GB_SV vectors; `p` holds what a K-quant block's steps share
 * (its sub-block scales, formed once per block by reg_prep_*). Where the build has AVX-512
 * a 4- or 5-bit code indexes a table of its 16 or 32 decoded values (vpermps), built once per
 * block or sub-block by one multiply(-add) per 16 values, instead of a widening, conversion
 * and multiply per weight; the table's entries are the same products (d · (u - 8), fma(u,
 * d s, -dmin m), ...), each exact or rounded once, so ŵ is gguf's bit for bit either way. */
#define GB_SV (32 / IL_VLEN)
#if IL_VLEN == 16 && defined(__AVX512F__) && !defined(GB_NO_TABLES)
#define GB_TABLES 1
static inline vf gb_iota(float from) {
  return (vf)_mm512_add_ps(_mm512_set_ps(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                           _mm512_set1_ps(from));
}
/* table[u & 15] lane by lane (vpermps reads the index's low 4 bits only). */
static inline vf gb_lookup(gb_vi u, vf table) {
  return (vf)_mm512_permutexvar_ps((__m512i)u, (__m512)table);
}
/* lo[u & 15], or hi[u & 15] in the lanes of `k`. */
static inline vf gb_lookup2(gb_vi u, vf lo, vf hi, __mmask16 k) {
  return (vf)_mm512_mask_permutexvar_ps(_mm512_permutexvar_ps((__m512i)u, (__m512)lo), k,
                                        (__m512i)u, (__m512)hi);
}
#else
#define GB_TABLES 0
#endif

static inline __attribute__((always_inline)) void reg_q8_0(const uint8_t* b, int j,
                                                          const float* p, vf* w) {
  (void)j, (void)p;
  const float d = fp16(b);
  for (int v = 0; v < GB_SV; ++v) w[v] = il_load_i8((const int8_t*)b + 2 + v * IL_VLEN) * d;
}

static inline __attribute__((always_inline)) void reg_q4_0(const uint8_t* b, int j,
                                                          const float* p, vf* w) {
  (void)j, (void)p;
  const float d = fp16(b);
#if GB_TABLES
  const vf t = gb_iota(-8.f) * d;
  const gb_vi u = load_u8(b + 2);
  w[0] = gb_lookup(u, t), w[1] = gb_lookup(u >> 4, t);
#else
  for (int v = 0; v < GB_SV / 2; ++v) {
    const gb_vi u = load_u8(b + 2 + v * IL_VLEN);
    w[v] = to_f32((u & 15) - 8) * d;
    w[v + GB_SV / 2] = to_f32((u >> 4) - 8) * d;
  }
#endif
}

static inline __attribute__((always_inline)) void reg_q4_1(const uint8_t* b, int j,
                                                          const float* p, vf* w) {
  (void)j, (void)p;
  const float d = fp16(b), m = fp16(b + 2);
#if GB_TABLES
  const vf t = gb_iota(0.f) * d + m;
  const gb_vi u = load_u8(b + 4);
  w[0] = gb_lookup(u, t), w[1] = gb_lookup(u >> 4, t);
#else
  for (int v = 0; v < GB_SV / 2; ++v) {
    const gb_vi u = load_u8(b + 4 + v * IL_VLEN);
    w[v] = to_f32(u & 15) * d + m;
    w[v + GB_SV / 2] = to_f32(u >> 4) * d + m;
  }
#endif
}

static inline __attribute__((always_inline)) void reg_q5_0(const uint8_t* b, int j,
                                                          const float* p, vf* w) {
  (void)j, (void)p;
  const float d = fp16(b);
  const uint32_t qh = u32(b + 2);
#if GB_TABLES
  const vf lo = gb_iota(-16.f) * d, hi = gb_iota(0.f) * d;
  const gb_vi u = load_u8(b + 6);
  w[0] = gb_lookup2(u, lo, hi, (__mmask16)qh);
  w[1] = gb_lookup2(u >> 4, lo, hi, (__mmask16)(qh >> 16));
#else
  for (int v = 0; v < GB_SV / 2; ++v) {
    const gb_vi u = load_u8(b + 6 + v * IL_VLEN);
    w[v] = to_f32(((u & 15) | fifth_bits(qh, v * IL_VLEN)) - 16) * d;
    w[v + GB_SV / 2] = to_f32(((u >> 4) | fifth_bits(qh, 16 + v * IL_VLEN)) - 16) * d;
  }
#endif
}

static inline __attribute__((always_inline)) void reg_q5_1(const uint8_t* b, int j,
                                                          const float* p, vf* w) {
  (void)j, (void)p;
  const float d = fp16(b), m = fp16(b + 2);
  const uint32_t qh = u32(b + 4);
#if GB_TABLES
  const vf lo = gb_iota(0.f) * d + m, hi = gb_iota(16.f) * d + m;
  const gb_vi u = load_u8(b + 8);
  w[0] = gb_lookup2(u, lo, hi, (__mmask16)qh);
  w[1] = gb_lookup2(u >> 4, lo, hi, (__mmask16)(qh >> 16));
#else
  for (int v = 0; v < GB_SV / 2; ++v) {
    const gb_vi u = load_u8(b + 8 + v * IL_VLEN);
    w[v] = to_f32((u & 15) | fifth_bits(qh, v * IL_VLEN)) * d + m;
    w[v + GB_SV / 2] = to_f32((u >> 4) | fifth_bits(qh, 16 + v * IL_VLEN)) * d + m;
  }
#endif
}

/* Q4_K / Q5_K: p[j] = d · scale_j and p[8 + j] = -(dmin · min_j) of the block's 8
 * sub-blocks, in vectors: the 12 bytes rearranged (as llama.cpp does) into the 8 scales' and
 * the 8 mins' bytes, widened, converted and multiplied at once (both products exact). */
static inline __attribute__((always_inline)) void reg_prep_k(const uint8_t* b, float* p) {
  const float d = fp16(b), dmin = fp16(b + 2);
  uint32_t u[4];
  memcpy(u, b + 4, 12);
  u[3] = ((u[2] >> 4) & 0x0F0F0F0Fu) | (((u[1] >> 6) & 0x03030303u) << 4); /* mins 4-7 */
  const uint32_t mins = u[1] & 0x3F3F3F3Fu;                                  /* mins 0-3 */
  u[1] = (u[2] & 0x0F0F0F0Fu) | (((u[0] >> 6) & 0x03030303u) << 4);       /* scales 4-7 */
  u[2] = mins;
  u[0] &= 0x3F3F3F3Fu;                                                       /* scales 0-3 */
  const vf dv = (vf){0} + d, mv = (vf){0} - dmin;
#if IL_VLEN == 16
  const vf f = __builtin_shufflevector(dv, mv, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21,
                                       22, 23);
  store(p, to_f32(load_u8((const uint8_t*)u)) * f);
#else
  for (int v = 0; v < 16 / IL_VLEN; ++v)
    store(p + v * IL_VLEN, to_f32(load_u8((const uint8_t*)u + v * IL_VLEN)) *
                               (v * IL_VLEN < 8 ? dv : mv));
#endif
}

static inline __attribute__((always_inline)) void reg_q4_K(const uint8_t* b, int j,
                                                          const float* p, vf* w) {
  const uint8_t* qs = b + 16 + 32 * (j / 2);
  const int shift = 4 * (j & 1);
#if GB_TABLES
  const vf t = gb_iota(0.f) * p[j] + p[8 + j];
  w[0] = gb_lookup(load_u8(qs) >> shift, t), w[1] = gb_lookup(load_u8(qs + 16) >> shift, t);
#else
  for (int v = 0; v < GB_SV; ++v)
    w[v] = to_f32((load_u8(qs + v * IL_VLEN) >> shift) & 15) * p[j] + p[8 + j];
#endif
}

static inline __attribute__((always_inline)) void reg_q5_K(const uint8_t* b, int j,
                                                          const float* p, vf* w) {
  const uint8_t *qh = b + 16, *qs = b + 48 + 32 * (j / 2);
  const int shift = 4 * (j & 1);
#if GB_TABLES
  const vf lo = gb_iota(0.f) * p[j] + p[8 + j], hi = gb_iota(16.f) * p[j] + p[8 + j];
  for (int v = 0; v < 2; ++v) {
    const __mmask16 k = _mm512_test_epi32_mask((__m512i)load_u8(qh + 16 * v),
                                               _mm512_set1_epi32(1 << j));
    w[v] = gb_lookup2(load_u8(qs + 16 * v) >> shift, lo, hi, k);
  }
#else
  for (int v = 0; v < GB_SV; ++v) {
    const gb_vi u = ((load_u8(qs + v * IL_VLEN) >> shift) & 15) |
                    (((load_u8(qh + v * IL_VLEN) >> j) & 1) << 4);
    w[v] = to_f32(u) * p[j] + p[8 + j];
  }
#endif
}

/* Q6_K: p[s] = d · scale_s for its 16 runs of 16 weights (rounded once, as gguf does);
 * step j is run r = j % 4 of half h = j / 4 (see dec_q6_K). */
static inline __attribute__((always_inline)) void reg_prep_q6_K(const uint8_t* b, float* p) {
  const float d = fp16(b + 208);
  for (int v = 0; v < 16 / IL_VLEN; ++v)
    store(p + v * IL_VLEN, il_load_i8((const int8_t*)b + 192 + v * IL_VLEN) * d);
}

static inline __attribute__((always_inline)) void reg_q6_K(const uint8_t* b, int j,
                                                          const float* p, vf* w) {
  const int h = j / 4, r = j % 4;
  const uint8_t *ql = b + 64 * h + 32 * (r & 1), *qh = b + 128 + 32 * h;
  const int shift = r < 2 ? 0 : 4;
  for (int v = 0; v < GB_SV; ++v) {
    const gb_vi q = ((load_u8(ql + v * IL_VLEN) >> shift) & 15) |
                    (((load_u8(qh + v * IL_VLEN) >> (2 * r)) & 3) << 4);
    w[v] = to_f32(q - 32) * p[8 * h + 2 * r + v * IL_VLEN / 16];
  }
}

/* ---- the formats ------------------------------------------------------------------------ */

typedef void gb_decode_fn(const uint8_t* blocks, int64_t n_blocks, float* out);
typedef struct {
  int qk, bytes;
  gb_decode_fn *decode, *reference; /* n blocks in a row, vector / scalar */
} gb_format;

/* A run of blocks through one decoder (inlined into the loop: one call per run, not per
 * block). */
#define GB_RUN(T)                                                                  \
  static void run_##T(const uint8_t* b, int64_t n, float* out) {                   \
    for (int64_t i = 0; i < n; ++i) dec_##T(b + i * T##_BYTES, out + i * T##_QK);  \
  }                                                                                \
  static void run_ref_##T(const uint8_t* b, int64_t n, float* out) {               \
    for (int64_t i = 0; i < n; ++i) ref_##T(b + i * T##_BYTES, out + i * T##_QK);  \
  }
enum {
  q4_0_QK = 32, q4_0_BYTES = 18, q4_1_QK = 32, q4_1_BYTES = 20,
  q5_0_QK = 32, q5_0_BYTES = 22, q5_1_QK = 32, q5_1_BYTES = 24,
  q8_0_QK = 32, q8_0_BYTES = 34, q4_K_QK = 256, q4_K_BYTES = 144,
  q5_K_QK = 256, q5_K_BYTES = 176, q6_K_QK = 256, q6_K_BYTES = 210,
};
GB_RUN(q4_0)
GB_RUN(q4_1)
GB_RUN(q5_0)
GB_RUN(q5_1)
GB_RUN(q8_0)
GB_RUN(q4_K)
GB_RUN(q5_K)
GB_RUN(q6_K)
#undef GB_RUN

/* ggml's type ids (GGMLQuantizationType) -> format; NULL for a type not covered here. */
static const gb_format* format_of(int type) {
#define F(T) { T##_QK, T##_BYTES, run_##T, run_ref_##T }
  static const gb_format q4_0 = F(q4_0), q4_1 = F(q4_1), q5_0 = F(q5_0), q5_1 = F(q5_1),
                         q8_0 = F(q8_0), q4_K = F(q4_K), q5_K = F(q5_K), q6_K = F(q6_K);
#undef F
  switch (type) {
    case 2: return &q4_0;
    case 3: return &q4_1;
    case 6: return &q5_0;
    case 7: return &q5_1;
    case 8: return &q8_0;
    case 12: return &q4_K;
    case 13: return &q5_K;
    case 14: return &q6_K;
    default: return 0;
  }
}

/* ---- the product ------------------------------------------------------------------------ */

/* R input rows (a constant once inlined, <= IL_MR) × NR weight rows of one decoded chunk:
 * acc[r][i] += x[r, k0 + k] · buf[i][k] over the chunk's `len` weights. The accumulators
 * live in memory between chunks (GB_MAX_ROWS × GB_NR vectors) and in registers within one. */
static inline __attribute__((always_inline)) void fma_tile(
    const int R, const int NR, const float* x, int64_t K, const float (*buf)[GB_CHUNK],
    int64_t len, vf (*acc)[GB_NR]) {
  vf a[IL_MR][GB_NR];
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < NR; ++i) a[r][i] = acc[r][i];
  for (int64_t k = 0; k < len; k += IL_VLEN) {
    vf wv[GB_NR];
    for (int i = 0; i < NR; ++i) wv[i] = *(const vf*)(buf[i] + k);
    for (int r = 0; r < R; ++r) {
      const vf xv = *(const vfu*)(x + r * K + k);
      for (int i = 0; i < NR; ++i) a[r][i] += xv * wv[i];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < NR; ++i) acc[r][i] = a[r][i];
}

/* One decoded chunk against every input row (M <= GB_MAX_ROWS), IL_MR rows at a time. */
static void chunk_rows(int nr, const float* x, int64_t M, int64_t K,
                       const float (*buf)[GB_CHUNK], int64_t len, vf (*acc)[GB_NR]) {
  for (int64_t m = 0; m < M; m += IL_MR) {
    const int R = M - m < IL_MR ? (int)(M - m) : IL_MR;
    const float* xm = x + m * K;
#define T(R_, NR_) fma_tile(R_, NR_, xm, K, buf, len, acc + m)
    if (nr == GB_NR) {
      switch (R) {
        case 1: T(1, GB_NR); break;
#if IL_MR >= 2
        case 2: T(2, GB_NR); break;
#endif
#if IL_MR >= 3
        case 3: T(3, GB_NR); break;
#endif
#if IL_MR >= 4
        default: T(4, GB_NR); break;
#endif
      }
    } else { /* the last tile's 1-3 rows, one at a time */
      for (int i = 0; i < nr; ++i)
        for (int r = 0; r < R; ++r)
          fma_tile(1, 1, xm + r * K, K, buf + i, len, (vf(*)[GB_NR])(&acc[m + r][i]));
    }
#undef T
  }
}

/* Output rows n0 .. n0 + nr - 1 for input rows 0 .. M - 1 (M <= GB_MAX_ROWS). */
static void tile(const gb_format* f, const float* x, int64_t M, int64_t K, const uint8_t* w0,
                 int64_t row_bytes, int nr, float* y, int64_t N) {
  float buf[GB_NR][GB_CHUNK] __attribute__((aligned(64)));
  vf acc[GB_MAX_ROWS][GB_NR];
  for (int64_t m = 0; m < M; ++m)
    for (int i = 0; i < GB_NR; ++i) acc[m][i] = (vf){0};
  for (int64_t k0 = 0; k0 < K; k0 += GB_CHUNK) {
    const int64_t len = K - k0 < GB_CHUNK ? K - k0 : GB_CHUNK; /* a multiple of qk */
    const uint8_t* at = w0 + k0 / f->qk * f->bytes;
    for (int i = 0; i < nr; ++i) {
      prefetch_span(at + (i + GB_PF_TILES * GB_NR) * row_bytes, len / f->qk * f->bytes);
      f->decode(at + i * row_bytes, len / f->qk, buf[i]);
    }
    chunk_rows(nr, x + k0, M, K, (const float(*)[GB_CHUNK])buf, len, acc);
  }
  for (int64_t m = 0; m < M; ++m) {
    if (nr == GB_NR) {
      il_hsum4(acc[m][0], acc[m][1], acc[m][2], acc[m][3], y + m * N);
    } else {
      for (int i = 0; i < nr; ++i) y[m * N + i] = il_hsum(acc[m][i]);
    }
  }
}

/* ---- the product for decode rows: weights decoded into registers ---------------------- */

#define GB_REG_ROWS 4 /* up to this many input rows take the register path */

/* R input rows × GB_NR weight rows: each 32-weight step of a weight row decoded once into
 * registers and multiplied by the R rows of x (accumulators in registers: R · GB_NR, two
 * per pair where R <= 2 so that a row's multiply-adds are not one dependent chain). PREP
 * forms a K-quant block's sub-block scales once per block. */
#define GB_UNROLL(n) _Pragma("GCC unroll 16")
#define GB_REG_TILE(T, PREP)                                                                 \
  static inline __attribute__((always_inline)) void reg_tile_##T##_r(                        \
      const int R, const float* x, int64_t K, const uint8_t* w0, int64_t row_bytes,          \
      float* y, int64_t N) {                                                                 \
    vf acc[GB_REG_ROWS][GB_NR];                                                              \
    GB_UNROLL() for (int r = 0; r < R; ++r)                                                  \
      GB_UNROLL() for (int i = 0; i < GB_NR; ++i) acc[r][i] = (vf){0};                       \
    const int64_t nb = K / T##_QK, pf = GB_PF_TILES * GB_NR * row_bytes;                   \
    for (int64_t b = 0; b < nb; ++b) {                                                       \
      GB_UNROLL() for (int i = 0; i < GB_NR; ++i) {                                          \
        const uint8_t* blk = w0 + i * row_bytes + b * T##_BYTES;                             \
        prefetch_span(blk + pf, T##_BYTES);                                                  \
        float p[16] __attribute__((aligned(64)));                                            \
        PREP(blk, p);                                                                        \
        GB_UNROLL() for (int j = 0; j < T##_QK / 32; ++j) {                                  \
          vf w[GB_SV];                                                                       \
          reg_##T(blk, j, p, w);                                                             \
          const float* xk = x + b * T##_QK + 32 * j;                                         \
          GB_UNROLL() for (int r = 0; r < R; ++r)                                            \
            GB_UNROLL() for (int v = 0; v < GB_SV; ++v)                                      \
              acc[r][i] += *(const vfu*)(xk + r * K + v * IL_VLEN) * w[v];                   \
        }                                                                                    \
      }                                                                                      \
    }                                                                                        \
    GB_UNROLL() for (int r = 0; r < R; ++r)                                                  \
      il_hsum4(acc[r][0], acc[r][1], acc[r][2], acc[r][3], y + r * N);                       \
  }                                                                                          \
  static void reg_tile_##T(int R, const float* x, int64_t K, const uint8_t* w0,              \
                           int64_t row_bytes, float* y, int64_t N) {                         \
    switch (R) {                                                                             \
      case 1: reg_tile_##T##_r(1, x, K, w0, row_bytes, y, N); break;                         \
      case 2: reg_tile_##T##_r(2, x, K, w0, row_bytes, y, N); break;                         \
      case 3: reg_tile_##T##_r(3, x, K, w0, row_bytes, y, N); break;                         \
      default: reg_tile_##T##_r(4, x, K, w0, row_bytes, y, N); break;                        \
    }                                                                                        \
  }
#define GB_NO_PREP(b, p) ((void)(b), (void)(p))
GB_REG_TILE(q4_0, GB_NO_PREP)
GB_REG_TILE(q4_1, GB_NO_PREP)
GB_REG_TILE(q5_0, GB_NO_PREP)
GB_REG_TILE(q5_1, GB_NO_PREP)
GB_REG_TILE(q8_0, GB_NO_PREP)
GB_REG_TILE(q4_K, reg_prep_k)
GB_REG_TILE(q5_K, reg_prep_k)
GB_REG_TILE(q6_K, reg_prep_q6_K)
#undef GB_NO_PREP
#undef GB_REG_TILE

typedef void gb_reg_tile_fn(int R, const float* x, int64_t K, const uint8_t* w0,
                            int64_t row_bytes, float* y, int64_t N);

static gb_reg_tile_fn* reg_tile_of(int type) {
  switch (type) {
    case 2: return reg_tile_q4_0;
    case 3: return reg_tile_q4_1;
    case 6: return reg_tile_q5_0;
    case 7: return reg_tile_q5_1;
    case 8: return reg_tile_q8_0;
    case 12: return reg_tile_q4_K;
    case 13: return reg_tile_q5_K;
    case 14: return reg_tile_q6_K;
    default: return 0;
  }
}

/* y [M, N] = x [M, K] · ŵᵀ for the GGUF tensor w of ggml type `type` (K a multiple of its
 * block's weights). Tiles of GB_NR output rows are split over `threads` in one parallel
 * region. Returns 0, or -1 for a type not covered here (nothing written). */
int il_ggml_matmul(int type, const float* x, const uint8_t* w, float* y, int64_t M, int64_t K,
                   int64_t N, int threads) {
  const gb_format* f = format_of(type);
  if (!f || K % f->qk) return -1;
  const int64_t row_bytes = K / f->qk * f->bytes, n_tiles = (N + GB_NR - 1) / GB_NR;
  gb_reg_tile_fn* reg = M <= GB_REG_ROWS ? reg_tile_of(type) : 0;
#pragma omp parallel for num_threads(threads) if (threads > 1) schedule(static)
  for (int64_t t = 0; t < n_tiles; ++t) {
    const int64_t n0 = t * GB_NR;
    const int nr = N - n0 < GB_NR ? (int)(N - n0) : GB_NR;
    if (reg && nr == GB_NR) {
      reg((int)M, x, K, w + n0 * row_bytes, row_bytes, y + n0, N);
      continue;
    }
    for (int64_t m = 0; m < M; m += GB_MAX_ROWS)
      tile(f, x + m * K, M - m < GB_MAX_ROWS ? M - m : GB_MAX_ROWS, K, w + n0 * row_bytes,
           row_bytes, nr, y + m * N + n0, N);
  }
  return 0;
}

/* The scalar reference: each row decoded weight by weight, then plain fp32 dot products in
 * order (one thread; for tests). */
int il_ggml_matmul_ref(int type, const float* x, const uint8_t* w, float* y, int64_t M,
                       int64_t K, int64_t N) {
  const gb_format* f = format_of(type);
  float* row = f && K % f->qk == 0 ? malloc(K * sizeof(float)) : 0;
  if (!row) return -1;
  const int64_t row_bytes = K / f->qk * f->bytes;
  for (int64_t n = 0; n < N; ++n) {
    f->reference(w + n * row_bytes, K / f->qk, row);
    for (int64_t m = 0; m < M; ++m) {
      float s = 0.f;
      for (int64_t k = 0; k < K; ++k) s += x[m * K + k] * row[k];
      y[m * N + n] = s;
    }
  }
  free(row);
  return 0;
}

/* Rows of the tensor dequantized to fp32: out [rows, K] from `rows` rows of w (the embedding
 * lookup, a layer's `weight`, and the batches past GB_MAX_ROWS that run a GEMM on them).
 * `reference` picks the scalar decoders. Returns 0, or -1 for a type not covered here. */
int il_ggml_dequantize(int type, const uint8_t* w, float* out, int64_t rows, int64_t K,
                       int reference, int threads) {
  const gb_format* f = format_of(type);
  if (!f || K % f->qk) return -1;
  const int64_t row_bytes = K / f->qk * f->bytes;
  gb_decode_fn* decode = reference ? f->reference : f->decode;
#pragma omp parallel for num_threads(threads) if (threads > 1 && rows > 1) schedule(static)
  for (int64_t n = 0; n < rows; ++n) decode(w + n * row_bytes, K / f->qk, out + n * K);
  return 0;
}

/* ---- the quantized-activation path (llama.cpp's way; opt-in) ---------------------------
 *
 *   y[m, n] ≈ sum_b dx[m, b] · (a_b · I_b + mn_b · S[m, b])
 *
 * x is rounded per 32 values (a block b) to int8: dx = amax / 127, q = rint(x · 127 / amax)
 * (q in [-127, 127]; S is the block's sum of q, kept per 16 as s16), and each block of the
 * weight is read as integer codes c with a float scale a and offset mn (ŵ = a · sc · c + mn):
 *
 *   Q4_0, Q5_0, Q8_0   c = u - 8, u - 16, q (signed)   a = d          mn = 0
 *   Q4_1, Q5_1         c = u (unsigned)                a = d          mn = m
 *   Q4_K, Q5_K         c = u of sub-block j            a = d · s_j    mn = -dmin · m_j
 *   Q6_K               c = q - 32, sc per 16 (int8)    a = d          mn = 0
 *
 * so I_b = sum_g sc_g · sum_l c_l q_l is an exact integer per block (|I_b| < 2^24) and only
 * the combination is in floats. The vector kernels compute I_b 8 int32 lanes at a time
 * (AVX2: maddubs + madd; AVX-512 VNNI: vpdpbusd; Q6_K's per-16 scales by a madd with them),
 * signed codes through |c| and sign(q, c) as llama.cpp does, and add the lanes' products
 * with dx · a in the lanes; the scalar reference (gq_ref_row) sums the same integers in
 * order. The result differs from the fp32 path by x's rounding: |Δy| <= sum_b dx_b / 2 ·
 * sum_(k in b) |ŵ_k| (plus fp32 rounding); that is the price of llama.cpp's speed, so
 * GGUFLinear takes this path only when asked (activations="q8"). */

#define GQ_ROWS_MAX 4 /* x rows one pass over a weight row serves */

/* x [M, K] -> q int8 [M, K], dx fp32 [M, K / 32], s16 int32 [M, K / 16] (K a multiple of
 * 32). Scalar in every build (x is K values a row; the weights are K · N), bit for bit what
 * the tests' numpy reference computes: float32 amax / 127, 127 / amax, one product, rint. */
static void gq_quantize(const float* x, int8_t* q, float* dx, int32_t* s16, int64_t M,
                        int64_t K) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t b = 0; b < K / 32; ++b) {
      const float* xb = x + m * K + 32 * b;
      float amax = 0.f;
      for (int l = 0; l < 32; ++l) amax = fabsf(xb[l]) > amax ? fabsf(xb[l]) : amax;
      const float id = amax > 0.f ? 127.f / amax : 0.f;
      int8_t* qb = q + m * K + 32 * b;
      int32_t sum[2] = {0, 0};
      for (int l = 0; l < 32; ++l) {
        const float v = xb[l] * id;
        qb[l] = (int8_t)__builtin_rintf(v);
        sum[l / 16] += qb[l];
      }
      dx[m * (K / 32) + b] = amax / 127.f;
      s16[m * (K / 16) + 2 * b] = sum[0], s16[m * (K / 16) + 2 * b + 1] = sum[1];
    }
}

int il_ggml_quantize_x(const float* x, int8_t* q, float* dx, int32_t* s16, int64_t M,
                       int64_t K) {
  if (K % 32) return -1;
  gq_quantize(x, q, dx, s16, M, K);
  return 0;
}

/* Quantized x rows as the kernels read them: per 32 values (block b of row r at r · nx + b),
 * the codes, dx, e = dx · S (the offset mn's factor) and corr = -OFFSET · S (the unsigned
 * codes' offset, as the dot product's starting value; Q4_0, Q5_0, and Q8_0 under VNNI). */
typedef struct {
  const int8_t* q;
  const float *dx, *e;
  const int32_t* corr;
} gq_x;

/* One block's integer codes and scales, from the format's definition (the reference). */
typedef struct {
  int c[256];
  int sc[16];          /* per 16 weights (1 but for Q6_K) */
  float a[8], mn[8];   /* per 32 weights */
} gq_codes;

static void gq_ref_codes(int type, const uint8_t* b, gq_codes* o) {
  for (int g = 0; g < 16; ++g) o->sc[g] = 1;
  for (int j = 0; j < 8; ++j) o->mn[j] = 0.f;
  switch (type) {
    case 2: case 3: case 6: case 7: { /* Q4_0, Q4_1, Q5_0, Q5_1 */
      const int has_m = type == 3 || type == 7, five = type >= 6;
      const uint8_t* qs = b + 2 + 2 * has_m + 4 * five;
      const uint32_t qh = five ? u32(b + 2 + 2 * has_m) : 0;
      for (int l = 0; l < 32; ++l) {
        const int u = (l < 16 ? qs[l] & 15 : qs[l - 16] >> 4) | (int)((qh >> l) & 1) << 4;
        o->c[l] = has_m ? u : u - (five ? 16 : 8);
      }
      o->a[0] = fp16(b);
      if (has_m) o->mn[0] = fp16(b + 2);
      break;
    }
    case 8:
      for (int l = 0; l < 32; ++l) o->c[l] = (int8_t)b[2 + l];
      o->a[0] = fp16(b);
      break;
    case 12: case 13: { /* Q4_K, Q5_K */
      const float d = fp16(b), dmin = fp16(b + 2);
      const uint8_t* qs = b + (type == 13 ? 48 : 16);
      for (int k = 0; k < 256; ++k) {
        const int j = k / 32, l = k % 32, byte = qs[32 * (j / 2) + l];
        const int fifth = type == 13 ? ((b[16 + l] >> j) & 1) << 4 : 0;
        o->c[k] = (j & 1 ? byte >> 4 : byte & 15) | fifth;
      }
      for (int j = 0; j < 8; ++j) {
        int s, m;
        k_scale_min(b + 4, j, &s, &m);
        o->a[j] = d * s, o->mn[j] = -(dmin * m);
      }
      break;
    }
    case 14: /* Q6_K */
      for (int k = 0; k < 256; ++k) {
        const int h = k / 128, r = k % 128 / 32, l = k % 32;
        const uint8_t lo = b[64 * h + l + 32 * (r & 1)];
        const int high = (b[128 + 32 * h + l] >> (2 * r)) & 3;
        o->c[k] = ((r < 2 ? lo & 15 : lo >> 4) | high << 4) - 32;
      }
      for (int g = 0; g < 16; ++g) o->sc[g] = (int8_t)b[192 + g];
      for (int j = 0; j < 8; ++j) o->a[j] = fp16(b + 208);
      break;
  }
}

/* One weight row against one quantized x row, in block order (the reference): the integer
 * sum I of each 32 weights exactly, then y += (dx · a) · I + mn · e. */
static float gq_ref_row(int type, const gb_format* f, const uint8_t* row, const gq_x* x,
                        int64_t K) {
  gq_codes o;
  float y = 0.f;
  for (int64_t blk = 0; blk < K / f->qk; ++blk) {
    gq_ref_codes(type, row + blk * f->bytes, &o);
    for (int j = 0; j < f->qk / 32; ++j) {
      const int64_t xb = blk * (f->qk / 32) + j;
      int32_t sum = 0;
      for (int g = 0; g < 2; ++g) {
        int32_t part = 0;
        for (int l = 16 * g; l < 16 * g + 16; ++l) part += o.c[32 * j + l] * x->q[32 * xb + l];
        sum += o.sc[2 * j + g] * part;
      }
      y += (x->dx[xb] * o.a[j]) * (float)sum;
      y += o.mn[j] * x->e[xb];
    }
  }
  return y;
}

#if defined(__AVX2__)
#define GQ_VECTOR 1

/* 16 bytes of nibbles -> 32 bytes: the low nibbles, then the high ones. */
static inline __m256i gq_nibbles(const uint8_t* p) {
  const __m128i t = _mm_loadu_si128((const __m128i*)p);
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(15));
}

/* u with 16 added to byte l where bit l of qh is set (the fifth bits of Q5_0 / Q5_1). */
static inline __m256i gq_fifth(__m256i u, uint32_t qh);

/* Bit l of qh as byte l: 0xFF where set. */
static inline __m256i gq_bits(uint32_t qh) {
#if defined(__AVX512BW__) && defined(__AVX512VL__)
  return _mm256_movm_epi8((__mmask32)qh);
#else /* llama.cpp's bytes_from_bits_32 */
  const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                         0x0101010101010101, 0x0000000000000000);
  const __m256i bytes = _mm256_or_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), shuf),
                                        _mm256_set1_epi64x(0x7FBFDFEFF7FBFDFE));
  return _mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1));
#endif
}

static inline __m256i gq_fifth(__m256i u, uint32_t qh) {
#if defined(__AVX512BW__) && defined(__AVX512VL__)
  return _mm256_mask_add_epi8(u, (__mmask32)qh, u, _mm256_set1_epi8(16)); /* u < 16 */
#else
  return _mm256_or_si256(u, _mm256_and_si256(gq_bits(qh), _mm256_set1_epi8(16)));
#endif
}

static inline __m256i gq_load(const void* p) { return _mm256_loadu_si256((const __m256i*)p); }

/* A step: 32 codes of one weight row (sub-block j of its block) and their scale, offset and
 * (Q6_K) per-16 integer scales. */
typedef struct {
  __m256i c;
  float a, mn;
  __m256i sc16;
} gq_step;

static inline __attribute__((always_inline)) void gq_q4_0(const uint8_t* b, int j,
                                                         const float* p, gq_step* s) {
  (void)j, (void)p;
  s->c = gq_nibbles(b + 2); /* u; the kernel subtracts 8 S */
  s->a = fp16(b);
}
static inline __attribute__((always_inline)) void gq_q4_1(const uint8_t* b, int j,
                                                         const float* p, gq_step* s) {
  (void)j, (void)p;
  s->c = gq_nibbles(b + 4);
  s->a = fp16(b), s->mn = fp16(b + 2);
}
static inline __attribute__((always_inline)) void gq_q5_0(const uint8_t* b, int j,
                                                         const float* p, gq_step* s) {
  (void)j, (void)p;
  s->c = gq_fifth(gq_nibbles(b + 6), u32(b + 2)); /* u; the kernel subtracts 16 S */
  s->a = fp16(b);
}
static inline __attribute__((always_inline)) void gq_q5_1(const uint8_t* b, int j,
                                                         const float* p, gq_step* s) {
  (void)j, (void)p;
  s->c = gq_fifth(gq_nibbles(b + 8), u32(b + 4));
  s->a = fp16(b), s->mn = fp16(b + 2);
}
static inline __attribute__((always_inline)) void gq_q8_0(const uint8_t* b, int j,
                                                         const float* p, gq_step* s) {
  (void)j, (void)p;
  s->c = gq_load(b + 2);
  s->a = fp16(b);
}
/* Q4_K / Q5_K: p from reg_prep_k (d · s_j, -dmin · m_j). */
static inline __attribute__((always_inline)) void gq_q4_K(const uint8_t* b, int j,
                                                         const float* p, gq_step* s) {
  const __m256i raw = gq_load(b + 16 + 32 * (j / 2));
  s->c = _mm256_and_si256(j & 1 ? _mm256_srli_epi16(raw, 4) : raw, _mm256_set1_epi8(15));
  s->a = p[j], s->mn = p[8 + j];
}
static inline __attribute__((always_inline)) void gq_q5_K(const uint8_t* b, int j,
                                                         const float* p, gq_step* s) {
  const __m256i raw = gq_load(b + 48 + 32 * (j / 2)), bit = _mm256_set1_epi8((char)(1 << j));
  const __m256i u = _mm256_and_si256(j & 1 ? _mm256_srli_epi16(raw, 4) : raw,
                                     _mm256_set1_epi8(15));
  const __m256i high = _mm256_cmpeq_epi8(_mm256_and_si256(gq_load(b + 16), bit), bit);
  s->c = _mm256_or_si256(u, _mm256_and_si256(high, _mm256_set1_epi8(16)));
  s->a = p[j], s->mn = p[8 + j];
}
/* Q6_K step j: run r = j % 4 of half h = j / 4 (see dec_q6_K); its two int8 scales as 8
 * int16 lanes each (madd pairs them with the first and second 16 weights' byte pairs). */
static inline __attribute__((always_inline)) void gq_q6_K(const uint8_t* b, int j,
                                                         const float* p, gq_step* s) {
  (void)p;
  const int h = j / 4, r = j % 4;
  const __m256i ql = gq_load(b + 64 * h + 32 * (r & 1)), qh = gq_load(b + 128 + 32 * h);
  const __m256i lo = _mm256_and_si256(r < 2 ? ql : _mm256_srli_epi16(ql, 4),
                                      _mm256_set1_epi8(15));
  const __m256i hi2 = r == 0 ? _mm256_slli_epi16(qh, 4) : r == 1 ? _mm256_slli_epi16(qh, 2)
                      : r == 2 ? qh : _mm256_srli_epi16(qh, 2); /* bits 2r, 2r + 1 -> 4, 5 */
  const __m256i q6 = _mm256_or_si256(lo, _mm256_and_si256(hi2, _mm256_set1_epi8(0x30)));
  s->c = _mm256_sub_epi8(q6, _mm256_set1_epi8(32));
  const __m128i pick = _mm_set_epi64x(0x0101010101010101LL * (2 * j + 1),
                                      0x0101010101010101LL * (2 * j)); /* scales 2j, 2j + 1 */
  s->sc16 = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(_mm_loadu_si128((const __m128i*)(b + 192)),
                                                  pick));
  s->a = fp16(b + 208);
}

static inline __attribute__((always_inline)) float gq_hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

/* u8 x s8 byte products summed 4 at a time into 8 int32 lanes, added to acc. (maddubs
 * saturates pairs at 2^15: the AVX2 kernel takes unsigned codes of at most 5 bits only.) */
#define GQ_DOT_AVX2(acc, u, s) \
  _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)))
#define GQ_DOT_VNNI(acc, u, s) _mm256_dpbusd_epi32(acc, u, s)

/* R (1-4) quantized x rows against one weight row: codes decoded once per step, integer
 * dot products per x row, their lanes times dx · a summed in two float accumulators per x
 * row (alternate blocks), the offsets mn · dx · S in a scalar. The codes go in as unsigned
 * bytes: OFFSET (8, 16, 128) subtracted as -OFFSET · S, the dot's starting value (x.corr);
 * SIGNED (Q6_K, and Q8_0 where maddubs would saturate) as |c| · sign(q, c); MINS: mn != 0;
 * SC16: Q6_K's per-16 scales, by a madd with the byte pairs' sums. */
#define GQ_ROW(T, OFFSET, SIGNED, MINS, SC16, PREP, V, DOT, TARGET)                          \
  /* One block of the row into acc[.][par] (32-weight blocks) or acc[.][j & 1] (K-quants):   \
   * the accumulator picked by a constant, so that both stay in registers. */                \
  static inline __attribute__((always_inline)) TARGET void gq_block_##T##_##V(               \
      const int R, const uint8_t* row, int64_t blk, const int par, const gq_x* x, int64_t K, \
      int64_t pf, __m256* acc, float* ym) {                                                  \
    const int64_t nx = K / 32;                                                               \
    const uint8_t* b = row + blk * T##_BYTES;                                                \
    prefetch_span(b + pf, T##_BYTES);                                                        \
    float p[16] __attribute__((aligned(64)));                                                \
    PREP(b, p);                                                                              \
    GB_UNROLL() for (int j = 0; j < T##_QK / 32; ++j) {                                      \
      gq_step s;                                                                             \
      gq_##T(b, j, p, &s);                                                                   \
      const int64_t xb = blk * (T##_QK / 32) + j;                                            \
      const int a = T##_QK == 32 ? par : j & 1;                                              \
      const __m256i u = SIGNED ? _mm256_sign_epi8(s.c, s.c)                                  \
                        : OFFSET == 128 ? _mm256_xor_si256(s.c, _mm256_set1_epi8(-128))      \
                                        : s.c;                                               \
      GB_UNROLL() for (int r = 0; r < R; ++r) {                                              \
        __m256i qv = gq_load(x->q + r * K + 32 * xb), isum;                                  \
        if (SIGNED) qv = _mm256_sign_epi8(qv, s.c);                                          \
        if (SC16)                                                                            \
          isum = _mm256_madd_epi16(_mm256_maddubs_epi16(u, qv), s.sc16);                     \
        else                                                                                 \
          isum = DOT(OFFSET ? _mm256_castsi128_si256(_mm_cvtsi32_si128(x->corr[r * nx + xb]))\
                            : _mm256_setzero_si256(), u, qv);                                \
        acc[2 * r + a] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum),                           \
                                         _mm256_set1_ps(x->dx[r * nx + xb] * s.a),           \
                                         acc[2 * r + a]);                                    \
        if (MINS) ym[r] += s.mn * x->e[r * nx + xb];                                         \
      }                                                                                      \
    }                                                                                        \
  }                                                                                          \
  static inline __attribute__((always_inline)) TARGET void gq_row_##T##_##V##_r(            \
      const int R, const uint8_t* row, const gq_x* x, int64_t K, int64_t pf, float* y,       \
      int64_t N) {                                                                           \
    __m256 acc[2 * GQ_ROWS_MAX];                                                             \
    float ym[GQ_ROWS_MAX];                                                                   \
    GB_UNROLL() for (int r = 0; r < R; ++r) acc[2 * r] = acc[2 * r + 1] = _mm256_setzero_ps(),\
                                            ym[r] = 0.f;                                     \
    const int64_t nb = K / T##_QK;                                                           \
    int64_t blk = 0;                                                                         \
    for (; blk + 1 < nb; blk += 2) {                                                         \
      gq_block_##T##_##V(R, row, blk, 0, x, K, pf, acc, ym);                                 \
      gq_block_##T##_##V(R, row, blk + 1, 1, x, K, pf, acc, ym);                             \
    }                                                                                        \
    if (blk < nb) gq_block_##T##_##V(R, row, blk, 0, x, K, pf, acc, ym);                     \
    GB_UNROLL() for (int r = 0; r < R; ++r)                                                  \
      y[r * N] = gq_hsum(_mm256_add_ps(acc[2 * r], acc[2 * r + 1])) + ym[r];                 \
  }                                                                                          \
  static TARGET void gq_rows_##T##_##V(int R, const uint8_t* row, const gq_x* x, int64_t K,  \
                                       int64_t pf, float* y, int64_t N) {                    \
    switch (R) {                                                                             \
      case 1: gq_row_##T##_##V##_r(1, row, x, K, pf, y, N); break;                           \
      case 2: gq_row_##T##_##V##_r(2, row, x, K, pf, y, N); break;                           \
      case 3: gq_row_##T##_##V##_r(3, row, x, K, pf, y, N); break;                           \
      default: gq_row_##T##_##V##_r(4, row, x, K, pf, y, N); break;                          \
    }                                                                                        \
  }

#define GQ_NO_PREP(b, p) ((void)(b), (void)(p))
/* Q8_0's signed bytes: |c| · sign(q, c) under AVX2, c + 128 (and -128 S) under VNNI. */
#define GQ_FAMILY(V, DOT, Q8_OFFSET, Q8_SIGNED, TARGET)                                      \
  GQ_ROW(q4_0, 8, 0, 0, 0, GQ_NO_PREP, V, DOT, TARGET)                                       \
  GQ_ROW(q4_1, 0, 0, 1, 0, GQ_NO_PREP, V, DOT, TARGET)                                       \
  GQ_ROW(q5_0, 16, 0, 0, 0, GQ_NO_PREP, V, DOT, TARGET)                                      \
  GQ_ROW(q5_1, 0, 0, 1, 0, GQ_NO_PREP, V, DOT, TARGET)                                       \
  GQ_ROW(q8_0, Q8_OFFSET, Q8_SIGNED, 0, 0, GQ_NO_PREP, V, DOT, TARGET)                       \
  GQ_ROW(q4_K, 0, 0, 1, 0, reg_prep_k, V, DOT, TARGET)                                       \
  GQ_ROW(q5_K, 0, 0, 1, 0, reg_prep_k, V, DOT, TARGET)                                       \
  GQ_ROW(q6_K, 0, 1, 0, 1, GQ_NO_PREP, V, DOT, TARGET)
GQ_FAMILY(avx2, GQ_DOT_AVX2, 0, 1, )
GQ_FAMILY(vnni, GQ_DOT_VNNI, 128, 0,
          __attribute__((target("avx512vnni,avx512vl,avx512bw,avx512f"))))
#endif /* __AVX2__ */

typedef void gq_rows_fn(int R, const uint8_t* row, const gq_x* x, int64_t K, int64_t pf,
                        float* y, int64_t N);

enum { GQ_SCALAR = 0, GQ_AVX2 = 1, GQ_VNNI = 2 };

/* The kernels this build runs on this CPU, as bits (1 << GQ_SCALAR | 1 << GQ_AVX2 | ...). */
int il_ggml_q8_kernels(void) {
  int bits = 1 << GQ_SCALAR;
#ifdef GQ_VECTOR
  bits |= 1 << GQ_AVX2;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bw"))
    bits |= 1 << GQ_VNNI;
#endif
  return bits;
}

static gq_rows_fn* gq_rows_of(int type, int kernel) {
#ifdef GQ_VECTOR
#define K(T) (kernel == GQ_VNNI ? gq_rows_##T##_vnni : gq_rows_##T##_avx2)
  switch (type) {
    case 2: return K(q4_0);
    case 3: return K(q4_1);
    case 6: return K(q5_0);
    case 7: return K(q5_1);
    case 8: return K(q8_0);
    case 12: return K(q4_K);
    case 13: return K(q5_K);
    case 14: return K(q6_K);
  }
#undef K
#endif
  (void)type, (void)kernel;
  return 0;
}

/* y [M, N] ≈ x [M, K] · ŵᵀ with x quantized per 32 (il_ggml_quantize_x) and integer dot
 * products per block. `kernel`: GQ_SCALAR (the reference), GQ_AVX2, GQ_VNNI, or -1 for the
 * fastest this CPU runs. Threads split the output rows. Returns 0; -1 for a type not covered
 * or a kernel not run here; -2 where memory for x's codes is not had. */
int il_ggml_matmul_q8(int type, const float* x, const uint8_t* w, float* y, int64_t M,
                      int64_t K, int64_t N, int threads, int kernel) {
  const gb_format* f = format_of(type);
  const int have = il_ggml_q8_kernels();
  if (kernel < 0) kernel = have >> GQ_VNNI & 1 ? GQ_VNNI : have >> GQ_AVX2 & 1 ? GQ_AVX2 : 0;
  if (!f || K % f->qk || kernel > GQ_VNNI || !(have >> kernel & 1)) return -1;
  const int64_t nx = K / 32;
  int8_t* q = malloc(M * K);
  float* dx = malloc(M * nx * 2 * sizeof(float));
  int32_t* s16 = malloc(M * nx * 3 * sizeof(int32_t)); /* the sums per 16, then corr */
  if (!q || !dx || !s16) {
    free(q), free(dx), free(s16);
    return -2;
  }
  gq_quantize(x, q, dx, s16, M, K);
  float* e = dx + M * nx;
  int32_t* corr = s16 + M * 2 * nx;
  /* the unsigned codes' offset: Q4_0 8, Q5_0 16, Q8_0 128 where VNNI takes it unsigned */
  const int offset = type == 2 ? 8 : type == 6 ? 16 : type == 8 && kernel == GQ_VNNI ? 128 : 0;
  for (int64_t i = 0; i < M * nx; ++i) {
    const int32_t sum = s16[2 * i] + s16[2 * i + 1];
    e[i] = dx[i] * (float)sum, corr[i] = -offset * sum;
  }
  const int64_t row_bytes = K / f->qk * f->bytes, pf = GB_PF_TILES * GB_NR * row_bytes;
  gq_rows_fn* rows = gq_rows_of(type, kernel);
#pragma omp parallel for num_threads(threads) if (threads > 1) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const uint8_t* row = w + n * row_bytes;
    for (int64_t m = 0; m < M; m += GQ_ROWS_MAX) {
      const int R = M - m < GQ_ROWS_MAX ? (int)(M - m) : GQ_ROWS_MAX;
      const gq_x at = {q + m * K, dx + m * nx, e + m * nx, corr + m * nx};
      if (kernel == GQ_SCALAR) {
        for (int r = 0; r < R; ++r) {
          const gq_x one = {at.q + r * K, at.dx + r * nx, at.e + r * nx, at.corr + r * nx};
          y[(m + r) * N + n] = gq_ref_row(type, f, row, &one, K);
        }
      } else {
        rows(R, row, &at, K, pf, y + m * N + n, N);
      }
    }
  }
  free(q), free(dx), free(s16);
  return 0;
}
