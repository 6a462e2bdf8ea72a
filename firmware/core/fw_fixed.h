/* TFLM's integer arithmetic (gemmlowp fixed point), on int32 as the reference kernels do.
 *
 * Same definitions as engines/mcu/kernels/fixed_point.py, which the tests hold bit-exact
 * against TFLM; the firmware is built with -fwrapv so int32 sums wrap as they do there.
 *   srdhm(a, b)      = floor(a * b / 2^31 + 1/2), (-2^31)(-2^31) saturating
 *   rdbpot(x, e)     = x / 2^e, nearest, ties away from zero
 *   mbqm(x, m, s)    = rdbpot(srdhm(x * 2^max(s,0), m), max(-s,0))   (double rounding)
 */
#ifndef FW_FIXED_H
#define FW_FIXED_H

#include <stdint.h>

#define FW_INT32_MIN (-2147483647 - 1)
#define FW_INT32_MAX 2147483647

static inline int32_t fw_srdhm(int32_t a, int32_t b)
{
    if (a == FW_INT32_MIN && b == FW_INT32_MIN) {
        return FW_INT32_MAX;
    }
    int64_t ab = (int64_t)a * (int64_t)b;
    return (int32_t)((ab + ((int64_t)1 << 30)) >> 31);
}

/* 0 <= e <= 31 */
static inline int32_t fw_rdbpot(int32_t x, int e)
{
    const int32_t mask = (int32_t)((1u << e) - 1u);
    const int32_t remainder = x & mask;
    const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return (x >> e) + (remainder > threshold ? 1 : 0);
}

/* The same for any 0 <= e <= 62 on a 64-bit value (softmax can ask for e > 31). */
static inline int64_t fw_rdbpot64(int64_t x, int e)
{
    const int64_t mask = (int64_t)(((uint64_t)1 << e) - 1u);
    const int64_t remainder = x & mask;
    const int64_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return (x >> e) + (remainder > threshold ? 1 : 0);
}

static inline int32_t fw_shl32(int32_t x, int s)
{
    return (int32_t)((uint32_t)x << s);
}

static inline int32_t fw_mbqm(int32_t x, int32_t multiplier, int shift)
{
    const int left = shift > 0 ? shift : 0;
    const int right = shift > 0 ? 0 : -shift;
    return fw_rdbpot(fw_srdhm(fw_shl32(x, left), multiplier), right);
}

static inline int32_t fw_clamp(int32_t v, int32_t lo, int32_t hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

#endif
