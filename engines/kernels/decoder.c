/* Every decoder layer of one step in one call (engines/kernels/decoder.py): the same kernels
 * the model otherwise calls one at a time from Python, in the same order on the same data, so
 * the result is bit for bit the per-op path's. At decode a layer is ~10 kernel calls of
 * microseconds each; from Python each costs a ctypes call, its argument checks and a tensor
 * allocation, which on a small or low-bit model is a third of the step.
 *
 * Per layer (pre-norm, residual folded into the next norm):
 *
 *   h = rms(x + r) · w_attn          qkv = h · W_qkvᵀ, RoPE on the Q and K heads
 *   K, V -> the paged cache at `slots`, attention through the block tables -> a
 *   r = a · W_oᵀ                     h = rms(x + r) · w_mlp
 *   r = silu(h · W_gateᵀ) (h · W_upᵀ) · W_downᵀ
 *
 * and x += r after the last layer. Linears are fp32 (row-major or packed in panels), bf16,
 * INT8 or FP8 E4M3 (a scale per row), INT8 with a scale per group (Q8_0) or INT4
 * (lane-interleaved codes, a scale and a min per group), each run by its own kernel; a linear
 * with an input scale (AWQ's 1/s) multiplies its input by it first, and an affine INT8 one
 * subtracts its zero-point term after, as their Python calls do.
 *
 * Kernel timings (the step lab's op view): given a `timings` buffer, each kernel's start and
 * end are read from CLOCK_MONOTONIC into it (decoder.py: TIMING_KINDS names the slots); given
 * none, the only cost is one test of a null pointer per kernel.
 */
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <string.h>
#include <time.h>

enum {
  IL_W_F32 = 0, IL_W_BF16 = 1, IL_W_I8 = 2, IL_W_I4 = 3, IL_W_F32_PANELS = 4, IL_W_FP8 = 5,
  IL_W_I8G = 6
};
enum { IL_KV_F32 = 0, IL_KV_I8 = 1, IL_KV_FP8 = 2 };

typedef struct {
  int32_t kind, pad;
  const void* w;
  const float* scale; /* INT8, FP8: per row [n]; INT4, grouped INT8: d [n, n_groups] */
  const float* mins;  /* INT4: [n, n_groups] */
  int64_t n, k, n_groups, group_size;
  const float* in_scale; /* [k]: x ⊙ in_scale is what the weight multiplies; or null */
  const float* zero_term; /* INT8 affine: [n], y -= (Σ x) zero_term after the product; or null */
} il_linear;

typedef struct {
  const float* attn_norm;
  il_linear qkv, o;
  const float* mlp_norm;
  il_linear gate_up, down;
} il_layer;

typedef struct {
  int64_t n_layers, d_model, n_heads, n_kv_heads, d_head, d_ff;
  float eps, scale;
} il_model;

void il_skinny_f32(const float* x, const float* w, float* y, int64_t M, int64_t K, int64_t N,
                   int threads);
void il_panel_f32(const float* x, const float* p, float* y, int64_t M, int64_t K, int64_t N,
                  int threads);
void il_skinny_bf16(const float* x, const uint16_t* w, float* y, int64_t M, int64_t K,
                    int64_t N, int threads);
void il_skinny_i8(const float* x, const int8_t* q, const float* s, float* y, int64_t M,
                  int64_t K, int64_t N, int threads);
void il_skinny_fp8(const float* x, const uint8_t* q, const float* s, float* y, int64_t M,
                   int64_t K, int64_t N, int threads);
void il_skinny_i8g(const float* x, const int8_t* q, const float* d, float* y, int64_t M,
                   int64_t K, int64_t N, int64_t G, int64_t g, int threads);
void il_zero_point_sub(const float* x, const float* zt, float* y, int64_t M, int64_t K,
                       int64_t N);
void il_lowbit_int4(const float* x, const uint32_t* w, const float* d, const float* mn, float* y,
                    int64_t M, int64_t K, int64_t N, int64_t G, int64_t g, int threads);
void il_add_rms_norm(float* x, const float* r, const float* w, float* h, int64_t T, int64_t D,
                     float eps);
void il_rope(float* x, const float* cos_t, const float* sin_t, int64_t T, int64_t H, int64_t D,
             int64_t stride);
void il_silu_mul(const float* gu, float* out, int64_t T, int64_t F);
void il_write_kv(const float* k, const float* v, int64_t stride, const int64_t* slots, float* kc,
                 float* vc, int64_t T, int64_t Hkv, int64_t D, int64_t n_slots);
void il_write_kv_i8(const float* k, const float* v, int64_t stride, const int64_t* slots,
                    int8_t* kc, int8_t* vc, float* ks, float* vs, int64_t T, int64_t Hkv,
                    int64_t D, int64_t n_slots);
void il_paged_attention_f32(const float* q, const float* kv, const int32_t* tables,
                            const int32_t* qsl, const int64_t* positions, float* out, int64_t S,
                            int64_t H, int64_t Hkv, int64_t D, int64_t n_blocks, int64_t bs,
                            int64_t max_blocks, float scale, int threads);
void il_write_kv_fp8(const float* k, const float* v, int64_t stride, const int64_t* slots,
                     uint8_t* kc, uint8_t* vc, float* ks, float* vs, int64_t T, int64_t Hkv,
                     int64_t D, int64_t n_slots);
void il_paged_attention_fp8(const float* q, const uint8_t* kv, const float* kv_scales,
                            const int32_t* tables, const int32_t* qsl, const int64_t* positions,
                            float* out, int64_t S, int64_t H, int64_t Hkv, int64_t D,
                            int64_t n_blocks, int64_t bs, int64_t max_blocks, float scale,
                            int threads);
void il_paged_attention_i8(const float* q, const int8_t* kv, const float* kv_scales,
                           const int32_t* tables, const int32_t* qsl, const int64_t* positions,
                           float* out, int64_t S, int64_t H, int64_t Hkv, int64_t D,
                           int64_t n_blocks, int64_t bs, int64_t max_blocks, float scale,
                           int threads);

/* xs: room for M rows of the widest input, used where the linear scales its input. */
static void linear(const il_linear* L, const float* x, float* y, int64_t M, float* xs,
                   int threads) {
  if (L->in_scale) {
    for (int64_t t = 0; t < M; ++t)
      for (int64_t i = 0; i < L->k; ++i) xs[t * L->k + i] = x[t * L->k + i] * L->in_scale[i];
    x = xs;
  }
  switch (L->kind) {
    case IL_W_F32: il_skinny_f32(x, (const float*)L->w, y, M, L->k, L->n, threads); break;
    case IL_W_F32_PANELS: il_panel_f32(x, (const float*)L->w, y, M, L->k, L->n, threads); break;
    case IL_W_BF16: il_skinny_bf16(x, (const uint16_t*)L->w, y, M, L->k, L->n, threads); break;
    case IL_W_I8: il_skinny_i8(x, (const int8_t*)L->w, L->scale, y, M, L->k, L->n, threads); break;
    case IL_W_FP8:
      il_skinny_fp8(x, (const uint8_t*)L->w, L->scale, y, M, L->k, L->n, threads);
      break;
    case IL_W_I8G:
      il_skinny_i8g(x, (const int8_t*)L->w, L->scale, y, M, L->k, L->n, L->n_groups,
                    L->group_size, threads);
      break;
    default:
      il_lowbit_int4(x, (const uint32_t*)L->w, L->scale, L->mins, y, M, L->k, L->n, L->n_groups,
                     L->group_size, threads);
  }
  if (L->zero_term) il_zero_point_sub(x, L->zero_term, y, M, L->k, L->n);
}

/* Kernel slots per layer in a timings buffer, in the order they run (decoder.py:
 * TIMING_KINDS); one more slot after the last layer: the final residual add. */
enum {
  IL_T_ATTN_NORM, IL_T_QKV, IL_T_ROPE, IL_T_Q_COPY, IL_T_KV_WRITE, IL_T_ATTENTION, IL_T_O,
  IL_T_MLP_NORM, IL_T_GATE_UP, IL_T_SILU_MUL, IL_T_DOWN, IL_T_PER_LAYER
};

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* timings: null, or [0] the call's entry, then per slot j [1 + 2j] start and [2 + 2j] end (ns,
 * CLOCK_MONOTONIC); slot j = layer · IL_T_PER_LAYER + kind, the final add at
 * n_layers · IL_T_PER_LAYER. */
#define TIC(slot) \
  if (timings) timings[1 + 2 * (slot)] = now_ns()
#define TOC(slot) \
  if (timings) timings[2 + 2 * (slot)] = now_ns()

/* The floats of scratch one token needs (decoder.py allocates T times this). */
int64_t il_decoder_scratch(const il_model* m) {
  const int64_t qd = m->n_heads * m->d_head, kvd = m->n_kv_heads * m->d_head;
  int64_t widest = m->d_model > qd ? m->d_model : qd; /* a linear's input, scaled */
  widest = widest > m->d_ff ? widest : m->d_ff;
  return 2 * m->d_model + (qd + 2 * kvd) + 2 * qd + 3 * m->d_ff + widest;
}

/* x [T, d_model] the residual stream (updated in place); cos, sin [T, d_head]; slots [T]
 * (checked by the caller); tables, qsl, positions as il_paged_attention's; kv the cache's
 * [n_layers, 2, Hkv, n_blocks, bs, d_head] (fp32, or INT8 or E4M3 codes with kv_scales
 * [n_layers, 2, Hkv, n_blocks, bs]). */
void il_decoder_layers(const il_model* m, const il_layer* layers, float* x, int64_t T,
                       const float* cos_t, const float* sin_t, const int64_t* slots,
                       const int32_t* tables, const int32_t* qsl, const int64_t* positions,
                       int64_t S, int64_t max_blocks, int32_t kv_kind, void* kv,
                       float* kv_scales, int64_t n_blocks, int64_t bs, float* scratch,
                       int threads, int64_t* timings) {
  if (timings) timings[0] = now_ns();
  const int64_t D = m->d_model, H = m->n_heads, Hkv = m->n_kv_heads, Dh = m->d_head;
  const int64_t qd = H * Dh, kvd = Hkv * Dh, qkvd = qd + 2 * kvd, F = m->d_ff;
  const int64_t n_slots = n_blocks * bs, store = Hkv * n_slots * Dh; /* K or V of a layer */
  float* h = scratch;
  float* qkv = h + T * D;
  float* q = qkv + T * qkvd;
  float* att = q + T * qd;
  float* res = att + T * qd;
  float* gu = res + T * D;
  float* act = gu + T * 2 * F;
  float* xs = act + T * F;
  const float* r = 0;
  for (int64_t l = 0; l < m->n_layers; ++l) {
    const il_layer* L = layers + l;
    const int64_t j = l * IL_T_PER_LAYER;
    TIC(j + IL_T_ATTN_NORM);
    il_add_rms_norm(x, r, L->attn_norm, h, T, D, m->eps);
    TOC(j + IL_T_ATTN_NORM);
    TIC(j + IL_T_QKV);
    linear(&L->qkv, h, qkv, T, xs, threads);
    TOC(j + IL_T_QKV);
    TIC(j + IL_T_ROPE);
    il_rope(qkv, cos_t, sin_t, T, H + Hkv, Dh, qkvd);
    TOC(j + IL_T_ROPE);
    TIC(j + IL_T_Q_COPY);
    for (int64_t t = 0; t < T; ++t) memcpy(q + t * qd, qkv + t * qkvd, (size_t)qd * sizeof(float));
    TOC(j + IL_T_Q_COPY);
    if (kv_kind == IL_KV_FP8) {
      uint8_t* codes = (uint8_t*)kv + l * 2 * store;
      float* sc = kv_scales + l * 2 * Hkv * n_slots;
      TIC(j + IL_T_KV_WRITE);
      il_write_kv_fp8(qkv + qd, qkv + qd + kvd, qkvd, slots, codes, codes + store, sc,
                      sc + Hkv * n_slots, T, Hkv, Dh, n_slots);
      TOC(j + IL_T_KV_WRITE);
      TIC(j + IL_T_ATTENTION);
      il_paged_attention_fp8(q, codes, sc, tables, qsl, positions, att, S, H, Hkv, Dh,
                             n_blocks, bs, max_blocks, m->scale, threads);
      TOC(j + IL_T_ATTENTION);
    } else if (kv_kind == IL_KV_I8) {
      int8_t* codes = (int8_t*)kv + l * 2 * store;
      float* sc = kv_scales + l * 2 * Hkv * n_slots;
      TIC(j + IL_T_KV_WRITE);
      il_write_kv_i8(qkv + qd, qkv + qd + kvd, qkvd, slots, codes, codes + store, sc,
                     sc + Hkv * n_slots, T, Hkv, Dh, n_slots);
      TOC(j + IL_T_KV_WRITE);
      TIC(j + IL_T_ATTENTION);
      il_paged_attention_i8(q, codes, sc, tables, qsl, positions, att, S, H, Hkv, Dh, n_blocks,
                            bs, max_blocks, m->scale, threads);
      TOC(j + IL_T_ATTENTION);
    } else {
      float* kvl = (float*)kv + l * 2 * store;
      TIC(j + IL_T_KV_WRITE);
      il_write_kv(qkv + qd, qkv + qd + kvd, qkvd, slots, kvl, kvl + store, T, Hkv, Dh, n_slots);
      TOC(j + IL_T_KV_WRITE);
      TIC(j + IL_T_ATTENTION);
      il_paged_attention_f32(q, kvl, tables, qsl, positions, att, S, H, Hkv, Dh, n_blocks, bs,
                             max_blocks, m->scale, threads);
      TOC(j + IL_T_ATTENTION);
    }
    TIC(j + IL_T_O);
    linear(&L->o, att, res, T, xs, threads);
    TOC(j + IL_T_O);
    TIC(j + IL_T_MLP_NORM);
    il_add_rms_norm(x, res, L->mlp_norm, h, T, D, m->eps);
    TOC(j + IL_T_MLP_NORM);
    TIC(j + IL_T_GATE_UP);
    linear(&L->gate_up, h, gu, T, xs, threads);
    TOC(j + IL_T_GATE_UP);
    TIC(j + IL_T_SILU_MUL);
    il_silu_mul(gu, act, T, F);
    TOC(j + IL_T_SILU_MUL);
    TIC(j + IL_T_DOWN);
    linear(&L->down, act, res, T, xs, threads);
    TOC(j + IL_T_DOWN);
    r = res;
  }
  if (r) {
    const int64_t last = m->n_layers * IL_T_PER_LAYER;
    TIC(last);
    for (int64_t i = 0; i < T * D; ++i) x[i] += r[i];
    TOC(last);
  }
}
