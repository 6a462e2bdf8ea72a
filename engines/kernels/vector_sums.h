/* The vector type every kernel of the native library uses, lane sums over it, and e^x.
 *
 * vf is a GCC vector extension of IL_VLEN floats: the build picks IL_VLEN (16 for AVX-512,
 * 8 for AVX2, 4 for the portable build) and the compiler emits that instruction set. */
#ifndef IL_VECTOR_SUMS_H
#define IL_VECTOR_SUMS_H

#include <math.h>
#include <stdint.h>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#ifndef IL_VLEN
#define IL_VLEN 4
#endif

typedef float vf __attribute__((vector_size(IL_VLEN * 4)));
typedef float vfu __attribute__((vector_size(IL_VLEN * 4), aligned(4)));

static inline float il_hsum(vf v) {
  float s = 0.f;
  for (int i = 0; i < IL_VLEN; ++i) s += v[i];
  return s;
}

/* The lane sums of four vectors at once (a shuffle-add tree, not 4 serial reductions). */
#define SH __builtin_shufflevector
static inline void il_hsum4(vf a, vf b, vf c, vf d, float* out) {
#if IL_VLEN == 16
  vf ab = SH(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
          SH(a, b, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
  vf cd = SH(c, d, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
          SH(c, d, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
  vf s = SH(ab, cd, 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27) +
         SH(ab, cd, 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
  s += SH(s, s, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
  s += SH(s, s, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
  out[0] = s[0], out[1] = s[4], out[2] = s[8], out[3] = s[12];
#elif IL_VLEN == 8
  vf ab = SH(a, b, 0, 1, 2, 3, 8, 9, 10, 11) + SH(a, b, 4, 5, 6, 7, 12, 13, 14, 15);
  vf cd = SH(c, d, 0, 1, 2, 3, 8, 9, 10, 11) + SH(c, d, 4, 5, 6, 7, 12, 13, 14, 15);
  vf s = SH(ab, cd, 0, 1, 4, 5, 8, 9, 12, 13) + SH(ab, cd, 2, 3, 6, 7, 10, 11, 14, 15);
  s += SH(s, s, 1, 0, 3, 2, 5, 4, 7, 6);
  out[0] = s[0], out[1] = s[2], out[2] = s[4], out[3] = s[6];
#elif IL_VLEN == 4
  vf ab = SH(a, b, 0, 1, 4, 5) + SH(a, b, 2, 3, 6, 7);
  vf cd = SH(c, d, 0, 1, 4, 5) + SH(c, d, 2, 3, 6, 7);
  vf s = SH(ab, cd, 0, 2, 4, 6) + SH(ab, cd, 1, 3, 5, 7);
  out[0] = s[0], out[1] = s[1], out[2] = s[2], out[3] = s[3];
#else
  out[0] = il_hsum(a), out[1] = il_hsum(b), out[2] = il_hsum(c), out[3] = il_hsum(d);
#endif
}
#undef SH

/* IL_VLEN int8 values widened to floats (GCC scalarizes a vector int8 -> int32 conversion,
 * so the sign-extending load is named where the ISA has it). */
typedef int8_t il_vb_ __attribute__((vector_size(IL_VLEN), aligned(1)));
typedef int32_t il_vi_ __attribute__((vector_size(IL_VLEN * 4)));
static inline vf il_load_i8(const int8_t* p) {
#if IL_VLEN == 16 && defined(__AVX512F__)
  return __builtin_convertvector((il_vi_)_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)p)),
                                 vf);
#elif IL_VLEN == 8 && defined(__AVX2__)
  return __builtin_convertvector(
      (il_vi_)_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)p)), vf);
#else
  return __builtin_convertvector(__builtin_convertvector(*(const il_vb_*)p, il_vi_), vf);
#endif
}

/* IL_VLEN FP8 E4M3 codes (1 sign, 4 exponent bits biased by 7, 3 mantissa bits; no inf) as
 * floats, exactly: the code's 7 magnitude bits shifted into a float's exponent and mantissa
 * with the bias moved from 7 to 127; a subnormal code (exponent 0, m · 2^-9) comes out as
 * 2^-7 (1 + m/8) that way and is mapped by 2x - 2^-6, so no float subnormal is ever made (a
 * thread with denormals-are-zero set reads the same). */
typedef uint8_t il_vub_ __attribute__((vector_size(IL_VLEN), aligned(1)));
static inline vf il_load_e4m3(const uint8_t* p) {
#if IL_VLEN == 16 && defined(__AVX512F__)
  const il_vi_ c = (il_vi_)_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)p));
#elif IL_VLEN == 8 && defined(__AVX2__)
  const il_vi_ c = (il_vi_)_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)p));
#else
  const il_vi_ c = __builtin_convertvector(*(const il_vub_*)p, il_vi_);
#endif
  const vf normal = (vf)(((c & 0x7F) << 20) + (120 << 23));
  const il_vi_ sub = (c & 0x78) == 0; /* lanes of -1 where the exponent is 0 */
  const vf subnormal = normal * 2.0f - 0x1p-6f;
  const il_vi_ mag = ((il_vi_)normal & ~sub) | ((il_vi_)subnormal & sub);
  typedef uint32_t vu_ __attribute__((vector_size(IL_VLEN * 4)));
  return (vf)(mag | (il_vi_)((vu_)(c & 0x80) << 24)); /* unsigned: the sign bit by a shift */
}

/* One E4M3 code as a float (the tail of a row il_load_e4m3 does not cover). */
static inline float il_load_e4m3_one(uint8_t c) {
  const int e = (c >> 3) & 15, m = c & 7;
  const float mag = e ? ldexpf(1.0f + m / 8.0f, e - 7) : m * 0x1p-9f;
  return c & 0x80 ? -mag : mag;
}

/* e^x lane by lane: 2^(x log2 e) split into the nearest integer power, set in the exponent
 * bits, and 2^f for f in [-1/2, 1/2] by its degree-6 Taylor polynomial (truncation ~1.2e-7,
 * ~2.4e-7 relative with fp32 rounding; a polynomial over [0, 1) instead reaches 5.6e-6); x is
 * clamped to [-87, 88] first (below, the result is ~0: 1.6e-38; above, 1.6e38, not inf). */
static inline vf il_vexp(vf x) {
  typedef int32_t vi_ __attribute__((vector_size(IL_VLEN * 4)));
  const vf lo = (vf){0} - 87.0f, hi = (vf){0} + 88.0f;
  vi_ m = x < lo; /* lanes of -1 where true (C has no vector ?:) */
  x = (vf)(((vi_)x & ~m) | ((vi_)lo & m));
  m = x > hi;
  x = (vf)(((vi_)x & ~m) | ((vi_)hi & m));
  const vf t = x * 1.44269504088896341f;
  const vf th = t + 0.5f;
  vi_ i = __builtin_convertvector(th, vi_);
  i += __builtin_convertvector(i, vf) > th; /* floor(t + 1/2): truncation rounds negatives up */
  const vf f = t - __builtin_convertvector(i, vf);
  vf p = f * 1.5403530393381606e-4f + 1.3333558146428441e-3f;
  p = p * f + 9.6181291076284772e-3f;
  p = p * f + 5.5504108664821576e-2f;
  p = p * f + 2.4022650695910071e-1f;
  p = p * f + 6.9314718055994531e-1f;
  p = p * f + 1.0f;
  const vi_ bits = (i + 127) << 23;
  return p * (vf)bits;
}

#endif
