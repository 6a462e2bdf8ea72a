/* INT4 weight-only skinny products for engines/quant/lowbit_linear.py (fp32 x and y); part of
 * the native library (engines/kernels). (INT8 codes run in skinny.c, as one more weight type.)
 *
 *   y[m, n] = sum_k x[m, k] * (d[n, k / g] * u[n, k] + mn[n, k / g])
 *
 * u in [0, 15], groups of g along k (g a multiple of 32; a row's last group may be shorter),
 * d and mn fp32 [N, G]. Each weight is dequantized once in registers and multiplied by every
 * input row, so the codes cross the memory bus once per call, for any number of rows.
 *
 * Code layout ("lane-interleaved", K a multiple of 64; L = IL_VLEN lanes): a row is chunks of
 * 8 L weights in L uint32 words, word t holding weight 8 L c + L j + t in bits 4j..4j+3
 * (j = 0..7), so one vector load, a shift (and a mask) give L consecutive codes. What does not
 * fill a chunk (64 weights, with L = 16) is laid out the same with 8 lanes (and read with 16).
 * With 16 lanes (AVX-512) a code is dequantized by a permute from the 16 values d u + mn of
 * its group (vpermps: no mask, no int-to-float conversion); otherwise by d * float(u) + mn.
 */
#include <stdint.h>

#include "vector_sums.h"

#define I4_NR 4 /* weight rows per tile */
/* Input rows per tile: the build's IL_I4_MR where it sets one (AVX2: 2, as the group sums
 * of 3 rows spill its 16 registers), else the skinny kernels' IL_MR. */
#if defined(IL_I4_MR)
#define I4_MR IL_I4_MR
#elif defined(IL_MR)
#define I4_MR IL_MR
#else
#define I4_MR 2
#endif
#ifndef I4_PF_TILES
#define I4_PF_TILES 2 /* software prefetch distance, in tiles (2-32 measured alike) */
#endif

typedef uint32_t vu __attribute__((vector_size(IL_VLEN * 4)));
typedef uint32_t vuu __attribute__((vector_size(IL_VLEN * 4), aligned(4)));
typedef int32_t vi __attribute__((vector_size(IL_VLEN * 4)));
typedef uint32_t hu __attribute__((vector_size(32), aligned(4))); /* 8 words: the tail */

int il_int4_lanes(void) { return IL_VLEN; }

static inline vf load_x(const float* p) { return *(const vfu*)p; }

/* R input rows (<= I4_MR) × NR weight rows (1 or I4_NR) from w0; both constants once inlined. */
static inline __attribute__((always_inline)) void int4_tile(
    const int R, const int NR, const float* x, int64_t K, const uint32_t* w0, const float* d0,
    const float* m0, int64_t G, int64_t g, float* y, int64_t N, const uint32_t* pf) {
  const int64_t KW = K / 8, C = K / (8 * IL_VLEN);
  float s[I4_MR][I4_NR];
#if IL_VLEN == 16
  vf acc[I4_MR][I4_NR];
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < NR; ++i) acc[r][i] = (vf){0};
  const vf iota = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  vf table[I4_NR];
#else
  /* Without a 16-lane permute the group's scale and min are applied once per group, not
   * per weight: sum_k x (d u + mn) = d · sum_k x u + mn · sum_k x over the group. The inner
   * loop is one conversion and one multiply-add per 8 weights into ug (sums of x u) and xs
   * (of x, per input row, shared by the tile's weight rows); each group's end folds them
   * into scalars, so no vector accumulator outlives a group and the tile fits the 16
   * registers of AVX2 (the per-weight dequantization spilled). */
  vf ug[I4_MR][I4_NR], xs[I4_MR];
  for (int r = 0; r < R; ++r) {
    xs[r] = (vf){0};
    for (int i = 0; i < NR; ++i) ug[r][i] = (vf){0}, s[r][i] = 0.f;
  }
#define I4_FLUSH(GI)                                                                   \
  for (int r = 0; r < R; ++r) {                                                        \
    float t[I4_NR];                                                                    \
    if (NR == I4_NR)                                                                   \
      il_hsum4(ug[r][0], ug[r][1], ug[r][2], ug[r][3], t);                             \
    else                                                                               \
      for (int i = 0; i < NR; ++i) t[i] = il_hsum(ug[r][i]);                           \
    const float sx = il_hsum(xs[r]);                                                   \
    for (int i = 0; i < NR; ++i) {                                                     \
      s[r][i] += t[i] * d0[i * G + (GI)] + sx * m0[i * G + (GI)];                      \
      ug[r][i] = (vf){0};                                                              \
    }                                                                                  \
    xs[r] = (vf){0};                                                                   \
  }
#endif
  int64_t grp = 0, left = 0; /* the group being read, and how many of its weights remain */
  for (int64_t c = 0; c < C; ++c) {
    vu v[I4_NR];
    for (int i = 0; i < NR; ++i) v[i] = *(const vuu*)(w0 + i * KW + c * IL_VLEN);
    if (pf)
      for (int i = 0; i < NR; ++i) __builtin_prefetch(pf + i * KW + c * IL_VLEN);
    /* unrolled: a shift by a constant is one instruction, by a variable count two */
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      if (left == 0) {
#if IL_VLEN == 16
        for (int i = 0; i < NR; ++i) table[i] = iota * d0[i * G + grp] + m0[i * G + grp];
#else
        if (grp) {
          I4_FLUSH(grp - 1)
        }
#endif
        ++grp, left = g;
      }
      left -= IL_VLEN;
      const int64_t k = c * 8 * IL_VLEN + j * IL_VLEN;
#if IL_VLEN == 16
      vf wv[I4_NR];
      for (int i = 0; i < NR; ++i)
        wv[i] = __builtin_shuffle(table[i], (vi)(v[i] >> (4 * j))); /* indices mod 16 */
      for (int r = 0; r < R; ++r) {
        const vf xv = load_x(x + r * K + k);
        for (int i = 0; i < NR; ++i) acc[r][i] += wv[i] * xv;
      }
#else
      for (int r = 0; r < R; ++r) {
        const vf xv = load_x(x + r * K + k);
        xs[r] += xv;
        for (int i = 0; i < NR; ++i)
          ug[r][i] += __builtin_convertvector((vi)((v[i] >> (4 * j)) & 15u), vf) * xv;
      }
#endif
    }
  }
#if IL_VLEN != 16
  if (grp) {
    I4_FLUSH(grp - 1)
  }
#undef I4_FLUSH
#endif
#if IL_VLEN == 16
  /* The 64 weights past the last chunk, in 8 words (weight 8j + t in word t's nibble j):
   * both halves of a 16-lane vector get the 8 words, lanes 0-7 shifted to nibble 2s and
   * lanes 8-15 to nibble 2s + 1, so 16 consecutive weights come out per shift and permute,
   * as in the chunks (one variable shift, no narrower vectors). */
  for (int64_t b = C * IL_VLEN; b < KW; b += 8) {
    vu v[I4_NR];
    for (int i = 0; i < NR; ++i) {
      const hu h = *(const hu*)(w0 + i * KW + b);
      v[i] = __builtin_shufflevector(h, h, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7);
    }
#pragma GCC unroll 4
    for (int s2 = 0; s2 < 4; ++s2) {
      if (left == 0) {
        for (int i = 0; i < NR; ++i) table[i] = iota * d0[i * G + grp] + m0[i * G + grp];
        ++grp, left = g;
      }
      left -= 16;
      const uint32_t lo = 8 * s2, hi = 8 * s2 + 4;
      const vu shift = {lo, lo, lo, lo, lo, lo, lo, lo, hi, hi, hi, hi, hi, hi, hi, hi};
      vf wv[I4_NR];
      for (int i = 0; i < NR; ++i) wv[i] = __builtin_shuffle(table[i], (vi)(v[i] >> shift));
      const int64_t k = b * 8 + 16 * s2;
      for (int r = 0; r < R; ++r) {
        const vf xv = load_x(x + r * K + k);
        for (int i = 0; i < NR; ++i) acc[r][i] += wv[i] * xv;
      }
    }
  }
#endif
#if IL_VLEN == 16
  for (int r = 0; r < R; ++r) {
    if (NR == I4_NR)
      il_hsum4(acc[r][0], acc[r][1], acc[r][2], acc[r][3], s[r]);
    else
      for (int i = 0; i < NR; ++i) s[r][i] = il_hsum(acc[r][i]);
  }
#endif
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < NR; ++i) y[r * N + i] = s[r][i];
}

#define I4_CALL(R, NR) \
  int4_tile(R, NR, x, K, w0, d0, m0, G, g, y, N, pf)
static void int4_rows(int R, int NR, const float* x, int64_t K, const uint32_t* w0,
                      const float* d0, const float* m0, int64_t G, int64_t g, float* y,
                      int64_t N, const uint32_t* pf) {
  if (NR == I4_NR) {
    switch (R) {
      case 1: I4_CALL(1, I4_NR); break;
#if I4_MR >= 2
      case 2: I4_CALL(2, I4_NR); break;
#endif
#if I4_MR >= 3
      case 3: I4_CALL(3, I4_NR); break;
#endif
#if I4_MR >= 4
      default: I4_CALL(4, I4_NR); break;
#endif
    }
  } else {
    switch (R) {
      case 1: I4_CALL(1, 1); break;
#if I4_MR >= 2
      case 2: I4_CALL(2, 1); break;
#endif
#if I4_MR >= 3
      case 3: I4_CALL(3, 1); break;
#endif
#if I4_MR >= 4
      default: I4_CALL(4, 1); break;
#endif
    }
  }
}
#undef I4_CALL

/* y [M, N] = x [M, K] · ŵᵀ. Tiles of I4_NR weight rows are split over `threads` in one
 * parallel region; each tile meets every input row, I4_MR at a time. */
void il_lowbit_int4(const float* x, const uint32_t* w, const float* d, const float* mn, float* y,
                    int64_t M, int64_t K, int64_t N, int64_t G, int64_t g, int threads) {
  const int64_t KW = K / 8, n_tiles = N / I4_NR;
#pragma omp parallel for num_threads(threads) if (threads > 1) schedule(static)
  for (int64_t t = 0; t <= n_tiles; ++t) {
    const int64_t n0 = t * I4_NR;
    if (n0 >= N) continue;
    if (t < n_tiles) {
      const uint32_t* pf = t + I4_PF_TILES < n_tiles ? w + (n0 + I4_PF_TILES * I4_NR) * KW : 0;
      for (int64_t m = 0; m < M; m += I4_MR)
        int4_rows(M - m < I4_MR ? (int)(M - m) : I4_MR, I4_NR, x + m * K, K, w + n0 * KW,
                  d + n0 * G, mn + n0 * G, G, g, y + m * N + n0, N, m ? 0 : pf);
    } else {
      for (int64_t n = n0; n < N; ++n)
        for (int64_t m = 0; m < M; m += I4_MR)
          int4_rows(M - m < I4_MR ? (int)(M - m) : I4_MR, 1, x + m * K, K, w + n * KW,
                    d + n * G, mn + n * G, G, g, y + m * N + n, N, 0);
    }
  }
}
