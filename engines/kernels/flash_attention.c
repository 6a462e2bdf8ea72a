/* Tiled attention in FlashAttention-2's order, fp32, for the attention lab's timings
 * (engines/attention/native.py): Q tiles of br rows outer (split over threads), K/V tiles of
 * bc rows inner, the running max m and sum l per row, the output rescaled as tiles arrive,
 * K tiles wholly after a Q tile's last row skipped when causal.
 *
 * Per (head, Q tile): the scores tile S = scale · Q_i K_jᵀ comes from Kᵀ (transposed once per
 * head into a padded scratch, so a register tile of FA_RB query rows × FA_SKV vectors of keys
 * is FMAs of a broadcast q value and loaded Kᵀ vectors; the key slice outer, so its Kᵀ panel
 * stays in L1 while every row of the tile passes), then per row
 *   m' = max(m, max_t s_t), l' = e^(m - m') l + Σ_t e^(s_t - m'), O' = e^(m - m') O + P V_j
 * with the row max taken a vector at a time (a scalar max loop cost as much as both products
 * here: without -ffast-math the compiler keeps it scalar), and P·V a register tile of FA_RB
 * rows × FA_PKV vectors of the head width over FA_TC keys at a time (their V rows stay in L1).
 * O_i = O / l is written once; m and l go out too (the stepped engine's final state is
 * checked against them). q, k, v, out [H, N, D]; m_out, l_out [H, N] or null.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vector_sums.h"

/* Register tiles: FA_RB × FA_SKV accumulators for the scores, FA_RB × FA_PKV for P·V, with
 * the loaded vectors beside them: 16 + 3 of AVX-512's 32 registers, 8 + 3 of AVX2's 16. At
 * N = 4096, d = 64 on one Sapphire Rapids core, 8 × 2 ran within 3 % of 4 × 4, 6 × 4 and 8 × 3. */
#if IL_VLEN >= 16
#define FA_RB 8
#else
#define FA_RB 4
#endif
#define FA_SKV 2
#define FA_PKV 2
#define FA_TC 64 /* keys per P·V pass: 64 V rows of d = 64 are 16 KiB */
#define FA_KW (FA_SKV * IL_VLEN)

typedef vf fvf;
typedef vfu fvfu;
typedef int32_t fvi __attribute__((vector_size(IL_VLEN * 4)));

static inline int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* s[r][t] (row stride lds) = scale · Σ_d q[r][d] kt[d][t], rows 0..rbp (a multiple of FA_RB),
 * keys 0..cbp (a multiple of FA_KW); kt rows have stride ldk. */
static void scores_tile(const float* restrict q, int64_t D, const float* restrict kt,
                        int64_t ldk, float* restrict s, int64_t lds, int64_t rbp, int64_t cbp,
                        float scale) {
  for (int64_t t = 0; t < cbp; t += FA_KW)
    for (int64_t r = 0; r < rbp; r += FA_RB) {
      fvf acc[FA_RB][FA_SKV];
      for (int i = 0; i < FA_RB; ++i)
        for (int j = 0; j < FA_SKV; ++j) acc[i][j] = (fvf){0};
      const float* qr = q + r * D;
      for (int64_t d = 0; d < D; ++d) {
        fvf kv[FA_SKV];
        for (int j = 0; j < FA_SKV; ++j) kv[j] = *(const fvfu*)(kt + d * ldk + t + j * IL_VLEN);
        for (int i = 0; i < FA_RB; ++i) {
          const float qv = qr[i * D + d];
          for (int j = 0; j < FA_SKV; ++j) acc[i][j] += qv * kv[j];
        }
      }
      for (int i = 0; i < FA_RB; ++i)
        for (int j = 0; j < FA_SKV; ++j)
          *(fvfu*)(s + (r + i) * lds + t + j * IL_VLEN) = acc[i][j] * scale;
    }
}

/* o[r][d0 .. d0 + kv vectors) += Σ_{t0 <= t < t1} p[r][t] v[t][...] for rows 0..rbp: a
 * register tile of FA_RB rows × kv vectors (kv a constant where inlined). */
static inline __attribute__((always_inline)) void pv_block(
    const float* restrict p, int64_t lds, const float* restrict v, int64_t t0, int64_t t1,
    float* restrict o, int64_t D, int64_t d0, int64_t rbp, const int kv) {
  for (int64_t r = 0; r < rbp; r += FA_RB) {
    fvf acc[FA_RB][FA_PKV];
    for (int i = 0; i < FA_RB; ++i)
      for (int j = 0; j < kv; ++j) acc[i][j] = *(const fvfu*)(o + (r + i) * D + d0 + j * IL_VLEN);
    for (int64_t t = t0; t < t1; ++t) {
      fvf vv[FA_PKV];
      for (int j = 0; j < kv; ++j) vv[j] = *(const fvfu*)(v + t * D + d0 + j * IL_VLEN);
      for (int i = 0; i < FA_RB; ++i) {
        const float pv = p[(r + i) * lds + t];
        for (int j = 0; j < kv; ++j) acc[i][j] += pv * vv[j];
      }
    }
    for (int i = 0; i < FA_RB; ++i)
      for (int j = 0; j < kv; ++j) *(fvfu*)(o + (r + i) * D + d0 + j * IL_VLEN) = acc[i][j];
  }
}

/* o[r][:] += Σ_t p[r][t] v[t][:] for rows 0..rbp, keys 0..cb (v rows of D floats): FA_PKV
 * vectors of the head width at a time, then single vectors, then the columns past the last
 * whole vector one by one. */
static void pv_tile(const float* restrict p, int64_t lds, const float* restrict v, int64_t cb,
                    float* restrict o, int64_t D, int64_t rbp) {
  const int64_t dv = D / IL_VLEN * IL_VLEN;
  for (int64_t t0 = 0; t0 < cb; t0 += FA_TC) {
    const int64_t t1 = cb - t0 < FA_TC ? cb : t0 + FA_TC;
    int64_t d0 = 0;
    for (; d0 + FA_PKV * IL_VLEN <= dv; d0 += FA_PKV * IL_VLEN)
      pv_block(p, lds, v, t0, t1, o, D, d0, rbp, FA_PKV);
    for (; d0 < dv; d0 += IL_VLEN) pv_block(p, lds, v, t0, t1, o, D, d0, rbp, 1);
    for (int64_t r = 0; r < rbp; ++r)
      for (int64_t t = t0; t < t1; ++t) {
        const float pv = p[r * lds + t];
        for (int64_t d = dv; d < D; ++d) o[r * D + d] += pv * v[t * D + d];
      }
  }
}

/* The largest of m and n values. */
static inline float max_row(const float* x, int64_t n, float m) {
  fvf acc = (fvf){0} + m;
  int64_t t = 0;
  for (; t + IL_VLEN <= n; t += IL_VLEN) {
    const fvf xv = *(const fvfu*)(x + t);
    const fvi gt = xv > acc;
    acc = (fvf)(((fvi)xv & gt) | ((fvi)acc & ~gt));
  }
  for (int i = 0; i < IL_VLEN; ++i) m = acc[i] > m ? acc[i] : m;
  for (; t < n; ++t) m = x[t] > m ? x[t] : m;
  return m;
}

/* e^(x - mb) over n values in place; the row's sum. */
static inline float exp_row(float* x, int64_t n, float mb) {
  const fvf mv = (fvf){0} + mb;
  fvf acc = (fvf){0};
  int64_t t = 0;
  for (; t + IL_VLEN <= n; t += IL_VLEN) {
    const fvf e = il_vexp(*(const fvfu*)(x + t) - mv);
    *(fvfu*)(x + t) = e;
    acc += e;
  }
  float sum = il_hsum(acc);
  for (; t < n; ++t) sum += (x[t] = expf(x[t] - mb));
  return sum;
}

void il_flash_attention_f32(const float* q, const float* k, const float* v, float* out,
                            float* m_out, float* l_out, int64_t H, int64_t N, int64_t D,
                            int64_t br, int64_t bc, int causal, float scale, int threads) {
  const int64_t npad = round_up(N, FA_KW) + FA_KW; /* room for a last tile read whole */
  const int64_t rbp_max = round_up(br, FA_RB), lds = round_up(bc, FA_KW);
  float* kt = (float*)malloc(sizeof(float) * H * D * npad);
  if (!kt) return;
#pragma omp parallel for num_threads(threads) if (threads > 1) collapse(2)
  for (int64_t h = 0; h < H; ++h)
    for (int64_t d = 0; d < D; ++d) {
      float* row = kt + (h * D + d) * npad;
      for (int64_t t = 0; t < N; ++t) row[t] = k[(h * N + t) * D + d];
      memset(row + N, 0, sizeof(float) * (npad - N));
    }
  const int64_t n_tiles = (N + br - 1) / br;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    float* qb = (float*)calloc(rbp_max * D, sizeof(float));
    float* ob = (float*)malloc(sizeof(float) * rbp_max * D);
    float* sb = (float*)malloc(sizeof(float) * rbp_max * lds);
    float m[rbp_max], l[rbp_max];
#pragma omp for schedule(dynamic, 1) collapse(2)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t ti = 0; ti < n_tiles; ++ti) {
        const int64_t r0 = ti * br, rb = N - r0 < br ? N - r0 : br, rbp = round_up(rb, FA_RB);
        memcpy(qb, q + (h * N + r0) * D, sizeof(float) * rb * D);
        memset(qb + rb * D, 0, sizeof(float) * (rbp - rb) * D); /* padding rows: zeros */
        memset(ob, 0, sizeof(float) * rbp * D);
        for (int64_t r = 0; r < rbp; ++r) m[r] = -INFINITY, l[r] = 0.f;
        const int64_t c_end = causal ? (r0 + rb < N ? r0 + rb : N) : N;
        for (int64_t c0 = 0; c0 < c_end; c0 += bc) {
          const int64_t cb = N - c0 < bc ? N - c0 : bc;
          scores_tile(qb, D, kt + h * D * npad + c0, npad, sb, lds, rbp, round_up(cb, FA_KW),
                      scale);
          for (int64_t r = 0; r < rbp; ++r) {
            float* s = sb + r * lds;
            int64_t lim = cb; /* keys of this tile the row sees */
            if (causal && r0 + r + 1 - c0 < lim) lim = r0 + r + 1 - c0;
            if (r >= rb || lim <= 0) { /* padding, or every key after the row */
              memset(s, 0, sizeof(float) * cb);
              continue;
            }
            const float mb = max_row(s, lim, m[r]);
            const float corr = expf(m[r] - mb); /* 0 on the row's first tile (m = -inf) */
            const float sum = exp_row(s, lim, mb);
            memset(s + lim, 0, sizeof(float) * (cb - lim));
            l[r] = l[r] * corr + sum;
            m[r] = mb;
            if (corr != 1.f)
              for (int64_t d = 0; d < D; ++d) ob[r * D + d] *= corr;
          }
          pv_tile(sb, lds, v + (h * N + c0) * D, cb, ob, D, rbp);
        }
        for (int64_t r = 0; r < rb; ++r) {
          const float inv = 1.f / l[r];
          for (int64_t d = 0; d < D; ++d) out[(h * N + r0 + r) * D + d] = ob[r * D + d] * inv;
          if (m_out) m_out[h * N + r0 + r] = m[r], l_out[h * N + r0 + r] = l[r];
        }
      }
    free(qb);
    free(ob);
    free(sb);
  }
  free(kt);
}
