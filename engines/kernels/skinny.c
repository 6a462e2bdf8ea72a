/* Skinny matrix products y = x · Wᵀ for a few input rows (decode, K+1 verification, small
 * batches), the weight W [N, K] row-major as the model stores it (fp32 or bf16 bits, or int8
 * or FP8 E4M3 codes with one scale per output row, widened to fp32 in registers):
 *
 *   y[m, n] = sum_k x[m, k] * W[n, k]          x fp32 [M, K], y fp32 [M, N]
 *   y[m, n] = s[n] * sum_k x[m, k] * q[n, k]   (int8 / fp8: q [N, K], s fp32 [N])
 *
 * Streamed once: output rows are taken NR at a time; a tile of NR weight rows (NR·K values,
 * in L1/L2) is multiplied by every input row, MR rows of x at a time, before the next tile is
 * read, so W crosses the memory bus once per call whatever M is. Threads split the tiles in
 * one parallel region per call.
 *
 * One source, several instruction sets: the vectors are GCC vector extensions of IL_VLEN
 * floats, so the same code builds for AVX-512 (IL_VLEN 16), AVX2 + FMA (8) and plain C
 * (4: SSE2 on x86-64, NEON on Arm), chosen at run time by engines/kernels/library.py.
 */
#include <stdint.h>
#include <string.h>

#include "vector_sums.h"

#ifndef IL_MR
#define IL_MR 2 /* input rows per register tile: NR·MR accumulators must fit the registers */
#endif
#define IL_NR 4 /* weight rows per tile */
#ifndef IL_PF_TILES
#define IL_PF_TILES 2 /* software prefetch distance, in tiles */
#endif

typedef uint16_t vh __attribute__((vector_size(IL_VLEN * 2), aligned(2)));
typedef uint32_t vu __attribute__((vector_size(IL_VLEN * 4)));

int il_vlen(void) { return IL_VLEN; }

static inline vf load_f32(const float* p) { return *(const vfu*)p; }
static inline vf load_bf16(const uint16_t* p) {
  vu u = __builtin_convertvector(*(const vh*)p, vu) << 16;
  return (vf)u;
}
static inline vf load_i8(const int8_t* p) { return il_load_i8(p); }
static inline float i8_to_f32(int8_t q) { return (float)q; }
static inline float bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* One register tile: R input rows (a constant, R <= IL_MR) × NR weight rows from w0. */
#define IL_TILE(NAME, R, WT, LOAD, SCALAR)                                                  \
  static inline void NAME(const float* x, const WT* w0, int64_t K, float* y, int64_t N,     \
                          const WT* pf, const float* sc) {                                  \
    vf acc[R][IL_NR];                                                                       \
    for (int r = 0; r < R; ++r)                                                             \
      for (int j = 0; j < IL_NR; ++j) acc[r][j] = (vf){0};                                  \
    const int64_t KV = K - K % IL_VLEN;                                                     \
    for (int64_t k = 0; k < KV; k += IL_VLEN) {                                             \
      vf wv[IL_NR];                                                                         \
      for (int j = 0; j < IL_NR; ++j) wv[j] = LOAD(w0 + j * K + k);                          \
      if (pf)                                                                               \
        for (int j = 0; j < IL_NR; ++j) __builtin_prefetch(pf + j * K + k);                 \
      for (int r = 0; r < R; ++r) {                                                         \
        vf xv = load_f32(x + r * K + k);                                                    \
        for (int j = 0; j < IL_NR; ++j) acc[r][j] += xv * wv[j];                            \
      }                                                                                     \
    }                                                                                       \
    for (int r = 0; r < R; ++r) {                                                           \
      float s[IL_NR];                                                                       \
      il_hsum4(acc[r][0], acc[r][1], acc[r][2], acc[r][3], s);                              \
      for (int j = 0; j < IL_NR; ++j) {                                                     \
        for (int64_t k = KV; k < K; ++k) s[j] += x[r * K + k] * SCALAR(w0[j * K + k]);      \
        y[r * N + j] = sc ? s[j] * sc[j] : s[j];                                            \
      }                                                                                     \
    }                                                                                       \
  }

/* One weight row against R input rows: the tail of N that does not fill a tile. */
#define IL_ROW(NAME, WT, LOAD, SCALAR)                                                      \
  static inline void NAME(const float* x, int64_t R, const WT* w, int64_t K, float* y,      \
                          int64_t N, const float* sc) {                                     \
    const int64_t KV = K - K % IL_VLEN;                                                     \
    for (int64_t r = 0; r < R; ++r) {                                                       \
      vf acc = (vf){0};                                                                     \
      for (int64_t k = 0; k < KV; k += IL_VLEN) acc += load_f32(x + r * K + k) * LOAD(w + k);\
      float s = il_hsum(acc);                                                               \
      for (int64_t k = KV; k < K; ++k) s += x[r * K + k] * SCALAR(w[k]);                    \
      y[r * N] = sc ? s * sc[0] : s;                                                        \
    }                                                                                       \
  }

static inline float f32_id(float v) { return v; }
#define IL_TILES(T, WT, LOAD, SCALAR)                                                      \
  IL_TILE(T##_1, 1, WT, LOAD, SCALAR)                                                       \
  IL_TILE(T##_2, 2, WT, LOAD, SCALAR)                                                       \
  IL_TILE(T##_3, 3, WT, LOAD, SCALAR)                                                       \
  IL_TILE(T##_4, 4, WT, LOAD, SCALAR)                                                       \
  /* R rows of x, R <= IL_MR (<= 4), through the tile of that height */                    \
  static inline void T(const float* x, int64_t R, const WT* w0, int64_t K, float* y,        \
                       int64_t N, const WT* pf, const float* sc) {                          \
    switch (R) {                                                                            \
      case 1: T##_1(x, w0, K, y, N, pf, sc); break;                                         \
      case 2: T##_2(x, w0, K, y, N, pf, sc); break;                                         \
      case 3: T##_3(x, w0, K, y, N, pf, sc); break;                                         \
      default: T##_4(x, w0, K, y, N, pf, sc); break;                                        \
    }                                                                                       \
  }
IL_TILES(tile_f32, float, load_f32, f32_id)
IL_TILES(tile_bf16, uint16_t, load_bf16, bf16_to_f32)
IL_TILES(tile_i8, int8_t, load_i8, i8_to_f32)
IL_TILES(tile_fp8, uint8_t, il_load_e4m3, il_load_e4m3_one)
IL_ROW(row_f32, float, load_f32, f32_id)
IL_ROW(row_bf16, uint16_t, load_bf16, bf16_to_f32)
IL_ROW(row_i8, int8_t, load_i8, i8_to_f32)
IL_ROW(row_fp8, uint8_t, il_load_e4m3, il_load_e4m3_one)

/* y [M, N] = x [M, K] · W[N, K]ᵀ (times sc[n] when sc is given). Tiles of NR weight rows
 * are split over `threads`. */
#define IL_GEMM(NAME, WT, TILE, ROW)                                                        \
  static void NAME(const float* x, const WT* w, const float* sc, float* y, int64_t M,       \
                   int64_t K, int64_t N, int threads) {                                     \
    const int64_t n_tiles = N / IL_NR;                                                      \
    _Pragma("omp parallel for num_threads(threads) if (threads > 1) schedule(static)")      \
    for (int64_t t = 0; t <= n_tiles; ++t) {                                                \
      const int64_t n0 = t * IL_NR;                                                         \
      if (n0 >= N) continue;                                                                \
      const WT* w0 = w + n0 * K;                                                            \
      if (t < n_tiles) {                                                                    \
        /* the first pass over a tile asks for the tile IL_PF_TILES ahead, line by line as \
           it goes: a core computing does not issue loads far enough ahead by itself */    \
        const WT* pf = t + IL_PF_TILES < n_tiles ? w0 + IL_PF_TILES * IL_NR * K : 0;        \
        for (int64_t m = 0; m < M; m += IL_MR)                                              \
          TILE(x + m * K, M - m < IL_MR ? M - m : IL_MR, w0, K, y + m * N + n0, N,          \
               m ? 0 : pf, sc ? sc + n0 : 0);                                               \
      } else {                                                                              \
        for (int64_t n = n0; n < N; ++n)                                                    \
          ROW(x, M, w + n * K, K, y + n, N, sc ? sc + n : 0);                               \
      }                                                                                     \
    }                                                                                       \
  }

IL_GEMM(gemm_f32, float, tile_f32, row_f32)
IL_GEMM(gemm_bf16, uint16_t, tile_bf16, row_bf16)
IL_GEMM(gemm_i8, int8_t, tile_i8, row_i8)
IL_GEMM(gemm_fp8, uint8_t, tile_fp8, row_fp8)

void il_skinny_f32(const float* x, const float* w, float* y, int64_t M, int64_t K, int64_t N,
                   int threads) {
  gemm_f32(x, w, 0, y, M, K, N, threads);
}
void il_skinny_bf16(const float* x, const uint16_t* w, float* y, int64_t M, int64_t K,
                    int64_t N, int threads) {
  gemm_bf16(x, w, 0, y, M, K, N, threads);
}
/* int8 codes, one fp32 scale per output row: any M (no faster path exists for the codes). */
void il_skinny_i8(const float* x, const int8_t* q, const float* s, float* y, int64_t M,
                  int64_t K, int64_t N, int threads) {
  gemm_i8(x, q, s, y, M, K, N, threads);
}
/* FP8 E4M3 codes (decoded exactly in registers), one fp32 scale per output row. */
void il_skinny_fp8(const float* x, const uint8_t* q, const float* s, float* y, int64_t M,
                   int64_t K, int64_t N, int threads) {
  gemm_fp8(x, q, s, y, M, K, N, threads);
}

/* int8 codes with one fp32 scale per group of g along K (llama.cpp's Q8_0: g = 32):
 *   y[m, n] = sum_b d[n, b] * sum_{k in group b} x[m, k] * q[n, k]
 * g a multiple of IL_VLEN that divides K; the group's products summed in a vector first, then
 * scaled once. A tile is R (a constant where inlined, <= I8G_ROWS) input rows × nr weight rows
 * (IL_NR, or 1 for the rows past the last whole tile). */
#define I8G_ROWS 4
static inline __attribute__((always_inline)) void tile_i8g(
    const float* x, const int R, const int nr, const int8_t* w0, const float* d0, int64_t K,
    int64_t G, int64_t g, float* y, int64_t N, const int8_t* pf) {
  vf acc[I8G_ROWS][IL_NR];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < nr; ++j) acc[r][j] = (vf){0};
  for (int64_t b = 0; b < G; ++b) {
    vf part[I8G_ROWS][IL_NR];
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < nr; ++j) part[r][j] = (vf){0};
    for (int64_t k = b * g; k < (b + 1) * g; k += IL_VLEN) {
      vf wv[IL_NR];
      for (int j = 0; j < nr; ++j) wv[j] = il_load_i8(w0 + j * K + k);
      if (pf && k % 64 == 0) /* a cache line of codes per row, IL_PF_TILES tiles ahead */
        for (int j = 0; j < nr; ++j) __builtin_prefetch(pf + j * K + k);
      for (int r = 0; r < R; ++r) {
        const vf xv = load_f32(x + r * K + k);
        for (int j = 0; j < nr; ++j) part[r][j] += xv * wv[j];
      }
    }
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < nr; ++j) acc[r][j] += part[r][j] * d0[j * G + b];
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < nr; ++j) y[r * N + j] = il_hsum(acc[r][j]);
}

void il_skinny_i8g(const float* x, const int8_t* q, const float* d, float* y, int64_t M,
                   int64_t K, int64_t N, int64_t G, int64_t g, int threads) {
  const int64_t n_tiles = (N + IL_NR - 1) / IL_NR;
#pragma omp parallel for num_threads(threads) if (threads > 1) schedule(static)
  for (int64_t t = 0; t < n_tiles; ++t) {
    const int64_t n0 = t * IL_NR;
    const int8_t* w0 = q + n0 * K;
    const float* d0 = d + n0 * G;
    const int8_t* ahead = t + IL_PF_TILES < n_tiles - 1 ? w0 + IL_PF_TILES * IL_NR * K : 0;
    for (int64_t m = 0; m < M; m += I8G_ROWS) {
      const int8_t* pf = m ? 0 : ahead; /* the first pass over the tile asks for a later one */
      const float* xm = x + m * K;
      float* ym = y + m * N + n0;
      const int64_t R = M - m < I8G_ROWS ? M - m : I8G_ROWS;
      if (N - n0 >= IL_NR) {
        switch (R) { /* constant heights: the accumulators stay in registers */
          case 1: tile_i8g(xm, 1, IL_NR, w0, d0, K, G, g, ym, N, pf); break;
          case 2: tile_i8g(xm, 2, IL_NR, w0, d0, K, G, g, ym, N, pf); break;
          case 3: tile_i8g(xm, 3, IL_NR, w0, d0, K, G, g, ym, N, pf); break;
          default: tile_i8g(xm, 4, IL_NR, w0, d0, K, G, g, ym, N, pf); break;
        }
      } else {
        for (int64_t n = n0; n < N; ++n) /* the last rows that do not fill a tile */
          for (int64_t r = 0; r < R; ++r)
            tile_i8g(xm + r * K, 1, 1, q + n * K, d + n * G, K, G, g, ym + r * N + (n - n0), N,
                     0);
      }
    }
  }
}

/* Affine INT8's zero-point term: y[t][j] -= (Σ_i x[t][i]) · zt[j] (zt = S ⊙ Z per output row),
 * the row sum in one fixed order, so the per-op call and the one-call decoder agree bit for bit. */
void il_zero_point_sub(const float* x, const float* zt, float* y, int64_t M, int64_t K,
                       int64_t N) {
  for (int64_t t = 0; t < M; ++t) {
    float sum = 0.f;
    for (int64_t i = 0; i < K; ++i) sum += x[t * K + i];
    for (int64_t j = 0; j < N; ++j) y[t * N + j] -= sum * zt[j];
  }
}
