/* Matrix products for many input rows (a batch of decodes, prefill chunks) on fp32 weights
 * packed into panels: y = x · Wᵀ, x fp32 [M, K], y fp32 [M, N].
 *
 * Past a few rows a product is bound by arithmetic, not by the weight's bytes, and the
 * skinny kernel's dot-product tiles (skinny.c: an x load and a weight load per few FMAs)
 * waste the FMA units. Here the weight is repacked once into panels of NP = 2·IL_VLEN output
 * rows, k-major: P[panel][k][NP], zero-padded past N. A register tile holds IL_PMR input rows
 * × NP outputs (12 accumulators on AVX2: 6 rows × 2 ymm); per k it loads two weight vectors,
 * broadcasts one x value per row and issues 2·IL_PMR FMAs (an outer product), the form
 * BLAS micro-kernels take. Each panel is read from memory once per block of IL_MC input rows
 * (the block stays in L2 while every panel passes), and the panel two ahead is prefetched
 * into L2 line by line, its lines dealt out over all the tiles of a panel (tile i of n asks
 * for every n-th k): asked for all in the first tile, they were fetched while that tile
 * computed and nothing was in flight while the others did, so a 9-row verification cost
 * 1.49x one row's streaming SmolLM2's linears on one Sapphire Rapids core, dealt out 1.25-1.33x.
 * Threads split the panels in one parallel region per call.
 */
#include <stdint.h>
#include <string.h>

#include "vector_sums.h"

#ifndef IL_PMR
#define IL_PMR 6 /* input rows per register tile (2·IL_PMR accumulators + 2 weight vectors) */
#endif
#define IL_NP (2 * IL_VLEN) /* output rows per panel */
#ifndef IL_MC
#define IL_MC 96 /* input rows per block: 96 rows of K = 1536 floats is 576 KiB, ~L2 */
#endif
#define IL_PANEL_PF 2 /* prefetch distance, in panels */

int il_panel_width(void) { return IL_NP; }

/* P [ceil(N / NP), K, NP] from W [N, K] row-major; rows past N are zeros. */
void il_panel_pack_f32(const float* w, float* p, int64_t K, int64_t N) {
  const int64_t n_panels = (N + IL_NP - 1) / IL_NP;
  for (int64_t t = 0; t < n_panels; ++t) {
    float* pt = p + t * K * IL_NP;
    for (int64_t j = 0; j < IL_NP; ++j) {
      const int64_t n = t * IL_NP + j;
      if (n < N)
        for (int64_t k = 0; k < K; ++k) pt[k * IL_NP + j] = w[n * K + k];
      else
        for (int64_t k = 0; k < K; ++k) pt[k * IL_NP + j] = 0.f;
    }
  }
}

/* R input rows (R <= IL_PMR, a constant) × one panel; `cols` valid outputs of NP. */
#define IL_PTILE(NAME, R)                                                                   \
  static inline void NAME(const float* x, int64_t K, const float* pt, float* y, int64_t N,  \
                          int64_t cols, const float* pf, int64_t pf_k, int64_t pf_step) {  \
    vf a0[R], a1[R];                                                                        \
    for (int r = 0; r < R; ++r) a0[r] = a1[r] = (vf){0};                                    \
    for (int64_t k = 0; k < K; ++k) {                                                       \
      const vf w0 = *(const vf*)(pt + k * IL_NP), w1 = *(const vf*)(pt + k * IL_NP + IL_VLEN);\
      if (pf && k == pf_k) { /* this tile's share of the next panel's lines, into L2 */     \
        for (int c = 0; c < IL_NP; c += 16) __builtin_prefetch(pf + k * IL_NP + c, 0, 1);   \
        pf_k += pf_step;                                                                    \
      }                                                                                     \
      for (int r = 0; r < R; ++r) {                                                         \
        const vf xv = x[r * K + k] - (vf){0};                                               \
        a0[r] += xv * w0;                                                                   \
        a1[r] += xv * w1;                                                                   \
      }                                                                                     \
    }                                                                                       \
    for (int r = 0; r < R; ++r) {                                                           \
      if (cols == IL_NP) {                                                                  \
        *(vfu*)(y + r * N) = a0[r];                                                         \
        *(vfu*)(y + r * N + IL_VLEN) = a1[r];                                               \
      } else {                                                                              \
        float s[IL_NP];                                                                     \
        memcpy(s, &a0[r], sizeof(vf));                                                      \
        memcpy(s + IL_VLEN, &a1[r], sizeof(vf));                                            \
        memcpy(y + r * N, s, (size_t)cols * sizeof(float));                                 \
      }                                                                                     \
    }                                                                                       \
  }
IL_PTILE(ptile_1, 1)
IL_PTILE(ptile_2, 2)
IL_PTILE(ptile_3, 3)
IL_PTILE(ptile_4, 4)
IL_PTILE(ptile_5, 5)
IL_PTILE(ptile_6, 6)

static inline void ptile(const float* x, int64_t R, int64_t K, const float* pt, float* y,
                         int64_t N, int64_t cols, const float* pf, int64_t pf_k,
                         int64_t pf_step) {
  switch (R) {
    case 1: ptile_1(x, K, pt, y, N, cols, pf, pf_k, pf_step); break;
    case 2: ptile_2(x, K, pt, y, N, cols, pf, pf_k, pf_step); break;
    case 3: ptile_3(x, K, pt, y, N, cols, pf, pf_k, pf_step); break;
    case 4: ptile_4(x, K, pt, y, N, cols, pf, pf_k, pf_step); break;
    case 5: ptile_5(x, K, pt, y, N, cols, pf, pf_k, pf_step); break;
    default: ptile_6(x, K, pt, y, N, cols, pf, pf_k, pf_step); break;
  }
}

/* y [M, N] = x [M, K] · Wᵀ with W packed by il_panel_pack_f32 into `p`. */
void il_panel_f32(const float* x, const float* p, float* y, int64_t M, int64_t K, int64_t N,
                  int threads) {
  const int64_t n_panels = (N + IL_NP - 1) / IL_NP;
  for (int64_t m0 = 0; m0 < M; m0 += IL_MC) {
    const int64_t mc = M - m0 < IL_MC ? M - m0 : IL_MC;
    const float* xb = x + m0 * K;
    float* yb = y + m0 * N;
    const int64_t tiles = (mc + IL_PMR - 1) / IL_PMR; /* per panel: its prefetches dealt out */
#pragma omp parallel for num_threads(threads) if (threads > 1) schedule(static)
    for (int64_t t = 0; t < n_panels; ++t) {
      const float* pt = p + t * K * IL_NP;
      const float* pf = t + IL_PANEL_PF < n_panels ? pt + IL_PANEL_PF * K * IL_NP : 0;
      const int64_t n0 = t * IL_NP, cols = N - n0 < IL_NP ? N - n0 : IL_NP;
      for (int64_t m = 0; m < mc; m += IL_PMR)
        ptile(xb + m * K, mc - m < IL_PMR ? mc - m : IL_PMR, K, pt, yb + m * N + n0, N, cols,
              pf, m / IL_PMR, tiles);
    }
  }
}
