/* The small ops between a decoder layer's matrix products, fused (fp32 rows of T tokens): each
 * is a handful of torch calls (and their dispatch, allocations and copies) done here in one
 * pass over the data, which at decode is a few kilobytes.
 *
 *   il_add_rms_norm   x += r (when r is given); h = x / sqrt(mean(x²) + eps) * w
 *   il_rope           rotate-half RoPE in place on the first H heads of each row:
 *                     x[i] = x[i] cos[i] + x[(i + D/2) mod D] sin_signed[i]
 *   il_silu_mul       out[t, f] = silu(gu[t, f]) * gu[t, F + f]   (SwiGLU's gate and up)
 *   il_write_kv       K and V rows of T tokens into a paged fp32 cache at their flat slots
 *   il_write_kv_i8    the same into an INT8 cache: per token and head s = max|x| / 127 (1 for
 *                     all zeros), codes round(x / s) (half to even) clamped to ±127, as
 *                     engines/kv/cache.py's QuantizedPagedKVCache.quantize does in torch
 *   il_write_kv_fp8   the same into an FP8 E4M3 cache: s = max|x| / 448, codes x / s clamped to
 *                     ±448 and rounded to E4M3 (half to even), bit for bit torch's conversion
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "vector_sums.h"

static inline vf ld(const float* p) { return *(const vfu*)p; }
static inline void st(float* p, vf v) { *(vfu*)p = v; }

void il_add_rms_norm(float* x, const float* r, const float* w, float* h, int64_t T, int64_t D,
                     float eps) {
  const int64_t DV = D - D % IL_VLEN;
  for (int64_t t = 0; t < T; ++t) {
    float* xt = x + t * D;
    float* ht = h + t * D;
    vf acc = (vf){0};
    float tail = 0.f;
    if (r) {
      const float* rt = r + t * D;
      for (int64_t i = 0; i < DV; i += IL_VLEN) {
        const vf v = ld(xt + i) + ld(rt + i);
        st(xt + i, v);
        acc += v * v;
      }
      for (int64_t i = DV; i < D; ++i) xt[i] += rt[i], tail += xt[i] * xt[i];
    } else {
      for (int64_t i = 0; i < DV; i += IL_VLEN) acc += ld(xt + i) * ld(xt + i);
      for (int64_t i = DV; i < D; ++i) tail += xt[i] * xt[i];
    }
    /* as torch: the mean of squares in fp32, then its reciprocal square root */
    const float inv = 1.0f / sqrtf((il_hsum(acc) + tail) / (float)D + eps);
    for (int64_t i = 0; i < DV; i += IL_VLEN) st(ht + i, ld(xt + i) * inv * ld(w + i));
    for (int64_t i = DV; i < D; ++i) ht[i] = xt[i] * inv * w[i];
  }
}

/* x: T rows of `stride` floats; heads 0..H-1 of width D (even) at the row's start. cos and
 * sin_signed: [T, D], the tables at each token's position. */
void il_rope(float* x, const float* cos_t, const float* sin_t, int64_t T, int64_t H, int64_t D,
             int64_t stride) {
  const int64_t half = D / 2;
  float tmp[512];
  for (int64_t t = 0; t < T; ++t) {
    const float* c = cos_t + t * D;
    const float* s = sin_t + t * D;
    for (int64_t hd = 0; hd < H; ++hd) {
      float* v = x + t * stride + hd * D;
      memcpy(tmp, v, (size_t)D * sizeof(float));
      int64_t i = 0;
      for (; i + IL_VLEN <= half; i += IL_VLEN) {
        st(v + i, ld(tmp + i) * ld(c + i) + ld(tmp + half + i) * ld(s + i));
        st(v + half + i, ld(tmp + half + i) * ld(c + half + i) + ld(tmp + i) * ld(s + half + i));
      }
      for (; i < half; ++i) {
        v[i] = tmp[i] * c[i] + tmp[half + i] * s[i];
        v[half + i] = tmp[half + i] * c[half + i] + tmp[i] * s[half + i];
      }
    }
  }
}

void il_silu_mul(const float* gu, float* out, int64_t T, int64_t F) {
  for (int64_t t = 0; t < T; ++t) {
    const float* g = gu + t * 2 * F;
    const float* u = g + F;
    float* o = out + t * F;
    int64_t f = 0;
    for (; f + IL_VLEN <= F; f += IL_VLEN) {
      const vf gv = ld(g + f);
      st(o + f, gv / (1.f + il_vexp(-gv)) * ld(u + f));
    }
    for (; f < F; ++f) o[f] = g[f] / (1.f + expf(-g[f])) * u[f];
  }
}

/* k, v: T rows of `stride` floats, Hkv heads of D each; kc, vc: [Hkv, n_slots, D]. */
void il_write_kv(const float* k, const float* v, int64_t stride, const int64_t* slots, float* kc,
                 float* vc, int64_t T, int64_t Hkv, int64_t D, int64_t n_slots) {
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < Hkv; ++h) {
      const int64_t at = (h * n_slots + slots[t]) * D;
      memcpy(kc + at, k + t * stride + h * D, (size_t)D * sizeof(float));
      memcpy(vc + at, v + t * stride + h * D, (size_t)D * sizeof(float));
    }
}

/* A head's scale: max|x| / q_max, or 1 where every value is 0. */
static float row_scale(const float* x, int64_t D, float q_max) {
  float amax = 0.f;
  for (int64_t d = 0; d < D; ++d) amax = fabsf(x[d]) > amax ? fabsf(x[d]) : amax;
  return amax > 0.f ? amax / q_max : 1.0f;
}

static void quantize_row_i8(const float* x, void* codes, float* s, int64_t D) {
  int8_t* c = (int8_t*)codes;
  const float sc = row_scale(x, D, 127.0f);
  for (int64_t d = 0; d < D; ++d) {
    float q = nearbyintf(x[d] / sc);
    c[d] = (int8_t)(q > 127.f ? 127.f : q < -127.f ? -127.f : q);
  }
  *s = sc;
}

/* The E4M3 code of y, |y| <= 448 (the caller clamps): round to nearest, half to even. */
static inline uint8_t e4m3_code(float y) {
  uint32_t b;
  memcpy(&b, &y, sizeof b);
  const uint8_t sign = (uint8_t)((b >> 24) & 0x80);
  const float a = fabsf(y);
  if (!(a >= 0x1p-6f)) /* subnormal codes: multiples of 2^-9 (8 · 2^-9 is the least normal) */
    return sign | (uint8_t)nearbyintf(a * 0x1p9f);
  memcpy(&b, &a, sizeof b);
  b += 0x7FFFF + ((b >> 20) & 1); /* the mantissa to 3 bits, half to even; a carry moves e */
  return sign | (uint8_t)((((b >> 23) - 120) << 3) | ((b >> 20) & 7));
}

static void quantize_row_fp8(const float* x, void* codes, float* s, int64_t D) {
  uint8_t* c = (uint8_t*)codes;
  const float sc = row_scale(x, D, 448.0f);
  for (int64_t d = 0; d < D; ++d) {
    const float y = x[d] / sc;
    c[d] = e4m3_code(y > 448.f ? 448.f : y < -448.f ? -448.f : y);
  }
  *s = sc;
}

/* k, v as il_write_kv's; kc, vc: one-byte codes [Hkv, n_slots, D]; ks, vs: fp32
 * [Hkv, n_slots]; each token's head quantized by `row`. */
static void write_codes(void (*row)(const float*, void*, float*, int64_t), const float* k,
                        const float* v, int64_t stride, const int64_t* slots, uint8_t* kc,
                        uint8_t* vc, float* ks, float* vs, int64_t T, int64_t Hkv, int64_t D,
                        int64_t n_slots) {
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < Hkv; ++h) {
      const int64_t at = h * n_slots + slots[t];
      row(k + t * stride + h * D, kc + at * D, ks + at, D);
      row(v + t * stride + h * D, vc + at * D, vs + at, D);
    }
}

/* write_codes with E4M3 codes. */
void il_write_kv_fp8(const float* k, const float* v, int64_t stride, const int64_t* slots,
                     uint8_t* kc, uint8_t* vc, float* ks, float* vs, int64_t T, int64_t Hkv,
                     int64_t D, int64_t n_slots) {
  write_codes(quantize_row_fp8, k, v, stride, slots, kc, vc, ks, vs, T, Hkv, D, n_slots);
}

/* write_codes with INT8 codes. */
void il_write_kv_i8(const float* k, const float* v, int64_t stride, const int64_t* slots,
                    int8_t* kc, int8_t* vc, float* ks, float* vs, int64_t T, int64_t Hkv,
                    int64_t D, int64_t n_slots) {
  write_codes(quantize_row_i8, k, v, stride, slots, (uint8_t*)kc, (uint8_t*)vc, ks, vs, T, Hkv,
              D, n_slots);
}
