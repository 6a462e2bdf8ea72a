/* Paged attention read in place: each query row reads its sequence's K/V through the block
 * table, block by block, with no gather into a workspace and no padding to the longest
 * context (engines/kv/cache.py lays a layer out [2, Hkv, n_blocks, block_size, D]).
 *
 * For sequence s, KV head h and the g = H / Hkv query heads that share it (GQA: each K/V row
 * is loaded once for all g), query j of the sequence (flat row qsl[s] + j) attends keys
 * 0 .. limit - 1, limit = positions[row] + 1 (causal; a decode's one query sees the whole
 * context):
 *
 *   out[row, head] = sum_t softmax_t(scale · q·k_t) v_t         (fp32 accumulation)
 *
 * with the online softmax of FlashAttention, taken a block at a time: the block's scores,
 * their max, one rescale of the running sum and output, then the block's values. Work is
 * split over (sequence, KV head, query) triples in one parallel region. A quantized cache's
 * block (INT8 or FP8 E4M3 codes, one fp32 scale per token and head) is decoded into fp32 on
 * the stack first, once for all g heads.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "vector_sums.h"

#define IL_MAX_GROUP 16  /* query heads per KV head */
#define IL_MAX_DHEAD 256
#define IL_MAX_BLOCK 128 /* tokens per block */
#define IL_MAX_QUANT_BLOCK 8192 /* block_size · d_head of a quantized cache (decoded on stack) */

typedef vf pvf;
typedef vfu pvfu;

static inline float dot(const float* a, const float* b, int64_t D) {
  pvf acc = (pvf){0};
  int64_t d = 0;
  for (; d + IL_VLEN <= D; d += IL_VLEN) acc += *(const pvfu*)(a + d) * *(const pvfu*)(b + d);
  float s = 0.f;
  for (int i = 0; i < IL_VLEN; ++i) s += acc[i];
  for (; d < D; ++d) s += a[d] * b[d];
  return s;
}

/* s[t] = q · k_t for 4 consecutive keys (rows of D floats): one reduction tree for four. */
static inline void dot4(const float* q, const float* k, int64_t D, float* s) {
  pvf a0 = (pvf){0}, a1 = a0, a2 = a0, a3 = a0;
  int64_t d = 0;
  for (; d + IL_VLEN <= D; d += IL_VLEN) {
    const pvf qv = *(const pvfu*)(q + d);
    a0 += qv * *(const pvfu*)(k + d);
    a1 += qv * *(const pvfu*)(k + D + d);
    a2 += qv * *(const pvfu*)(k + 2 * D + d);
    a3 += qv * *(const pvfu*)(k + 3 * D + d);
  }
  il_hsum4(a0, a1, a2, a3, s);
  for (; d < D; ++d)
    for (int j = 0; j < 4; ++j) s[j] += q[d] * k[j * D + d];
}

static inline void exp_inplace(float* x, int64_t n) {
  int64_t t = 0;
  for (; t + IL_VLEN <= n; t += IL_VLEN) *(pvfu*)(x + t) = il_vexp(*(const pvfu*)(x + t));
  for (; t < n; ++t) x[t] = expf(x[t]);
}

static inline void axpy(float* y, float a, const float* x, int64_t D) {
  int64_t d = 0;
  for (; d + IL_VLEN <= D; d += IL_VLEN) *(pvfu*)(y + d) += a * *(const pvfu*)(x + d);
  for (; d < D; ++d) y[d] += a * x[d];
}

static inline void scal(float* y, float a, int64_t D) {
  for (int64_t d = 0; d < D; ++d) y[d] *= a;
}

#define PV_NH 4 /* query heads of a group taken together */
#define PV_NV 4 /* vectors of D kept in registers per head */

/* out[i] += sum_t p[i][t] v_t for the g heads of a group over one block's n values: each
 * value row is loaded once for all heads and the outputs stay in registers, PV_NH heads ×
 * PV_NV vectors of D at a time (D a multiple of PV_NV · IL_VLEN). */
static inline __attribute__((always_inline)) void pv_heads(const int NH, float* out,
                                                          float s[][IL_MAX_BLOCK],
                                                          const float* vb, int64_t n,
                                                          int64_t D, int64_t d0) {
  pvf acc[PV_NH][PV_NV];
  for (int i = 0; i < NH; ++i)
    for (int v = 0; v < PV_NV; ++v) acc[i][v] = *(const pvfu*)(out + i * D + d0 + v * IL_VLEN);
  for (int64_t t = 0; t < n; ++t) {
    pvf vv[PV_NV];
    for (int v = 0; v < PV_NV; ++v) vv[v] = *(const pvfu*)(vb + t * D + d0 + v * IL_VLEN);
    for (int i = 0; i < NH; ++i) {
      const float p = s[i][t];
      for (int v = 0; v < PV_NV; ++v) acc[i][v] += p * vv[v];
    }
  }
  for (int i = 0; i < NH; ++i)
    for (int v = 0; v < PV_NV; ++v) *(pvfu*)(out + i * D + d0 + v * IL_VLEN) = acc[i][v];
}

static void pv_block(float* out, float s[][IL_MAX_BLOCK], const float* vb, int64_t n,
                     int64_t g, int64_t D) {
  for (int64_t d0 = 0; d0 < D; d0 += PV_NV * IL_VLEN)
    for (int64_t i0 = 0; i0 < g; i0 += PV_NH) {
      float* o = out + i0 * D;
      switch (g - i0 < PV_NH ? g - i0 : PV_NH) { /* a constant height: registers, not memory */
        case 1: pv_heads(1, o, s + i0, vb, n, D, d0); break;
        case 2: pv_heads(2, o, s + i0, vb, n, D, d0); break;
        case 3: pv_heads(3, o, s + i0, vb, n, D, d0); break;
        default: pv_heads(4, o, s + i0, vb, n, D, d0); break;
      }
    }
}

/* rows [n, D] of INT8 codes times one scale per row, into fp32 */
static inline void dequant_rows(float* dst, const int8_t* c, const float* sc, int64_t n,
                                int64_t D) {
  for (int64_t t = 0; t < n; ++t) {
    int64_t d = 0;
    for (; d + IL_VLEN <= D; d += IL_VLEN)
      *(pvfu*)(dst + t * D + d) = il_load_i8(c + t * D + d) * sc[t];
    for (; d < D; ++d) dst[t * D + d] = (float)c[t * D + d] * sc[t];
  }
}

/* rows [n, D] of FP8 E4M3 codes times one scale per row, into fp32 */
static inline void dequant_rows_fp8(float* dst, const uint8_t* c, const float* sc, int64_t n,
                                    int64_t D) {
  for (int64_t t = 0; t < n; ++t) {
    int64_t d = 0;
    for (; d + IL_VLEN <= D; d += IL_VLEN)
      *(pvfu*)(dst + t * D + d) = il_load_e4m3(c + t * D + d) * sc[t];
    for (; d < D; ++d) dst[t * D + d] = il_load_e4m3_one(c[t * D + d]) * sc[t];
  }
}

/* The next block of the table is anywhere in the pool, so the hardware's stream prefetcher
 * cannot guess it: ask for its K and V rows while this block computes. */
static inline void prefetch_block(const void* k_head, const void* v_head, int64_t blk,
                                  int64_t n_elems, size_t elem) {
  const char* k = (const char*)k_head + blk * n_elems * elem;
  const char* v = (const char*)v_head + blk * n_elems * elem;
  for (int64_t b = 0; b < n_elems * (int64_t)elem; b += 64) {
    __builtin_prefetch(k + b);
    __builtin_prefetch(v + b);
  }
}

/* One query row's g heads against one KV head's keys 0..limit-1. K/V are fp32, or INT8 or
 * (fp8) E4M3 codes (k_scales given: one scale per token) dequantized a block at a time, once
 * for all g heads. */
static void attend_row(const float* q, const void* k_head, const void* v_head,
                       const float* k_scales, const float* v_scales, int fp8,
                       const int32_t* table, int64_t limit, int64_t g, int64_t D, int64_t bs,
                       float scale, size_t elem, float* out) {
  float m[IL_MAX_GROUP], l[IL_MAX_GROUP], s[IL_MAX_GROUP][IL_MAX_BLOCK];
  float kbuf[IL_MAX_QUANT_BLOCK], vbuf[IL_MAX_QUANT_BLOCK];
  for (int64_t i = 0; i < g; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.f;
    memset(out + i * D, 0, sizeof(float) * D);
  }
  for (int64_t t0 = 0; t0 < limit; t0 += bs) {
    const int64_t n = limit - t0 < bs ? limit - t0 : bs;
    const int64_t blk = table[t0 / bs];
    const float* kb = (const float*)k_head + blk * bs * D;
    const float* vb = (const float*)v_head + blk * bs * D;
    if (t0 + bs < limit) prefetch_block(k_head, v_head, table[t0 / bs + 1], bs * D, elem);
    if (k_scales && fp8) {
      dequant_rows_fp8(kbuf, (const uint8_t*)k_head + blk * bs * D, k_scales + blk * bs, n, D);
      dequant_rows_fp8(vbuf, (const uint8_t*)v_head + blk * bs * D, v_scales + blk * bs, n, D);
      kb = kbuf, vb = vbuf;
    } else if (k_scales) {
      dequant_rows(kbuf, (const int8_t*)k_head + blk * bs * D, k_scales + blk * bs, n, D);
      dequant_rows(vbuf, (const int8_t*)v_head + blk * bs * D, v_scales + blk * bs, n, D);
      kb = kbuf, vb = vbuf;
    }
    for (int64_t i = 0; i < g; ++i) {
      int64_t t = 0;
      for (; t + 4 <= n; t += 4) dot4(q + i * D, kb + t * D, D, s[i] + t);
      for (; t < n; ++t) s[i][t] = dot(q + i * D, kb + t * D, D);
    }
    for (int64_t i = 0; i < g; ++i) {
      float mb = m[i];
      for (int64_t t = 0; t < n; ++t) {
        s[i][t] *= scale;
        mb = s[i][t] > mb ? s[i][t] : mb;
      }
      const float corr = expf(m[i] - mb); /* 0 on the first block (m = -inf) */
      l[i] *= corr;
      scal(out + i * D, corr, D);
      for (int64_t t = 0; t < n; ++t) s[i][t] -= mb;
      exp_inplace(s[i], n);
      for (int64_t t = 0; t < n; ++t) l[i] += s[i][t];
      m[i] = mb;
    }
    if (D % (PV_NV * IL_VLEN) == 0) {
      pv_block(out, s, vb, n, g, D);
    } else {
      for (int64_t i = 0; i < g; ++i)
        for (int64_t t = 0; t < n; ++t) axpy(out + i * D, s[i][t], vb + t * D, D);
    }
  }
  for (int64_t i = 0; i < g; ++i) scal(out + i * D, 1.f / l[i], D);
}

/* q, out [T, H, D]; kv the layer's [2, Hkv, n_blocks, bs, D] (fp32, or INT8 or E4M3 codes
 * (fp8) with kv_scales [2, Hkv, n_blocks, bs]); tables int32 [S, max_blocks]; qsl int32
 * [S + 1] (sequence s's query rows are qsl[s] .. qsl[s+1]-1); positions int64 [T]. */
static void paged_attention(const float* q, const void* kv, const float* kv_scales, int fp8,
                            size_t elem, const int32_t* tables, const int32_t* qsl,
                            const int64_t* positions, float* out, int64_t S, int64_t H,
                            int64_t Hkv, int64_t D, int64_t n_blocks, int64_t bs,
                            int64_t max_blocks, float scale, int threads) {
  const int64_t g = H / Hkv, T = qsl[S];
  const int64_t head_stride = n_blocks * bs * D, scale_stride = n_blocks * bs;
#pragma omp parallel for num_threads(threads) if (threads > 1) schedule(dynamic, 1) collapse(2)
  for (int64_t row = 0; row < T; ++row) {
    for (int64_t h = 0; h < Hkv; ++h) {
      int64_t s = 0; /* the row's sequence: qsl is short, a linear search is fine */
      while (qsl[s + 1] <= row) ++s;
      const char* k_head = (const char*)kv + h * head_stride * elem;
      const char* v_head = (const char*)kv + (Hkv + h) * head_stride * elem;
      const float* ks = kv_scales ? kv_scales + h * scale_stride : 0;
      const float* vs = kv_scales ? kv_scales + (Hkv + h) * scale_stride : 0;
      attend_row(q + (row * H + h * g) * D, k_head, v_head, ks, vs, fp8,
                 tables + s * max_blocks, positions[row] + 1, g, D, bs, scale, elem,
                 out + (row * H + h * g) * D);
    }
  }
}

void il_paged_attention_f32(const float* q, const float* kv, const int32_t* tables,
                            const int32_t* qsl, const int64_t* positions, float* out, int64_t S,
                            int64_t H, int64_t Hkv, int64_t D, int64_t n_blocks, int64_t bs,
                            int64_t max_blocks, float scale, int threads) {
  paged_attention(q, kv, 0, 0, sizeof(float), tables, qsl, positions, out, S, H, Hkv, D,
                  n_blocks, bs, max_blocks, scale, threads);
}

void il_paged_attention_i8(const float* q, const int8_t* kv, const float* kv_scales,
                           const int32_t* tables, const int32_t* qsl, const int64_t* positions,
                           float* out, int64_t S, int64_t H, int64_t Hkv, int64_t D,
                           int64_t n_blocks, int64_t bs, int64_t max_blocks, float scale,
                           int threads) {
  paged_attention(q, kv, kv_scales, 0, 1, tables, qsl, positions, out, S, H, Hkv, D, n_blocks,
                  bs, max_blocks, scale, threads);
}

void il_paged_attention_fp8(const float* q, const uint8_t* kv, const float* kv_scales,
                            const int32_t* tables, const int32_t* qsl, const int64_t* positions,
                            float* out, int64_t S, int64_t H, int64_t Hkv, int64_t D,
                            int64_t n_blocks, int64_t bs, int64_t max_blocks, float scale,
                            int threads) {
  paged_attention(q, kv, kv_scales, 1, 1, tables, qsl, positions, out, S, H, Hkv, D, n_blocks,
                  bs, max_blocks, scale, threads);
}
