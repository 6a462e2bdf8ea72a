/* Weight-only low-bit matrix-vector kernels for engines/quant/lowbit_linear.py (fp32 x); part of the native library (engines/kernels).
 *
 * int8:  y[r, n] = s[n] * sum_k x[r, k] * w[n, k]        w int8 [N, K], s fp32 [N]
 * int4:  y[r, n] = sum_j d[n, j] * sum_{k in group j} u[n, k] x[r, k] + m[n, j] * sum x[r, group j]
 *        u in [0, 15]; groups of g along k (a row's last group may be shorter).
 *        Codes are stored "lane-interleaved" per 64 weights: 8 uint32 lanes, lane l holding
 *        u[64 b + 8 j + l] in bits 4j..4j+3 (j = 0..7), so one 256-bit load and a shift and
 *        mask per 8 weights give them in order (no byte shuffles).
 * Rows of output are split over `threads` OpenMP threads when built with OpenMP.
 */
#include <stdint.h>
#include <string.h>
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define LB_AVX2 1
static inline float hsum8(__m256 v) {
  __m128 lo = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}
static inline __m256 cvt8_i8(const int8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)p)));
}
#endif

int lowbit_has_avx2(void) {
#ifdef LB_AVX2
  return 1;
#else
  return 0;
#endif
}

static void int8_rows(const float* xr, const int8_t* wp, const float* sp, float* yr, int64_t K,
                      int64_t n0, int64_t n1) {
  int64_t n = n0;
#ifdef LB_AVX2
  if (K % 8 == 0) {
    for (; n + 4 <= n1; n += 4) {
      const int8_t* w0 = wp + n * K;
      const char* next = (const char*)(w0 + 8 * K);
      for (int64_t c = 0; c < 4 * K; c += 64) _mm_prefetch(next + c, _MM_HINT_T0);
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      for (int64_t k = 0; k < K; k += 8) {
        __m256 xv = _mm256_loadu_ps(xr + k);
        a0 = _mm256_fmadd_ps(cvt8_i8(w0 + k), xv, a0);
        a1 = _mm256_fmadd_ps(cvt8_i8(w0 + K + k), xv, a1);
        a2 = _mm256_fmadd_ps(cvt8_i8(w0 + 2 * K + k), xv, a2);
        a3 = _mm256_fmadd_ps(cvt8_i8(w0 + 3 * K + k), xv, a3);
      }
      yr[n] = hsum8(a0) * sp[n];
      yr[n + 1] = hsum8(a1) * sp[n + 1];
      yr[n + 2] = hsum8(a2) * sp[n + 2];
      yr[n + 3] = hsum8(a3) * sp[n + 3];
    }
  }
#endif
  for (; n < n1; ++n) {
    const int8_t* wr = wp + n * K;
    float acc = 0.f;
    for (int64_t k = 0; k < K; ++k) acc += xr[k] * (float)wr[k];
    yr[n] = acc * sp[n];
  }
}

void lowbit_int8_mm(const float* x, const int8_t* w, const float* s, float* y, int64_t R,
                    int64_t K, int64_t N, int threads) {
  for (int64_t r = 0; r < R; ++r) {
#pragma omp parallel for num_threads(threads) if (threads > 1) schedule(static)
    for (int64_t c = 0; c < (N + 63) / 64; ++c) {
      int64_t n0 = c * 64, n1 = n0 + 64 < N ? n0 + 64 : N;
      int8_rows(x + r * K, w, s, y + r * N, K, n0, n1);
    }
  }
}

/* The code of weight k in a row of lane-interleaved codes (uint32 per 8 weights). */
static inline uint32_t code_at(const uint32_t* row, int64_t k) {
  const int64_t b = k / 64, i = k % 64;
  return (row[b * 8 + (i % 8)] >> (4 * (i / 8))) & 0xF;
}

static void int4_rows(const float* xr, const float* xsr, const uint32_t* wp, const float* dp,
                      const float* mp, float* yr, int64_t K, int64_t G, int64_t g, int64_t n0,
                      int64_t n1) {
  const int64_t KW = K / 8; /* uint32 words per row */
  int64_t n = n0;
#ifdef LB_AVX2
  if (K % 64 == 0 && g % 64 == 0) {
    const __m256i mask = _mm256_set1_epi32(0xF);
    for (; n + 2 <= n1; n += 2) {
      const uint32_t* w0 = wp + n * KW;
      const uint32_t* w1 = w0 + KW;
      const char* next = (const char*)(w0 + 4 * KW);
      for (int64_t c = 0; c < 2 * KW * 4; c += 64) _mm_prefetch(next + c, _MM_HINT_T0);
      __m256 t0 = _mm256_setzero_ps(), t1 = t0;
      float m0 = 0.f, m1 = 0.f;
      for (int64_t j = 0; j < G; ++j) {
        const int64_t a = j * g, e = a + g < K ? a + g : K;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, b0 = a0, b1 = a0;
        for (int64_t k = a; k < e; k += 64) {
          __m256i v0 = _mm256_loadu_si256((const __m256i*)(w0 + k / 8));
          __m256i v1 = _mm256_loadu_si256((const __m256i*)(w1 + k / 8));
#define LB_STEP(J, A, B)                                                                 \
  {                                                                                      \
    __m256 xv = _mm256_loadu_ps(xr + k + 8 * J);                                         \
    A = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(v0, 4 * J), \
                                                            mask)), xv, A);             \
    B = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(v1, 4 * J), \
                                                            mask)), xv, B);             \
  }
          LB_STEP(0, a0, b0) LB_STEP(1, a1, b1) LB_STEP(2, a0, b0) LB_STEP(3, a1, b1)
          LB_STEP(4, a0, b0) LB_STEP(5, a1, b1) LB_STEP(6, a0, b0) LB_STEP(7, a1, b1)
#undef LB_STEP
        }
        t0 = _mm256_fmadd_ps(_mm256_set1_ps(dp[n * G + j]), _mm256_add_ps(a0, a1), t0);
        t1 = _mm256_fmadd_ps(_mm256_set1_ps(dp[(n + 1) * G + j]), _mm256_add_ps(b0, b1), t1);
        m0 += mp[n * G + j] * xsr[j];
        m1 += mp[(n + 1) * G + j] * xsr[j];
      }
      yr[n] = hsum8(t0) + m0;
      yr[n + 1] = hsum8(t1) + m1;
    }
  } else if (K % 64 == 0 && g % 32 == 0) {
    /* Groups of 32 (llama.cpp's Q4 blocks): half a 64-weight block each, lanes 0-3 or 4-7. */
    const __m256i mask = _mm256_set1_epi32(0xF);
    for (; n + 2 <= n1; n += 2) {
      const uint32_t* w0 = wp + n * KW;
      const uint32_t* w1 = w0 + KW;
      const char* next = (const char*)(w0 + 4 * KW);
      for (int64_t c = 0; c < 2 * KW * 4; c += 64) _mm_prefetch(next + c, _MM_HINT_T0);
      __m256 t0 = _mm256_setzero_ps(), t1 = t0;
      float m0 = 0.f, m1 = 0.f;
      for (int64_t j = 0; j < G; ++j) {
        const int64_t a = j * g, e = a + g < K ? a + g : K;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, b0 = a0, b1 = a0;
        for (int64_t k = a; k < e; k += 32) {
          const int64_t base = k & ~(int64_t)63;
          __m256i v0 = _mm256_loadu_si256((const __m256i*)(w0 + base / 8));
          __m256i v1 = _mm256_loadu_si256((const __m256i*)(w1 + base / 8));
#define LB_STEP(J, A, B)                                                                 \
  {                                                                                      \
    __m256 xv = _mm256_loadu_ps(xr + base + 8 * J);                                      \
    A = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(v0, 4 * J), \
                                                            mask)), xv, A);             \
    B = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(v1, 4 * J), \
                                                            mask)), xv, B);             \
  }
          if (k == base) {
            LB_STEP(0, a0, b0) LB_STEP(1, a1, b1) LB_STEP(2, a0, b0) LB_STEP(3, a1, b1)
          } else {
            LB_STEP(4, a0, b0) LB_STEP(5, a1, b1) LB_STEP(6, a0, b0) LB_STEP(7, a1, b1)
          }
#undef LB_STEP
        }
        t0 = _mm256_fmadd_ps(_mm256_set1_ps(dp[n * G + j]), _mm256_add_ps(a0, a1), t0);
        t1 = _mm256_fmadd_ps(_mm256_set1_ps(dp[(n + 1) * G + j]), _mm256_add_ps(b0, b1), t1);
        m0 += mp[n * G + j] * xsr[j];
        m1 += mp[(n + 1) * G + j] * xsr[j];
      }
      yr[n] = hsum8(t0) + m0;
      yr[n + 1] = hsum8(t1) + m1;
    }
  }
#endif
  for (; n < n1; ++n) {
    const uint32_t* wr = wp + n * KW;
    float acc = 0.f;
    for (int64_t j = 0; j < G; ++j) {
      const int64_t a = j * g, e = a + g < K ? a + g : K;
      float dot = 0.f;
      for (int64_t k = a; k < e; ++k) dot += (float)code_at(wr, k) * xr[k];
      acc += dp[n * G + j] * dot + mp[n * G + j] * xsr[j];
    }
    yr[n] = acc;
  }
}

/* xs: scratch of R * G floats (the group sums of x). K must be a multiple of 8. */
void lowbit_int4_mm(const float* x, const uint32_t* w, const float* d, const float* m,
                    float* xs, float* y, int64_t R, int64_t K, int64_t N, int64_t G, int64_t g,
                    int threads) {
  for (int64_t r = 0; r < R; ++r) {
    const float* xr = x + r * K;
    float* xsr = xs + r * G;
    for (int64_t j = 0; j < G; ++j) {
      const int64_t a = j * g, e = a + g < K ? a + g : K;
      float acc = 0.f;
      for (int64_t k = a; k < e; ++k) acc += xr[k];
      xsr[j] = acc;
    }
#pragma omp parallel for num_threads(threads) if (threads > 1) schedule(static)
    for (int64_t c = 0; c < (N + 63) / 64; ++c) {
      int64_t n0 = c * 64, n1 = n0 + 64 < N ? n0 + 64 : N;
      int4_rows(xr, xsr, w, d, m, y + r * N, K, G, g, n0, n1);
    }
  }
}
