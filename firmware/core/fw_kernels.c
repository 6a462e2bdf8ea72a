/* INT8 kernels with TFLM's reference arithmetic.
 *
 * Each one mirrors a kernel of engines/mcu/kernels (itself bit-exact with TFLM): the same
 * loops over NHWC tensors, taps outside the image skipped, int32 accumulation, then
 * MultiplyByQuantizedMultiplier per output channel, the output zero point and the fused
 * activation's clamp. Every constant a kernel needs (multipliers, shifts, clamps, softmax
 * and ADD parameters) was computed on the host by the same Python code that the
 * interpreter uses, so only integer work is left here. No allocation, no libc.
 */
#include "fw_kernels.h"

#include "fw_fixed.h"

void fw_copy(void *dst, const void *src, uint32_t n)
{
    uint8_t *d = (uint8_t *)dst;
    const uint8_t *s = (const uint8_t *)src;
    if (d == s || n == 0) {
        return;
    }
    if (d < s) {
        for (uint32_t i = 0; i < n; i++) {
            d[i] = s[i];
        }
    } else {
        for (uint32_t i = n; i > 0; i--) {
            d[i - 1] = s[i - 1];
        }
    }
}

void fw_fill(void *dst, uint8_t value, uint32_t n)
{
    volatile uint8_t *d = (volatile uint8_t *)dst; /* volatile: no call to memset */
    for (uint32_t i = 0; i < n; i++) {
        d[i] = value;
    }
}

/* Taps k in [*lo, *hi) of a window starting at `origin` (stride of `dilation`) that land
 * inside 0..size-1. */
static void tap_range(int origin, int dilation, int taps, int size, int *lo, int *hi)
{
    int l = origin < 0 ? (-origin + dilation - 1) / dilation : 0;
    int h = taps;
    const int room = size - origin;
    if (room <= 0) {
        h = 0;
    } else {
        const int fit = (room + dilation - 1) / dilation;
        if (fit < h) {
            h = fit;
        }
    }
    if (l > h) {
        l = h;
    }
    *lo = l;
    *hi = h;
}

static inline int8_t requantize8(int32_t acc, int32_t multiplier, int shift, int32_t offset,
                                 int32_t lo, int32_t hi)
{
    return (int8_t)fw_clamp(fw_mbqm(acc, multiplier, shift) + offset, lo, hi);
}

/* CONV_2D and DEPTHWISE_CONV_2D: one arithmetic. For every output pixel and channel oc,
 * acc = sum over the taps inside the image of f * (x + input_offset), + bias, then
 * requantize8. Output channel oc reads the `fc` input channels from (oc / per_group) * fc;
 * its filter value for tap (ky, kx), channel c is filter[oc * s_oc + ky * s_ky + kx * s_kx
 * + c]. The two ops differ only in those numbers (see the callers). Always inlined, so that
 * each caller's constants specialise the loops (depthwise's one-channel loop disappears). */
static inline __attribute__((always_inline)) void conv_window_int8(
    const fw_conv_t *p, const int8_t *in, int8_t *out, const int fc, const int per_group,
    const int s_oc, const int s_ky, const int s_kx)
{
    /* Parameters in locals: stores through int8_t * may alias *p, which would make the
     * compiler reload every field in the inner loops. */
    const int in_h = p->in_h, in_w = p->in_w, in_c = p->in_c;
    const int out_c = p->out_c, k_h = p->k_h, k_w = p->k_w;
    const int out_h = p->out_h, out_w = p->out_w, batches = p->batches;
    const int stride_h = p->stride_h, stride_w = p->stride_w;
    const int dil_h = p->dilation_h, dil_w = p->dilation_w, pad_h = p->pad_h, pad_w = p->pad_w;
    const int groups = out_c / per_group;
    const int32_t in_off = p->input_offset, out_off = p->output_offset;
    const int32_t act_min = p->act_min, act_max = p->act_max;
    const int8_t *const filter = p->filter;
    const int32_t *const bias = p->bias, *const mult = p->multiplier;
    const int8_t *const shift = p->shift;
    for (int b = 0; b < batches; b++) {
        for (int oy = 0; oy < out_h; oy++) {
            const int y0 = oy * stride_h - pad_h;
            int ky0, ky1;
            tap_range(y0, dil_h, k_h, in_h, &ky0, &ky1);
            for (int ox = 0; ox < out_w; ox++) {
                const int x0 = ox * stride_w - pad_w;
                int kx0, kx1;
                tap_range(x0, dil_w, k_w, in_w, &kx0, &kx1);
                int8_t *o = out + ((b * out_h + oy) * out_w + ox) * out_c;
                for (int g = 0; g < groups; g++) {
                    const int ic0 = g * fc;
                    for (int oc = g * per_group; oc < (g + 1) * per_group; oc++) {
                        /* sum f * (x + off) = sum f * x + off * sum f (exact in wrapping
                         * int32) */
                        int32_t acc = 0, filter_sum = 0;
                        for (int ky = ky0; ky < ky1; ky++) {
                            const int iy = y0 + ky * dil_h;
                            const int8_t *row = in + ((b * in_h + iy) * in_w) * in_c + ic0;
                            const int8_t *frow = filter + oc * s_oc + ky * s_ky;
                            for (int kx = kx0; kx < kx1; kx++) {
                                const int8_t *x = row + (x0 + kx * dil_w) * in_c;
                                const int8_t *f = frow + kx * s_kx;
                                for (int c = 0; c < fc; c++) {
                                    acc += (int32_t)f[c] * (int32_t)x[c];
                                    filter_sum += f[c];
                                }
                            }
                        }
                        acc += in_off * filter_sum;
                        if (bias) {
                            acc += bias[oc];
                        }
                        o[oc] = requantize8(acc, mult[oc], shift[oc], out_off, act_min, act_max);
                    }
                }
            }
        }
    }
}

/* Filter (out_c, k_h, k_w, filter_c); groups of out_c / (in_c / filter_c) output channels
 * each read filter_c input channels. */
void fw_conv_int8(const fw_conv_t *p, const int8_t *in, int8_t *out)
{
    const int fc = p->filter_c;
    conv_window_int8(p, in, out, fc, p->out_c / (p->in_c / fc), p->k_h * p->k_w * fc,
                     p->k_w * fc, fc);
}

/* Filter (1, k_h, k_w, out_c); output channel ic * depth_multiplier + m reads input
 * channel ic alone. */
void fw_depthwise_int8(const fw_conv_t *p, const int8_t *in, int8_t *out)
{
    conv_window_int8(p, in, out, 1, p->depth_multiplier, 1, p->k_w * p->out_c, p->out_c);
}

void fw_fully_connected_int8(const fw_fc_t *p, const int8_t *in, int8_t *out)
{
    const uint32_t depth = p->depth, units = p->units, batches = p->batches;
    const int32_t in_off = p->input_offset, f_off = p->filter_offset;
    const int32_t out_off = p->output_offset, act_min = p->act_min, act_max = p->act_max;
    const int8_t *const filter = p->filter;
    const int32_t *const bias = p->bias, *const mult = p->multiplier;
    const int8_t *const shift = p->shift;
    const int per_channel = p->per_channel;
    for (uint32_t b = 0; b < batches; b++) {
        const int8_t *x = in + b * depth;
        for (uint32_t u = 0; u < units; u++) {
            const int8_t *w = filter + u * depth;
            int32_t acc = 0;
            for (uint32_t d = 0; d < depth; d++) {
                acc += ((int32_t)w[d] + f_off) * ((int32_t)x[d] + in_off);
            }
            if (bias) {
                acc += bias[u];
            }
            const uint32_t k = per_channel ? u : 0;
            out[b * units + u] = requantize8(acc, mult[k], shift[k], out_off, act_min, act_max);
        }
    }
}

static void pool(const fw_pool_t *p, const int8_t *in, int8_t *out, int average)
{
    const int in_h = p->in_h, in_w = p->in_w, ch = p->channels;
    for (int b = 0; b < p->batches; b++) {
        for (int oy = 0; oy < p->out_h; oy++) {
            const int y0 = oy * p->stride_h - p->pad_h;
            const int fy0 = y0 < 0 ? -y0 : 0;
            const int fy1 = p->filter_h < in_h - y0 ? p->filter_h : in_h - y0;
            for (int ox = 0; ox < p->out_w; ox++) {
                const int x0 = ox * p->stride_w - p->pad_w;
                const int fx0 = x0 < 0 ? -x0 : 0;
                const int fx1 = p->filter_w < in_w - x0 ? p->filter_w : in_w - x0;
                int8_t *o = out + ((b * p->out_h + oy) * p->out_w + ox) * ch;
                for (int c = 0; c < ch; c++) {
                    int32_t acc = average ? 0 : -128;
                    for (int fy = fy0; fy < fy1; fy++) {
                        const int8_t *row = in + ((b * in_h + y0 + fy) * in_w) * ch + c;
                        for (int fx = fx0; fx < fx1; fx++) {
                            const int32_t v = row[(x0 + fx) * ch];
                            if (average) {
                                acc += v;
                            } else if (v > acc) {
                                acc = v;
                            }
                        }
                    }
                    if (average) {
                        const int32_t n = (fy1 - fy0) * (fx1 - fx0);
                        if (n <= 0) {
                            acc = 0;
                        } else {
                            /* round half away from zero; C division truncates */
                            acc = (acc > 0 ? acc + n / 2 : acc - n / 2) / n;
                        }
                    }
                    o[c] = (int8_t)fw_clamp(acc, p->act_min, p->act_max);
                }
            }
        }
    }
}

void fw_average_pool_int8(const fw_pool_t *p, const int8_t *in, int8_t *out)
{
    pool(p, in, out, 1);
}

void fw_max_pool_int8(const fw_pool_t *p, const int8_t *in, int8_t *out)
{
    pool(p, in, out, 0);
}

/* ---- softmax: gemmlowp fixed point ---------------------------------------------------- */

#define SOFTMAX_DIFF_INTEGER_BITS 5
#define SOFTMAX_ACCUMULATION_INTEGER_BITS 12

static int32_t sat_rounding_mul_pot(int32_t x, int exponent)
{
    if (exponent == 0) {
        return x;
    }
    if (exponent < 0) {
        return fw_rdbpot(x, -exponent);
    }
    const int32_t threshold = (int32_t)((1u << (31 - exponent)) - 1u);
    if (x > threshold) {
        return FW_INT32_MAX;
    }
    if (x < -threshold) {
        return FW_INT32_MIN;
    }
    return fw_shl32(x, exponent);
}

static inline int32_t add_wrap(int32_t a, int32_t b)
{
    return (int32_t)((uint32_t)a + (uint32_t)b);
}

/* exp(a) for a in [-1/4, 0), Q0.31 in and out: Taylor series around -1/8. */
static int32_t exp_quarter_interval(int32_t a)
{
    const int32_t exp_minus_one_eighth = 1895147668;
    const int32_t one_third = 715827883;
    const int32_t x = add_wrap(a, 1 << 28);
    const int32_t x2 = fw_srdhm(x, x);
    const int32_t x3 = fw_srdhm(x2, x);
    const int32_t x4 = fw_srdhm(x2, x2);
    const int32_t x4_over_4 = fw_rdbpot(x4, 2);
    const int32_t inner = add_wrap(fw_srdhm(add_wrap(x4_over_4, x3), one_third), x2);
    const int32_t poly = fw_rdbpot(inner, 1);
    return add_wrap(exp_minus_one_eighth,
                    fw_srdhm(exp_minus_one_eighth, add_wrap(x, poly)));
}

/* exp(a) for a <= 0 in Q5.26; result in Q0.31. */
static int32_t exp_on_negative_values(int32_t a)
{
    static const int32_t barrel[7] = {1672461947, 1302514674, 790015084, 290630308,
                                      39332535,   720401,     242};
    const int fractional_bits = 31 - SOFTMAX_DIFF_INTEGER_BITS;
    const int32_t one_quarter = (int32_t)1 << (fractional_bits - 2);
    const int32_t mask = one_quarter - 1;
    const int32_t a_mod_quarter_minus_quarter = add_wrap(a & mask, -one_quarter);
    int32_t result = exp_quarter_interval(
        sat_rounding_mul_pot(a_mod_quarter_minus_quarter, SOFTMAX_DIFF_INTEGER_BITS));
    const int32_t remainder = (int32_t)((uint32_t)a_mod_quarter_minus_quarter - (uint32_t)a);
    for (int k = 0; k < 7; k++) { /* exponents -2 .. 4 */
        const int32_t bit = (int32_t)1 << (fractional_bits + k - 2);
        if (remainder & bit) {
            result = fw_srdhm(result, barrel[k]);
        }
    }
    return a == 0 ? FW_INT32_MAX : result;
}

/* 1 / (1 + a) for a in [0, 1), Q0.31: Newton-Raphson in Q2.29. */
static int32_t one_over_one_plus_x(int32_t a)
{
    const int64_t sum = (int64_t)a + FW_INT32_MAX;
    const int32_t half_denominator = (int32_t)((sum + (sum >= 0 ? 1 : -1)) / 2);
    const int32_t c48_17 = 1515870810;
    const int32_t cm32_17 = -1010580540;
    const int32_t one_q2 = (int32_t)1 << 29;
    int32_t x = add_wrap(c48_17, fw_srdhm(half_denominator, cm32_17));
    for (int i = 0; i < 3; i++) {
        const int32_t hdx = fw_srdhm(half_denominator, x);
        const int32_t one_minus = add_wrap(one_q2, -hdx);
        x = add_wrap(x, sat_rounding_mul_pot(fw_srdhm(x, one_minus), 2));
    }
    return sat_rounding_mul_pot(x, 1);
}

static int32_t exp_of_diff(const fw_softmax_t *p, int32_t diff)
{
    const int32_t scaled = fw_srdhm(fw_shl32(diff, p->input_left_shift), p->input_multiplier);
    return exp_on_negative_values(scaled);
}

void fw_softmax_int8(const fw_softmax_t *p, const int8_t *in, void *out)
{
    const int out_bits = p->out_dtype == FW_INT16 ? 16 : 8;
    const int32_t lo = p->out_dtype == FW_INT16 ? -32768 : -128;
    const int32_t hi = p->out_dtype == FW_INT16 ? 32767 : 127;
    for (uint32_t r = 0; r < p->rows; r++) {
        const int8_t *x = in + r * p->depth;
        int32_t max = -128;
        for (uint32_t i = 0; i < p->depth; i++) {
            if (x[i] > max) {
                max = x[i];
            }
        }
        int32_t sum = 0;
        for (uint32_t i = 0; i < p->depth; i++) {
            const int32_t diff = x[i] - max;
            if (diff >= p->diff_min) {
                sum = add_wrap(sum, fw_rdbpot(exp_of_diff(p, diff),
                                              SOFTMAX_ACCUMULATION_INTEGER_BITS));
            }
        }
        /* GetReciprocal(sum): 1 / sum scaled into Q0.31, with its extra bits */
        const int headroom_plus_one = sum == 0 ? 32 : __builtin_clz((uint32_t)sum);
        const int bits_over_unit = SOFTMAX_ACCUMULATION_INTEGER_BITS - headroom_plus_one;
        const uint32_t shifted = headroom_plus_one >= 32 ? 0u
                                                         : (uint32_t)sum << headroom_plus_one;
        const int32_t reciprocal = one_over_one_plus_x((int32_t)(shifted - 0x80000000u));
        const int exponent = bits_over_unit + 31 - out_bits;
        for (uint32_t i = 0; i < p->depth; i++) {
            const int32_t diff = x[i] - max;
            int32_t y = lo;
            if (diff >= p->diff_min) {
                const int32_t e = exp_of_diff(p, diff);
                const int64_t unsat = exponent >= 0
                    ? fw_rdbpot64(fw_srdhm(reciprocal, e), exponent)
                    : (int64_t)fw_srdhm(reciprocal, e) << -exponent;
                const int64_t v = unsat + lo;
                y = v < lo ? lo : (v > hi ? hi : (int32_t)v);
            }
            if (out_bits == 16) {
                ((int16_t *)out)[r * p->depth + i] = (int16_t)y;
            } else {
                ((int8_t *)out)[r * p->depth + i] = (int8_t)y;
            }
        }
    }
}

/* ---- ADD ------------------------------------------------------------------------------ */

static inline int8_t add_one(const fw_add_t *p, int32_t a, int32_t b)
{
    const int32_t va = fw_shl32(a + p->a_offset, p->left_shift);
    const int32_t vb = fw_shl32(b + p->b_offset, p->left_shift);
    const int32_t raw = add_wrap(fw_mbqm(va, p->a_multiplier, p->a_shift),
                                 fw_mbqm(vb, p->b_multiplier, p->b_shift));
    const int32_t y = fw_mbqm(raw, p->output_multiplier, p->output_shift) + p->output_offset;
    return (int8_t)fw_clamp(y, p->act_min, p->act_max);
}

void fw_add_int8(const fw_add_t *p, const int8_t *a, const int8_t *b, int8_t *out)
{
    if (p->dims == 0) {
        for (uint32_t i = 0; i < p->count; i++) {
            out[i] = add_one(p, a[i], b[i]);
        }
        return;
    }
    uint32_t index[FW_ADD_MAX_DIMS] = {0};
    uint32_t ai = 0, bi = 0;
    for (uint32_t i = 0; i < p->count; i++) {
        out[i] = add_one(p, a[ai], b[bi]);
        for (int d = p->dims - 1; d >= 0; d--) {
            index[d]++;
            ai += p->a_stride[d];
            bi += p->b_stride[d];
            if (index[d] < p->out_shape[d]) {
                break;
            }
            ai -= p->a_stride[d] * p->out_shape[d];
            bi -= p->b_stride[d] * p->out_shape[d];
            index[d] = 0;
        }
    }
}

/* ---- QUANTIZE / DEQUANTIZE ------------------------------------------------------------ */

static int32_t load_int(const void *data, uint8_t dtype, uint32_t i)
{
    return dtype == FW_INT16 ? ((const int16_t *)data)[i] : ((const int8_t *)data)[i];
}

static void store_int(void *data, uint8_t dtype, uint32_t i, int64_t v)
{
    if (dtype == FW_INT16) {
        ((int16_t *)data)[i] = (int16_t)(v < -32768 ? -32768 : (v > 32767 ? 32767 : v));
    } else {
        ((int8_t *)data)[i] = (int8_t)(v < -128 ? -128 : (v > 127 ? 127 : v));
    }
}

/* std::round on a float (ties away from zero), saturated to the int32 range. */
static int32_t round_float(float q)
{
    if (!(q == q)) {
        return 0; /* NaN */
    }
    if (q >= 2147483648.0f) {
        return FW_INT32_MAX;
    }
    if (q <= -2147483648.0f) {
        return FW_INT32_MIN;
    }
    const float a = q < 0 ? -q : q;
    int32_t t = (int32_t)a; /* truncation; exact below 2^31 */
    if (a - (float)t >= 0.5f) { /* exact: both below 2^24, or a is already whole */
        t++;
    }
    return q < 0 ? -t : t;
}

void fw_quantize(const fw_quant_t *p, const float *in, void *out)
{
    for (uint32_t i = 0; i < p->count; i++) {
        const float q = in[i] / p->scale; /* float32 division, as TFLM */
        store_int(out, p->out_dtype, i, (int64_t)round_float(q) + p->zero_point);
    }
}

void fw_requantize(const fw_quant_t *p, const void *in, void *out)
{
    for (uint32_t i = 0; i < p->count; i++) {
        const int32_t x = load_int(in, p->in_dtype, i) - p->in_zero_point;
        store_int(out, p->out_dtype, i,
                  (int64_t)fw_mbqm(x, p->multiplier, p->shift) + p->out_zero_point);
    }
}

void fw_dequantize(const fw_quant_t *p, const void *in, float *out)
{
    /* One float32 rounding of the exact product, the same as double then float32. */
    for (uint32_t i = 0; i < p->count; i++) {
        out[i] = p->scale * (float)(load_int(in, p->in_dtype, i) - p->zero_point);
    }
}
